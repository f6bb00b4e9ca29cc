"""`stepscope operator`: run the kopf operator with stepscope's handlers."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stepscope operator", description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (unset: $KUBECONFIG, else in-cluster)")
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="watch this namespace (repeatable; none: $STEPSCOPE_WATCH_NAMESPACES, else the whole cluster)",
    )
    parser.add_argument("--verbose", action="store_true", help="debug logs, every handler run included")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    if args.namespace:
        os.environ["STEPSCOPE_WATCH_NAMESPACES"] = ",".join(args.namespace)

    import kopf

    from stepscope_operator.config import OperatorConfig

    config = OperatorConfig.from_env()
    importlib.import_module("stepscope_operator.handlers")
    if importlib.util.find_spec("stepscope_operator.webhook") is not None:
        importlib.import_module("stepscope_operator.webhook")
    from stepscope_operator import logs

    logs.configure(args.verbose)
    kopf.run(
        standalone=True,
        clusterwide=not config.watch_namespaces,
        namespaces=list(config.watch_namespaces),
        liveness_endpoint=f"http://0.0.0.0:{config.health_port}/healthz",
    )
    return 0

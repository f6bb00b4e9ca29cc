"""`stepscope operator`: run the kopf operator with stepscope's handlers."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

PORT_VARIABLES = {"metrics": "STEPSCOPE_METRICS_PORT", "health": "STEPSCOPE_HEALTH_PORT"}
PORTS_FILE_VARIABLE = "STEPSCOPE_PORTS_FILE"


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


def any_free_port() -> int:
    """A port no socket holds now (the caller binds it right away, in this process)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        port: int = s.getsockname()[1]
        return port


def resolve_ports() -> dict[str, int]:
    """The metrics and health ports; `0` in their variables means any free port, chosen here and put back into the
    environment (the handlers read it from there). When STEPSCOPE_PORTS_FILE is set, the ports are written to it as
    JSON ({"metrics": N, "health": M}) so that a harness can find them."""
    ports: dict[str, int] = {}
    for name, variable in PORT_VARIABLES.items():
        text = os.environ.get(variable, "").strip()
        port = int(text) if text else {"metrics": 8080, "health": 8081}[name]
        chosen = port
        while port == 0 and (chosen == 0 or chosen in ports.values()):  # any free port, not the other one
            chosen = any_free_port()
        ports[name] = chosen
        os.environ[variable] = str(ports[name])
    target = os.environ.get(PORTS_FILE_VARIABLE, "").strip()
    if target:
        partial = Path(target + ".partial")
        partial.write_text(json.dumps(ports))
        partial.replace(target)
    return ports


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    if args.namespace:
        os.environ["STEPSCOPE_WATCH_NAMESPACES"] = ",".join(args.namespace)

    resolve_ports()

    import kopf

    from stepscope_operator.runtime.config import OperatorConfig

    config = OperatorConfig.from_env()
    importlib.import_module("stepscope_operator.handlers.runtime_secrets")  # first: the others read what it writes
    importlib.import_module("stepscope_operator.handlers.sessions")
    importlib.import_module("stepscope_operator.handlers.triggers")
    importlib.import_module("stepscope_operator.handlers.onboarding")
    if importlib.util.find_spec("stepscope_operator.webhook.admission") is not None:
        importlib.import_module("stepscope_operator.webhook.admission")
    from stepscope_operator.runtime import logs

    logs.configure(args.verbose)
    # uvloop's event loop: a third less CPU per sidecar exchange than asyncio's own at 10,000 targets
    # (bench/fanout.py); kopf's CLI picks it the same way, kopf.run() leaves the choice to its caller
    operator = kopf.operator(
        standalone=True,
        clusterwide=not config.watch_namespaces,
        namespaces=list(config.watch_namespaces),
        liveness_endpoint=f"http://0.0.0.0:{config.health_port}/healthz",
    )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner, contextlib.suppress(asyncio.CancelledError):
        runner.run(operator)  # as kopf.run() does, on the loop chosen here
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # an install without it runs on asyncio's loop
        return None
    return uvloop.new_event_loop

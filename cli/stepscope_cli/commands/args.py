"""The CLI commands' argument parsers, apart from the commands: `stepscope <command> --help` loads this module and
argparse, none of the contract's models or the command's work (stepscope_cli.main)."""

from __future__ import annotations

import argparse

CHECK_NAMES = ("crd", "operator", "storage", "team", "webhook")
"""the names `stepscope check --skip` takes: commands/check.py's CHECKS, sorted"""
MERGED_HELP = "only the merged trace of the ranks that matter (one process per rank, clocks aligned)"


def _session_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("session", help="the ProfileSession's name")
    p.add_argument("--namespace", "-n", default=None, help="its namespace (unset: the kubeconfig context's)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (unset: $KUBECONFIG, else in-cluster)")
    p.add_argument(
        "--install-namespace",
        default=None,
        help="namespace of the install's storage settings (unset: found by their labels, else stepscope)",
    )
    return p


def open_parser() -> argparse.ArgumentParser:
    p = _session_parser("stepscope open", "download a session's folder and show its report in the browser")
    p.add_argument("--dest", default=None, help="where to download it (unset: ./stepscope-<namespace>-<name>)")
    p.add_argument("--print", action="store_true", dest="print_only", help="print the report's path, open nothing")
    p.add_argument("--trace", action="store_true", help=MERGED_HELP + "; print its path and open Perfetto's UI")
    return p


def fetch_parser() -> argparse.ArgumentParser:
    p = _session_parser("stepscope fetch", "download a session's folder by its name (or a storage URI: as stored)")
    p.add_argument("dest", nargs="?", default=None, help="local folder (unset: ./stepscope-<namespace>-<name>)")
    p.add_argument("--merged", action="store_true", help=MERGED_HELP)
    return p


def wait_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stepscope wait",
        description="Wait for a ProfileSession to finish and exit 0 (passed), 1 (gate failed: regressed, slow or "
        "hung rank) or 2 (session failed, no gate decision, not found, timeout).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("session", help="the ProfileSession's name")
    parser.add_argument("--namespace", "-n", default=None, help="its namespace (unset: the kubeconfig context's)")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file (unset: $KUBECONFIG, else in-cluster)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait before giving up (exit 2)")
    parser.add_argument(
        "--ignore-slow-ranks", action="store_true", help="pass a session with slow or hung ranks (gate only)"
    )
    return parser


def check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stepscope check",
        description="Verify an install: CRD served, operator answering, webhook injecting, storage reachable.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file (unset: $KUBECONFIG, else in-cluster)")
    parser.add_argument(
        "--namespace", "-n", default=None, help="training namespace to check in (unset: the kubeconfig context's)"
    )
    parser.add_argument(
        "--install-namespace",
        default=None,
        help="namespace of the install's storage settings (unset: found by their labels, else stepscope)",
    )
    parser.add_argument(
        "--storage-uri", default=None, help="where to write the probe object (unset: the storage settings' URI)"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the operator's answer")
    parser.add_argument(
        "--skip", action="append", default=[], choices=CHECK_NAMES, help="leave this check out (repeatable)"
    )
    return parser


__all__ = ["CHECK_NAMES", "MERGED_HELP", "check_parser", "fetch_parser", "open_parser", "wait_parser"]

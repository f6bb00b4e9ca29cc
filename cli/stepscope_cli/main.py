"""`stepscope <subcommand>`: each subcommand lives in its component and is imported only when used,
so the sidecar image (no torch, no kopf) can run `stepscope sidecar` without the other components.

A subcommand's failure reaches its user as one line naming the cause and the fix (`failures.py`), with exit status 2;
`--debug` (anywhere on the command line, or STEPSCOPE_DEBUG=1) shows the traceback instead."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from stepscope_contract.plugin_lookup import VARIABLE, plugins_off_by_default

EXIT_FAILED = 2  # the command could not do its work (as `stepscope wait` and `stepscope check` use 2)
PYDANTIC_PLUGINS = VARIABLE
"""turned off for every subcommand unless already set (contract.plugin_lookup.plugins_off_by_default): looking for
pydantic plugins costs the first model built 13 ms, in `stepscope analyze` before its first rank begins"""

# subcommand -> (module, function, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "operator": ("stepscope_operator.main", "main", "run the kopf operator"),
    "sidecar": ("stepscope_sidecar.main", "main", "run the sidecar agent next to a training container"),
    "install-hook": ("stepscope_sidecar.install", "main", "copy the in-process hook into a shared volume"),
    "analyze": ("stepscope_analyzer.commands.cli", "analyze_main", "analyse traces from a folder or storage URI"),
    "diff": ("stepscope_analyzer.diff.command", "diff_main", "compare a run with a baseline: the regression gate"),
    "analyzer-job": ("stepscope_analyzer.commands.cli", "job_main", "the analyzer Job's entry point"),
    "fetch": (
        "stepscope_cli.commands.open_session",
        "fetch_main",
        "download a session's folder by name or storage URI",
    ),
    "open": ("stepscope_cli.commands.open_session", "open_main", "show a session's report (by name) in the browser"),
    "local-cluster": ("stepscope_local.cli", "cluster_main", "run the embedded local cluster"),
    "demo": ("stepscope_local.demo", "main", "profile a 4-rank training with a planted slow rank, end to end"),
    "check": ("stepscope_cli.commands.check", "main", "verify an install: CRD, operator, webhook, storage"),
    "wait": ("stepscope_cli.commands.wait", "main", "wait for a session and exit 0 passed, 1 gate failed, 2 failed"),
}

# a subcommand whose component is missing falls back to this one (fetch by URI needs no cluster)
FALLBACKS: dict[str, tuple[str, str]] = {"fetch": ("stepscope_storage.fetch", "main")}

# subcommand -> (module, function returning its argparse parser): what `--help` shows, checked by the tests. `--help`
# builds the parser from here without importing the command's module.
PARSERS: dict[str, tuple[str, str]] = {
    "operator": ("stepscope_operator.main", "build_parser"),
    "sidecar": ("stepscope_sidecar.main", "build_parser"),
    "install-hook": ("stepscope_sidecar.install", "build_parser"),
    "analyze": ("stepscope_analyzer.commands.cli", "analyze_parser"),
    "diff": ("stepscope_analyzer.diff.args", "diff_parser"),
    "analyzer-job": ("stepscope_analyzer.commands.job_args", "job_parser"),
    "fetch": ("stepscope_cli.commands.args", "fetch_parser"),
    "open": ("stepscope_cli.commands.args", "open_parser"),
    "local-cluster": ("stepscope_local.cli", "build_parser"),
    "demo": ("stepscope_local.demo", "build_parser"),
    "check": ("stepscope_cli.commands.args", "check_parser"),
    "wait": ("stepscope_cli.commands.args", "wait_parser"),
}


def version() -> str:
    from stepscope_contract.version import VERSION

    return VERSION


def usage() -> str:
    lines = ["usage: stepscope [--version] [--debug] <subcommand> [args...]", "", "subcommands:"]
    lines += [f"  {name:<14} {help_}" for name, (_, _, help_) in SUBCOMMANDS.items()]
    lines += [
        "",
        "`stepscope <subcommand> --help` lists a subcommand's options and their defaults.",
        "--debug (or STEPSCOPE_DEBUG=1): a failure's traceback instead of its one line of cause and fix.",
    ]
    return "\n".join(lines)


def parser_of(name: str) -> argparse.ArgumentParser:
    module, func = PARSERS[name]
    parser: argparse.ArgumentParser = getattr(importlib.import_module(module), func)()
    return parser


def _help(name: str, rest: list[str]) -> int:
    """`stepscope <name> ... --help`: the parser's help, from its own module (the command's work is not loaded)."""
    try:
        parser = parser_of(name)
    except ImportError as exc:
        print(f"stepscope {name}: this install lacks that component ({exc})", file=sys.stderr)
        return 2
    try:
        parser.parse_args(rest)
    except SystemExit as exc:  # argparse exits after printing the help (or a usage error)
        return int(exc.code or 0)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or os.environ.get("STEPSCOPE_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    if not args:
        print(usage(), file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if args[0] in ("-V", "--version", "version"):
        print(f"stepscope {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"stepscope: unknown subcommand '{name}'\n\n{usage()}", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help") for a in rest):
        return _help(name, rest)
    module_name, func_name, _ = SUBCOMMANDS[name]
    plugins_off_by_default()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if name in FALLBACKS:
            module_name, func_name = FALLBACKS[name]
            fallback: Callable[[list[str]], int] = getattr(importlib.import_module(module_name), func_name)
            return int(fallback(rest) or 0)
        print(
            f"stepscope {name}: this install lacks that component ({exc}); "
            f"install the matching extra, e.g. pip install 'stepscope[all]'",
            file=sys.stderr,
        )
        return 2
    func: Callable[[list[str]], int] = getattr(module, func_name)
    if debug:
        return int(func(rest) or 0)
    try:
        return int(func(rest) or 0)
    except KeyboardInterrupt:
        print(f"stepscope {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from stepscope_cli.failures import explain  # its imports serve only a failure

        print(explain(exc).line(name), file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())

"""`stepscope <subcommand>`: each subcommand lives in its component and is imported only when used,
so the sidecar image (no torch, no kopf) can run `stepscope sidecar` without the other components."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

# subcommand -> (module, function, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "operator": ("stepscope_operator.main", "main", "run the kopf operator"),
    "sidecar": ("stepscope_sidecar.main", "main", "run the sidecar agent next to a training container"),
    "install-hook": ("stepscope_sidecar.install", "main", "copy the in-process hook into a shared volume"),
    "analyze": ("stepscope_analyzer.cli", "analyze_main", "analyse traces from a folder or storage URI"),
    "diff": ("stepscope_analyzer.diff.command", "diff_main", "compare a run with a baseline: the regression gate"),
    "analyzer-job": ("stepscope_analyzer.cli", "job_main", "the analyzer Job's entry point"),
    "local-cluster": ("stepscope_local.cli", "cluster_main", "run the embedded local cluster"),
    "demo": ("stepscope_local.demo", "main", "profile a 4-rank training with a planted slow rank, end to end"),
}


def usage() -> str:
    lines = ["usage: stepscope <subcommand> [args...]", "", "subcommands:"]
    lines += [f"  {name:<14} {help_}" for name, (_, _, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"stepscope: unknown subcommand '{name}'\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, func_name, _ = SUBCOMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(
            f"stepscope {name}: this install lacks that component ({exc}); "
            f"install the matching extra, e.g. pip install 'stepscope[all]'",
            file=sys.stderr,
        )
        return 2
    func: Callable[[list[str]], int] = getattr(module, func_name)
    return int(func(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

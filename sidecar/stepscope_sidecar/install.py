"""`stepscope install-hook DEST`: copy sitecustomize.py and the stepscope_hook package into DEST."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import stepscope_hook


def install(dest: Path) -> list[Path]:
    """Copy the hook into `dest` (created if needed); returns what was written. Idempotent."""
    source = Path(stepscope_hook.__file__).resolve().parent
    dest.mkdir(parents=True, exist_ok=True)
    package = dest / "stepscope_hook"
    staging = dest / ".stepscope_hook.new"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if package.exists():
        shutil.rmtree(package)
    os.replace(staging, package)
    site = dest / "sitecustomize.py"
    tmp = dest / ".sitecustomize.py.new"
    shutil.copyfile(source / "sitecustomize.py", tmp)
    os.replace(tmp, site)
    return [site, package]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stepscope install-hook", description=__doc__)
    p.add_argument("dest", help="folder the training container has on PYTHONPATH, e.g. /stepscope/hook")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    for path in install(Path(args.dest)):
        print(f"installed {path}")
    return 0

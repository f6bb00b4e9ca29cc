"""Run every benchmark in bench/ in turn; each prints its figures as ratios against its bar or peer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHES = ["analyzer_vs_hta.py", "hook_overhead.py", "fanout.py", "report_browser.py", "gate_accuracy.py"]


def main() -> int:
    here = Path(__file__).resolve().parent
    failed: list[str] = []
    for name in BENCHES:
        script = here / name
        print(f"\n=== bench/{name}", flush=True)
        if not script.exists():
            print(f"missing: {script}")
            failed.append(name)
            continue
        if subprocess.run([sys.executable, str(script)], cwd=here.parent, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

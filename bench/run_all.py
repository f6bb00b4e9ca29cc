"""Run every benchmark in bench/ in turn; each prints its figures as ratios against its bar or peer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# diagnosis_accuracy.py generates its scenario corpus once (real gloo jobs: about an hour on 2 shared cores) and
# keeps it in .corpus/; later runs only analyse it.
BENCHES: list[list[str]] = [
    ["analyzer_vs_hta.py"],
    ["ranks_vs_hta.py", "--ranks", "8"],
    ["hook_overhead.py"],
    ["fanout.py", "--targets", "1000"],
    ["fanout.py", "--targets", "3000"],
    ["fanout.py", "--targets", "10000"],
    ["session_scale.py"],
    ["report_browser.py"],
    ["diagnosis_accuracy.py"],
    ["null_false_alarms.py"],
    ["wait_matching.py"],
    ["trigger_soak.py"],
    ["gate_accuracy.py"],
]


def main() -> int:
    here = Path(__file__).resolve().parent
    failed: list[str] = []
    for name, *args in BENCHES:
        script = here / name
        print(f"\n=== bench/{' '.join([name, *args])}", flush=True)
        if not script.exists():
            print(f"missing: {script}")
            failed.append(name)
            continue
        if subprocess.run([sys.executable, str(script), *args], cwd=here.parent, check=False).returncode != 0:
            failed.append(" ".join([name, *args]))
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

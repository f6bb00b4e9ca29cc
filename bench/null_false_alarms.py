"""False alarms of the diagnosis on simulated balanced jobs: how often it names a rank where no rank is slow.

The recorded corpus holds a few dozen balanced jobs; a threshold set on them is fitted on the data it is judged
on. This bench draws balanced data-parallel jobs from stepscope_testing.synthetic (every rank alike, independent
noise per rank and step, the synchronising all-reduce at the end of each step): 4, 8 and 16 ranks, 5, 6 and 8
steps, 5%, 10% and 15% noise, --jobs seeds each (1,080 jobs at the default 40). It prints, per shape and in all,
the jobs in which the whole diagnosis names a slow rank, with the defaults and with each value of `--fit
PARAM=v1,v2,...` (any DiagnosisConfig field; `inf` turns a test off).

    python bench/null_false_alarms.py [--jobs 40] [--fit replayed_gain_z=2,2.5,3,inf]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testing"))

from stepscope_analyzer.diagnosis import diagnose  # noqa: E402
from stepscope_analyzer.diagnosis.config import DiagnosisConfig  # noqa: E402
from stepscope_testing.config_grid import config_grid  # noqa: E402
from stepscope_testing.synthetic import JobShape, synthetic_job  # noqa: E402

WORLDS = (4, 8, 16)
STEPS = (5, 6, 8)
NOISES = (0.05, 0.10, 0.15)
SEED_BASE = 1000
"""seeds SEED_BASE.. (the unit tests draw from 0..)"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40, help="seeds per shape")
    parser.add_argument("--fit", help="PARAM=v1,v2,...: a DiagnosisConfig field's values to compare")
    args = parser.parse_args()
    settings = [("defaults", DiagnosisConfig())]
    settings += [(label, cfg) for label, _, cfg in config_grid(args.fit)] if args.fit else []
    totals = dict.fromkeys((label for label, _ in settings), 0)
    count = 0
    print(f"{'ranks':>5} {'steps':>5} {'noise':>5}  " + "  ".join(f"{label:>20}" for label, _ in settings))
    for world, steps, noise in itertools.product(WORLDS, STEPS, NOISES):
        named = dict.fromkeys(totals, 0)
        for seed in range(SEED_BASE, SEED_BASE + args.jobs):
            ranks = synthetic_job(JobShape(world_size=world, steps=steps), noise=noise, seed=seed)
            for label, cfg in settings:
                if diagnose(ranks, config=cfg).slow_ranks:
                    named[label] += 1
        count += args.jobs
        for label, n in named.items():
            totals[label] += n
        print(f"{world:>5} {steps:>5} {noise:>5.2f}  " + "  ".join(f"{named[label]:>20}" for label, _ in settings))
    print(f"false alarms over {count} balanced jobs: " + ", ".join(f"{label} {n}" for label, n in totals.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

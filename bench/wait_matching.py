"""Who waits for whom at scale: the central matching of every rank's communication calls (diagnosis/waits.py).

Builds N ranks x C calls (half all_reduces of one process group, half sends and receives around a ring, durations
drawn at random so that every rank waits for many others: the most edges the matching has to tell), runs
`matched_waits` on them and prints the time, against the reduce's own budget: the matching is one step of a reduce
that must finish a 1,024-rank session within seconds. No peer tool matches calls across ranks; the figure is
reported, with the bar below.

Usage: python bench/wait_matching.py [--ranks 1024] [--calls 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time

from stepscope_analyzer.diagnosis.waits import matched_waits
from stepscope_contract.report import MAX_COMM_CALLS, CommCalls, ProcessGroup, RankReport

BAR_S = 5.0
"""1,024 ranks x 1,024 calls within this many seconds"""


def ranks_with_calls(n: int, calls: int, seed: int = 0) -> list[RankReport]:
    rng = random.Random(seed)
    half = calls // 2
    world = ProcessGroup(name="0", desc="default_pg", ranks=list(range(n)))
    out = []
    for r in range(n):
        comm = CommCalls(
            ops=["allreduce", "send", "recv"],
            groups=["0:default_pg"],
            op_index=[0] * half + [1, 2] * (half // 2),
            group_index=[0] * half + [-1] * (2 * (half // 2)),
            peer=[-1] * half + [(r + 1) % n, (r - 1) % n] * (half // 2),
            step=[i // 64 for i in range(half + 2 * (half // 2))],
            start_us=[i * 1000.0 for i in range(half + 2 * (half // 2))],
            dur_us=[rng.uniform(10.0, 900.0) for _ in range(half + 2 * (half // 2))],
        )
        out.append(RankReport(rank=r, comm_calls=comm, process_groups=[world]))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--calls", type=int, default=MAX_COMM_CALLS)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    ranks = ranks_with_calls(a.ranks, min(a.calls, MAX_COMM_CALLS))
    best = float("inf")
    for _ in range(a.repeat):
        started = time.perf_counter()
        waits = matched_waits(ranks, None)
        best = min(best, time.perf_counter() - started)
    edges = sum(len(w.waits_for) for w in waits)
    print(f"{a.ranks} ranks x {min(a.calls, MAX_COMM_CALLS)} calls: matched in {best:.2f} s (best of {a.repeat}); "
          f"{len(waits)} waiting ranks, {edges} waits told")  # fmt: skip
    ok = a.ranks != 1024 or best <= BAR_S
    print(f"bar: 1,024 x 1,024 within {BAR_S:.0f} s: {best / BAR_S:.2f} of it {'OK' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

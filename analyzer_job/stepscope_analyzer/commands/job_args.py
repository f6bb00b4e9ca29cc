"""`stepscope analyzer-job`'s command line, apart from the Job's work: `--help` and a usage error load none of it."""

from __future__ import annotations

import argparse


def job_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope analyzer-job",
        description="analyse a ProfileSession's traces",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--session-json", required=True, help="the session as the operator accepted it (a SessionDocument, JSON)"
    )
    p.add_argument(
        "--mode",
        choices=["all", "map", "reduce", "delete"],
        default="all",
        help="all: one Job; map: per-rank shards; reduce; delete: the session's artifacts",
    )
    p.add_argument("--shards", type=int, default=1, help="number of map shards (Indexed Job completions)")
    p.add_argument("--index", type=int, default=None, help="map shard index (unset: $JOB_COMPLETION_INDEX or 0)")
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept per rank")
    p.add_argument(
        "--outcome-file", default=None, help="where the outcome goes as well (the container's termination message)"
    )
    return p

"""stepscope analyzer: Kineto trace parsing, per-rank summaries, diagnosis, report."""

import os

# numpy's OpenBLAS starts a thread per CPU that spins between calls (3-4% of a rank's CPU in perf on the 54 MB
# trace); the analyzer has no matrix work, so one thread, unless the environment says otherwise. Set before any
# module of the package imports numpy; the rank workers' fork server inherits it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

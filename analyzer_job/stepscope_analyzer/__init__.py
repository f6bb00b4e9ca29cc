"""stepscope analyzer: Kineto trace parsing, per-rank summaries, diagnosis, report."""

import os

# numpy's OpenBLAS starts a thread per CPU that spins between calls (3-4% of a rank's CPU in perf on the 54 MB
# trace); the analyzer has no matrix work, so one thread, unless the environment says otherwise. Set before any
# module of the package imports numpy; the rank workers, forked from the command, inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# pydantic reads the entry points of every installed distribution, looking for plugins, when it builds its first
# model (on the command's start-up path, before the first rank starts); the analyzer uses none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def tool_version() -> str:
    """The installed analyzer's version (reports, node summaries and outcomes carry it); importlib.metadata is
    imported here only, since the command's start-up never needs it."""
    from importlib import metadata

    try:
        return metadata.version("stepscope")
    except metadata.PackageNotFoundError:
        return "0.0.0"

"""stepscope analyzer: Kineto trace parsing, per-rank summaries, diagnosis, report."""

import os

from stepscope_contract.plugin_lookup import plugins_off_by_default

# numpy's OpenBLAS starts a thread per CPU that spins between calls (3-4% of a rank's CPU in perf on the 54 MB
# trace); the analyzer has no matrix work, so one thread, unless the environment says otherwise. Set before any
# module of the package imports numpy; the rank workers, forked from the command, inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# pydantic reads the entry points of every installed distribution, looking for plugins, when it builds its first
# model (on the command's start-up path, before the first rank starts); the analyzer uses none.
plugins_off_by_default()


def tool_version() -> str:
    """The analyzer's version (reports, node summaries and outcomes carry it): the project's (contract.version)."""
    from stepscope_contract.version import VERSION

    return VERSION

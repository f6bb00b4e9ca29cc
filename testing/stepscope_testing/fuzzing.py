"""Run an atheris fuzz target for a few seconds, as `make test` does for each target (`make fuzz` runs them at
length): the target must end on its own, find no crash, and keep a corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SECONDS = 5


def fuzz_briefly(target: Path, work: Path, *, max_len: int, rss_limit_mb: int = 1536, seconds: int = SECONDS) -> Path:
    """Run `target` for `seconds` with its corpus and any crash artifact under `work`; AssertionError (with the
    fuzzer's log) unless it ended cleanly without a crash. Returns the corpus folder."""
    corpus = work / "corpus"
    flags = [f"-max_total_time={seconds}", f"-max_len={max_len}", f"-rss_limit_mb={rss_limit_mb}", "-timeout=20"]
    result = subprocess.run(
        [sys.executable, str(target), *flags, f"-artifact_prefix={work}/", str(corpus)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "Done" in log and "crash-" not in log, log[-2000:]
    return corpus

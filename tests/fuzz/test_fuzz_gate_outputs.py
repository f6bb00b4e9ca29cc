"""The atheris fuzz target of diff.md and diff-junit.xml (fuzz_gate_outputs.py: op names from the input compared
and written as a pull request's summary and test result) runs for a few seconds without finding a crash; `make fuzz`
runs it longer. Skipped where atheris has no wheel (it is pinned for Linux x86_64)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.fuzz, pytest.mark.timeout(120)]
TARGET = Path(__file__).resolve().parent / "fuzz_gate_outputs.py"
SECONDS = 5


def test_diff_md_and_junit_survive_a_few_seconds_of_coverage_guided_fuzzing(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    pytest.importorskip("cmarkgfm")
    corpus = tmp_path / "corpus"
    flags = [f"-max_total_time={SECONDS}", "-max_len=4096", "-rss_limit_mb=1536", "-timeout=20"]
    result = subprocess.run(
        [sys.executable, str(TARGET), *flags, f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "Done" in log and "crash-" not in log, log[-2000:]
    assert len(list(corpus.iterdir())) > 1  # the seed plus what the fuzzer kept

"""The atheris fuzz target of the untrusted-input readers (fuzz_inputs.py: Flight Recorder dumps, GPU metrics, step
telemetry, admission reviews, report.json sides) runs for a few seconds without finding a crash; `make fuzz` runs it
longer. Skipped where atheris has no wheel (it is pinned for Linux x86_64)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_testing.fuzzing import fuzz_briefly

pytestmark = [pytest.mark.integration, pytest.mark.fuzz, pytest.mark.timeout(120)]
TARGET = Path(__file__).resolve().parent / "fuzz_inputs.py"


def test_the_readers_survive_a_few_seconds_of_coverage_guided_fuzzing(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus = fuzz_briefly(TARGET, tmp_path, max_len=16384)
    assert len(list(corpus.iterdir())) > 5  # the seeds plus what the fuzzer kept

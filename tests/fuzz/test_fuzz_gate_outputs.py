"""The atheris fuzz target of diff.md and diff-junit.xml (fuzz_gate_outputs.py: op names from the input compared
and written as a pull request's summary and test result) runs for a few seconds without finding a crash; `make fuzz`
runs it longer. Skipped where atheris has no wheel (it is pinned for Linux x86_64)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_testing.fuzzing import fuzz_briefly

pytestmark = [pytest.mark.integration, pytest.mark.fuzz, pytest.mark.timeout(120)]
TARGET = Path(__file__).resolve().parent / "fuzz_gate_outputs.py"


def test_diff_md_and_junit_survive_a_few_seconds_of_coverage_guided_fuzzing(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    pytest.importorskip("cmarkgfm")
    corpus = fuzz_briefly(TARGET, tmp_path, max_len=4096)
    assert len(list(corpus.iterdir())) > 1  # the seed plus what the fuzzer kept

"""The atheris fuzz target of the parser (fuzz_parser.py) runs for a few seconds without finding a crash; `make fuzz`
runs it longer. Skipped where atheris has no wheel (it is pinned for Linux x86_64)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_testing.fuzzing import fuzz_briefly

pytestmark = [pytest.mark.integration, pytest.mark.fuzz, pytest.mark.timeout(120)]
TARGET = Path(__file__).resolve().parent / "fuzz_parser.py"


def test_the_parser_survives_a_few_seconds_of_coverage_guided_fuzzing(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus = fuzz_briefly(TARGET, tmp_path, max_len=65536)
    assert len(list(corpus.iterdir())) > 3  # seeds plus what the fuzzer kept

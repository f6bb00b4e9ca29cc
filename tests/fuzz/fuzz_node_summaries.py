"""Coverage-guided fuzzing (atheris, libFuzzer) of a node summary through the analysis: reading it (caps, shape,
model), the reduce and the report (node_summary_target.one_summary). A crash libFuzzer reports is an exception, a
non-finite number in report.json or a report beyond its bound.

    python tests/fuzz/fuzz_node_summaries.py [libFuzzer flags] [CORPUS_DIR ...]

`make fuzz` runs it for FUZZ_SECONDS with a corpus in .fuzz/node_summaries; `make test` runs it for a few seconds
(test_fuzz_node_summaries.py). The honest summary of the recorded gloo rank 1 seeds an empty corpus.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
with atheris.instrument_imports(include=["stepscope_analyzer", "stepscope_contract"]):
    from node_summary_target import one_summary, seed


def main(argv: list[str]) -> None:
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        corpus = Path(dirs[0])
        corpus.mkdir(parents=True, exist_ok=True)
        if not any(corpus.iterdir()):
            (corpus / "honest.json").write_bytes(seed())
    atheris.Setup(argv, one_summary)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

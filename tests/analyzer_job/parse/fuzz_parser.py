"""Coverage-guided fuzzing of the Kineto parser with atheris (libFuzzer): any input bytes, parsed as stored (plain or
gzip) and in small chunks, must give a ParsedTrace or a TraceError; anything else is a crash libFuzzer reports with
the input that caused it.

    python tests/analyzer_job/parse/fuzz_parser.py [libFuzzer flags] [CORPUS_DIR ...]

`make test` runs it for a few seconds (test_fuzz_parser.py), `make fuzz` for longer with a corpus in .fuzz/parser.
Seeds (a small valid trace, plain and gzip) are written into the first corpus folder when it is empty.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["stepscope_analyzer"]):
    from stepscope_analyzer.parse import TraceError, parse_bytes, parse_trace

SEED = {
    "distributedInfo": {"rank": 0, "world_size": 2},
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 50.5},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "ts": 4, "bp": "e"},
    ],
}


def one_input(data: bytes) -> None:
    for parse in (lambda: parse_trace(data, chunk_bytes=64), lambda: parse_bytes(data, chunk_bytes=1 << 20)):
        with contextlib.suppress(TraceError):
            parse()


def _seed(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    if any(corpus.iterdir()):
        return
    text = json.dumps(SEED).encode()
    (corpus / "seed.json").write_bytes(text)
    (corpus / "seed.json.gz").write_bytes(gzip.compress(text))
    (corpus / "seed-list.json").write_bytes(json.dumps(SEED["traceEvents"]).encode())


def main(argv: list[str]) -> None:
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        _seed(Path(dirs[0]))
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

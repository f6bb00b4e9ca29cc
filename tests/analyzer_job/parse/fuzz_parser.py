"""Coverage-guided fuzzing of the Kineto parser with atheris (libFuzzer): any input bytes, parsed as stored (plain or
gzip) and in small chunks, must give a ParsedTrace or a TraceError, and the same one with the native fast path
(parse/_scan.c, where built) as without it; anything else is a crash libFuzzer reports with the input that caused
it (coverage guides the Python code; the native scanner sees the same inputs).

    python tests/analyzer_job/parse/fuzz_parser.py [libFuzzer flags] [CORPUS_DIR ...]

`make test` runs it for a few seconds (test_fuzz_parser.py), `make fuzz` for longer with a corpus in .fuzz/parser.
Seeds (a small valid trace, plain and gzip) are written into the first corpus folder when it is empty.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["stepscope_analyzer"]):
    from stepscope_analyzer.parse import ParsedTrace, TraceError, native, parse_bytes, parse_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "testing"))
from stepscope_testing.same_columns import differences

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


def _outcome(parse: Callable[[], ParsedTrace]) -> ParsedTrace | str:
    try:
        return parse()
    except TraceError as exc:
        return f"TraceError: {exc}"


def one_input(data: bytes) -> None:
    for parse in (lambda: parse_trace(data, chunk_bytes=64), lambda: parse_bytes(data, chunk_bytes=1 << 20)):
        fast = _outcome(parse)
        if not native.AVAILABLE:
            continue
        with native.enabled(False):
            slow = _outcome(parse)
        if isinstance(fast, str) or isinstance(slow, str):
            assert fast == slow, (fast, slow)
        else:
            assert differences(fast.events, slow.events) == [], differences(fast.events, slow.events)
            assert fast.metadata == slow.metadata


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

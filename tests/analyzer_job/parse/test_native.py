"""The parser's native fast path (parse/_scan.c) builds exactly the Python path's columns for every chunk it
accepts, and leaves every other chunk to the Python path: real traces (all of their chunks taken natively),
generated events of every shape the schema allows, and mutated text (byte flips, cuts) that it must either refuse
or read as the Python path does."""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.parse import TraceError, native, parse_trace
from stepscope_analyzer.parse.columns import ColumnBuilder
from stepscope_analyzer.parse.splitter import _decode_array
from stepscope_testing.same_columns import differences

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not native.AVAILABLE, reason="built without a C compiler")]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REAL = sorted(FIXTURES.glob("*.json.gz")) + sorted(FIXTURES.glob("cpu_jobs/cpu-compute-4r-hook-2x/ranks/*/*.gz"))


def _outcome(text: bytes, use_native: bool) -> Any:
    """What the builder makes of one chunk: its columns, the error it raises, or None when it is not JSON."""
    with native.enabled(use_native):
        events = _decode_array(memoryview(text))
    if events is None:
        return None
    builder = ColumnBuilder()
    try:
        builder.add_chunk(events)
        return builder.finish()
    except TraceError as exc:
        return f"TraceError: {exc}"


def _same(text: bytes) -> bool:
    """Both paths agree on `text`; True when the native path took it."""
    took = native.scan(memoryview(text)) is not None
    fast, slow = _outcome(text, True), _outcome(text, False)
    if isinstance(fast, str) or fast is None:
        assert fast == slow
    else:
        assert not isinstance(slow, str) and slow is not None, slow
        assert differences(fast, slow) == []
    return took


@pytest.mark.parametrize("trace", REAL, ids=lambda p: p.name)
def test_real_traces_parse_the_same_and_natively(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with native.enabled(False):
        slow = parse_trace(trace, chunk_bytes=4096)
    taken: list[bool] = []
    scan = native._scan
    assert scan is not None

    def counting(chunk: Any) -> Any:
        out = scan(chunk)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(native, "_scan", counting)
    fast = parse_trace(trace, chunk_bytes=4096)
    assert differences(fast.events, slow.events) == []
    assert fast.metadata == slow.metadata
    assert taken and all(taken)  # every chunk of a real trace takes the fast path


def test_the_hta_traces_parse_the_same(hta_traces: Path) -> None:
    for trace in sorted(hta_traces.glob("*.json.gz"))[:4]:
        with native.enabled(False):
            slow = parse_trace(trace)
        assert differences(parse_trace(trace).events, slow.events) == [], trace.name


NUMBER = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 1.0, -0.0, 2.5, 1e300, 123456789012.25]),
)
TEXT = st.one_of(
    st.sampled_from(["aten::mm", "", "ProfilerStep#3", "Trace", "thread_name", "kernel", "cpu_op", "Traces"]),
    st.text(max_size=12),
)
VALUE = st.one_of(st.none(), st.booleans(), NUMBER, TEXT, st.lists(st.integers(), max_size=3))
ARG_KEYS = ["stream", "correlation", "External id", "name", "Collective name", "Process Group Name", "Group size",
            "dtype", "Input Dims", "other"]  # fmt: skip
ARGS = st.one_of(st.none(), st.integers(), st.dictionaries(st.sampled_from(ARG_KEYS), VALUE, max_size=6))
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.one_of(st.sampled_from(list("XMisftBE")), st.sampled_from(["Q", "XX", ""]), st.integers()),
        "cat": st.one_of(TEXT, st.none(), st.integers()),
        "name": st.one_of(TEXT, st.none(), st.integers()),
        "pid": VALUE,
        "tid": VALUE,
        "ts": st.one_of(NUMBER, st.none(), st.booleans(), TEXT),
        "dur": st.one_of(NUMBER, st.none(), TEXT),
        "args": ARGS,
        "id": VALUE,
    },
)


INT64 = st.integers(-(2**63), 2**63 - 1)
UNESCAPED = st.characters(exclude_categories=["Cs", "Cc"], exclude_characters='"\\')
PLAIN = st.one_of(
    st.sampled_from(["aten::mm", "", "ProfilerStep#3", "Trace", "thread_name", "cpu_op", "kernel"]),
    st.text(UNESCAPED, max_size=8),
)
SMALL_NUMBER = st.one_of(INT64, st.floats(-1e15, 1e15), st.none())
COMMON_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "stream": SMALL_NUMBER,
        "correlation": SMALL_NUMBER,
        "External id": SMALL_NUMBER,
        "name": st.one_of(PLAIN, VALUE),
        "Collective name": st.one_of(PLAIN, st.none()),
        "Process Group Name": st.one_of(PLAIN, st.none()),
        "Process Group Ranks": st.lists(st.integers(0, 7), max_size=4),
        "Input Dims": st.lists(st.lists(st.integers(0, 9), max_size=3), max_size=3),
        "Concrete Inputs": st.lists(st.one_of(PLAIN, st.floats(allow_nan=False, allow_infinity=False)), max_size=3),
    },
)
COMMON_EVENT = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(list("XXXXMisf")),
        "ts": st.one_of(INT64, st.floats(-1e15, 1e15)),
        "cat": st.one_of(PLAIN, PLAIN, st.none()),
        "dur": st.one_of(INT64, st.floats(0, 1e9), st.none()),
    },
    optional={
        "name": PLAIN,
        "pid": st.one_of(INT64, st.none(), st.integers(-5, 5).map(float)),
        "tid": st.one_of(INT64, st.none()),
        "args": st.one_of(COMMON_ARGS, st.none()),
        "bp": st.just("e"),
    },
)


@given(st.lists(COMMON_EVENT, min_size=1, max_size=8), st.sampled_from([None, 1]))
def test_generated_common_events_parse_the_same(events: list[dict[str, Any]], indent: int | None) -> None:
    """Events of the shapes real traces have: the fast path takes most of these chunks (`taken` below)."""
    _same(json.dumps(events, indent=indent, ensure_ascii=False).encode())


def test_the_common_shapes_are_taken_natively() -> None:
    rng = random.Random(3)
    names = ["aten::mm", "ProfilerStep#3", "nccl:all_reduce", "é", "Trace", "void k<float>(int)"]

    def event() -> dict[str, Any]:
        ev: dict[str, Any] = {"ph": rng.choice("XXXMif"), "ts": rng.choice([rng.randint(0, 2**52), rng.random()])}
        for key, value in (("cat", rng.choice(names)), ("name", rng.choice(names)), ("pid", rng.randint(0, 9)),
                           ("tid", rng.randint(0, 9)), ("dur", rng.choice([rng.randint(0, 999), 2.5, None])),
                           ("args", {"External id": rng.randint(0, 99), "stream": rng.choice([7, None]),
                                     "Input Dims": [[1, 2]], "name": rng.choice(names)})):  # fmt: skip
            if rng.random() < 0.8:
                ev[key] = value
        return ev

    chunks = [json.dumps([event() for _ in range(8)], ensure_ascii=False).encode() for _ in range(100)]
    assert all(_same(text) for text in chunks)  # every one taken natively, and read as the Python path reads it


@given(st.lists(EVENT, max_size=8), st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_generated_events_parse_the_same(
    events: list[dict[str, Any]], separators: tuple[str, str], ascii: bool
) -> None:
    _same(json.dumps(events, separators=separators, ensure_ascii=ascii).encode())


def test_common_events_take_the_fast_path() -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5.5,
         "args": {"External id": 3, "Input Dims": [[2, 3], []], "stream": 7.0, "correlation": 2.5}},
        {"ph": "X", "cat": "kernel", "name": "nccl", "pid": 0, "tid": 7, "ts": 11.25, "dur": 3,
         "args": {"Collective name": "allreduce", "Process Group Ranks": [0, 1], "dtype": "Float"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main thread"}},
        {"ph": "i", "name": "Iteration Start", "pid": "Traces", "tid": "PyTorch Profiler", "ts": 1, "s": "g"},
        {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "ts": 4, "bp": "e"},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Traces", "ts": 0, "dur": 9},
    ]  # fmt: skip
    text = json.dumps(events, indent=2).encode()
    assert _same(text)
    columns = _outcome(text, True)
    assert columns.collective_args == {1: {"Collective name": "allreduce", "Process Group Ranks": [0, 1],
                                           "dtype": "Float"}}  # fmt: skip
    assert columns.thread_names == {(1, 2): "main thread"}
    assert columns.stream.tolist() == [7, -1] and columns.correlation.tolist() == [-1, -1]  # 7.0 read as 7


LAYOUTS = [(", ", ": "), (",", ":"), (",\n    ", ": "), (", ", ":  "), (" ,", " : "), (",\t", ":")]
"""separators an event's members may be written with: the scanner remembers the text between members as last seen
at each position and must notice every way the next event differs from it"""


def _event_text(members: list[tuple[str, Any]], layout: tuple[str, str]) -> str:
    comma, colon = layout
    return "{" + comma.join(f"{json.dumps(k)}{colon}{json.dumps(v)}" for k, v in members) + "}"


ROW = [("ph", "X"), ("cat", "cpu_op"), ("name", "aten::mm"), ("pid", 1), ("tid", 2), ("ts", 10), ("dur", 5),
       ("args", {"External id": 3, "Ev Idx": 4})]  # fmt: skip
FLOW = [("ph", "f"), ("id", 1), ("pid", 1), ("tid", 2), ("ts", 4), ("cat", "ac2g"), ("name", "ac2g"), ("bp", "e")]
OTHER = [("ph", "X"), ("cat", "kernel"), ("name", "k"), ("pid", 0), ("tid", 7), ("ts", 11), ("dur", 3),
         ("args", {"stream": 7, "correlation": 9, "device": 0})]  # fmt: skip


@given(
    st.lists(
        st.tuples(st.sampled_from([ROW, FLOW, OTHER]), st.sampled_from(LAYOUTS), st.integers(0, 9), st.integers(0, 3)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([",", ",\n  ", " , "]),
)
def test_events_that_change_layout_between_them_parse_the_same(
    plan: list[tuple[list[tuple[str, Any]], tuple[str, str], int, int]], between: str
) -> None:
    """Events of three key orders and six ways of writing their separators, interleaved, some with a member dropped,
    a known key written twice or a key with an escape in it: each event read as the Python path reads it."""
    texts = []
    for members, layout, drop, change in plan:
        text = _event_text([m for i, m in enumerate(members) if i != drop], layout)
        if change == 1:  # a known key twice, where the previous event had another key
            text = text[:-1] + layout[0] + '"ts"' + layout[1] + "1}"
        elif change == 2:  # the same key written with an escape
            text = text.replace('"pid"', '"p\\u0069d"', 1)
        texts.append(text)
    _same(("[" + between.join(texts) + "]").encode())


def test_a_remembered_layout_is_not_taken_where_the_text_differs() -> None:
    """The second event of each chunk starts like the first but differs inside a remembered gap, or ends within
    one; each chunk is read as the Python path reads it (taken where valid)."""
    first = _event_text(ROW, (", ", ": "))
    variants = {
        "same": (first, True),
        "more space after a colon": (first.replace('"cat": ', '"cat":   '), True),
        "space before a comma": (first.replace(', "name"', ' , "name"'), True),
        "another key at a position": (first.replace('"tid"', '"tjd"'), True),
        "a key twice": (first.replace('"tid"', '"pid"'), False),
        "a missing colon": (first.replace('"dur": ', '"dur" '), False),
        "a missing comma": (first.replace(', "ts"', ' "ts"'), False),
    }
    for label, (second, valid) in variants.items():
        text = f"[{first}, {second}]".encode()
        assert _same(text) == valid, label
    for cut in range(len(first) + 3, len(first) * 2 + 2, 7):
        _same(f"[{first}, {first}]".encode()[:cut] + b"]")  # ends inside the second event


DECIMAL = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.integers(1, 10**22).map(str)),
    st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=22).map(lambda d: "." + d)),
    st.one_of(st.just(""), st.integers(-40, 40).map(lambda e: f"e{e:+d}"), st.integers(0, 25).map(lambda e: f"E{e}")),
)


def _float_text_event(ts: str, dur: str) -> bytes:
    return f'[{{"ph": "X", "cat": "c", "name": "n", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}}}]'.encode()


def _scanned(text: bytes) -> list[float | int]:
    """The scanner's own ts and dur of a one-event chunk (before the columns round them to ns): ints as ints,
    doubles as doubles."""
    scanned = native.scan(memoryview(text))
    assert scanned is not None
    c = scanned.columns
    return [struct.unpack("<d" if c[f"{key}_float"] else "<q", c[key])[0] for key in ("ts", "dur")]


def _as_python_reads(number: str) -> float | int:
    return int(number) if number.lstrip("-").isdigit() else float(number)


def _bits(values: list[float | int]) -> list[bytes | int]:
    return [struct.pack("<d", v) if isinstance(v, float) else v for v in values]


@given(DECIMAL, DECIMAL)
def test_decimal_numbers_read_as_python_reads_them(ts: str, dur: str) -> None:
    """Numbers with a fraction or an exponent, of every length around the exact shortcut's bounds (19 significant
    digits, 2^53, 10^+-22): the same double as float(), to the bit, or left to the Python path."""
    text = _float_text_event(ts, dur)
    if _same(text):
        assert _bits(_scanned(text)) == _bits([_as_python_reads(ts), _as_python_reads(dur)])


@pytest.mark.parametrize(
    "number",
    ["4481693927634.424", "9007199254740.993", "9007199254740993.0", "0.000000000000000000000001", "-0.0", "1e22",
     "1e23", "123456789012345678.9", "0.1", "5e-324", "1.7976931348623157e308", "17.25e-3", "3.0E+2"],
)  # fmt: skip
def test_decimals_at_the_edges_of_the_exact_shortcut(number: str) -> None:
    text = _float_text_event(number, "1.5")
    assert _same(text)
    assert _bits(_scanned(text)) == _bits([float(number), 1.5])


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "cat": "a", "name": "a\\u00e9", "ts": 1, "dur": 1}]',  # an escaped name
        b'[{"ph": "X", "cat": "a", "name": "a", "pid": "p", "ts": 1, "dur": 1}]',  # a label pid on a row
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 1, "ts": 2, "dur": 1}]',  # a key twice
        b'[{"ph": "X", "cat": "a", "name": "\xff", "ts": 1, "dur": 1}]',  # a name that is not UTF-8
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 99999999999999999999, "dur": 1}]',  # beyond int64
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 1e999, "dur": 1}]',  # not finite
        b'[{"ph": "X", "cat": "a", "name": "a", "dur": 1}]',  # a complete event without ts
        b'[{"ph": "Q", "cat": "a", "name": "a", "ts": 1, "dur": 1}]',  # an unknown phase
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1, "args": {"correlation": 1e19}}]',  # > int64
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1, "args": {"stream": -1e300}}]',
        b"[1]",
        b'[{"ph": "X", "args": ' + b"[" * 80 + b"]" * 80 + b"}]",  # nested past the scanner's depth
    ],
)
def test_what_the_fast_path_leaves_to_the_python_path(text: bytes) -> None:
    assert native.scan(memoryview(text)) is None
    _same(text)


def test_mutated_text_is_refused_or_read_the_same() -> None:
    base = (FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz").read_bytes()
    doc = json.loads(gzip.decompress(base))
    text = json.dumps(doc["traceEvents"][:60], indent=1).encode()
    rng = random.Random(7)
    taken = 0
    for _ in range(400):
        mutated = bytearray(text)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(mutated))
            mutated[at] = rng.choice(b'{}[],:"\\ 0123456789-.eEtfnul\x00\xff')
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)) :]
        taken += _same(bytes(mutated))
    assert 0 < taken < 400  # some mutations keep it valid, others do not


@pytest.mark.parametrize(("value", "taken"), [("0", "False"), ("1", "True")])
def test_the_environment_switch_turns_the_fast_path_off(value: str, taken: str) -> None:
    code = "from stepscope_analyzer.parse import native; print(native.scan(b'[]') is not None)"
    env = {**os.environ, native.SWITCH: value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == taken


def test_chunks_grow_while_the_scanner_takes_them_and_the_python_path_gets_small_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Native chunks are NATIVE_SCALE times the chunk size; where events the scanner refuses (names with \\u
    escapes) come, the text is cut again at the chunk size for the Python path, and the columns are the all-Python
    parse's."""
    from stepscope_analyzer.parse import parse_bytes, splitter

    def event(i: int, name: str) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5,
                "args": {"External id": i}}  # fmt: skip

    events = [event(i, f"op{i % 7}") for i in range(3000)]
    events[1500:1510] = [event(i, "caf\u00e9") for i in range(1500, 1510)]  # written as "caf\u00e9": refused
    text = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, indent=1).encode()
    calls: list[tuple[int, bool, bool]] = []
    decode = splitter._decode_array

    def recording(view: memoryview, native_only: bool = False) -> Any:
        out = decode(view, native_only)
        calls.append((len(view), isinstance(out, native.ScannedChunk), native_only))
        return out

    monkeypatch.setattr(splitter, "_decode_array", recording)
    chunk = 8192
    parsed = parse_bytes(text, chunk_bytes=chunk)
    longest_event = max(len(json.dumps(e, indent=1)) for e in events) + 16
    assert max(size for size, took, _ in calls if took) > 2 * chunk  # the native chunks grew
    python_sizes = [size for size, took, only in calls if not took and not only]
    assert python_sizes and max(python_sizes) <= chunk + longest_event  # the refused part went small
    with native.enabled(False):
        expected = parse_bytes(text, chunk_bytes=chunk)
    assert differences(parsed.events, expected.events) == []
    assert parsed.metadata == {"displayTimeUnit": "ms"} and len(parsed.events) == 3000


def _items_outcome(text: bytes, start: int, end: int) -> Any:
    scanned = native.scan_items(text, start, end)
    return None if scanned is None else scanned.columns


def test_items_read_as_the_array_of_them() -> None:
    """scan_items(text, s, e) reads text[s:e] exactly as scan reads "[" + text[s:e] + "]": on slices of a real
    trace's events (cut at event boundaries and anywhere), and on mutated text; only an empty slice differs (no
    events: refused, where scan reads an empty array)."""
    base = (FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz").read_bytes()
    doc = json.loads(gzip.decompress(base))
    text = json.dumps(doc["traceEvents"][:80], indent=1).encode()
    inner = text[1:-1]
    cuts = [i for i in range(len(inner)) if inner[i : i + 1] == b","]  # a slice from past one, or up to one
    rng = random.Random(11)
    taken = refused = 0
    for _ in range(400):
        mutated = bytearray(inner)
        if rng.random() < 0.5:
            for _ in range(rng.randint(1, 3)):
                mutated[rng.randrange(len(mutated))] = rng.choice(b'{}[],:"\\ 0123456789-.eEtfnul\x00\xff')
        start = rng.choice([0, *(cut + 1 for cut in rng.sample(cuts, 3))])
        end = rng.choice([len(mutated), *rng.sample(cuts, 3), rng.randrange(len(mutated) + 1)])
        start, end = min(start, end), max(start, end)
        got = _items_outcome(bytes(mutated), start, end)
        expected = native.scan(b"[" + bytes(mutated[start:end]) + b"]")
        if not mutated[start:end].strip():
            assert got is None
            continue
        assert got == (None if expected is None else expected.columns)
        taken += got is not None
        refused += got is None
    assert taken > 20 and refused > 20
    whole = _items_outcome(inner, 0, len(inner))
    assert whole is not None and whole["events"] == 80


@pytest.mark.parametrize(
    "items",
    [
        b'{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1},',  # a trailing comma
        b',{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1}',  # a leading one
        b'{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1}, 1',  # not an object
        b'{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1}]',  # a bracket of the array's
        b'[{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1}]',  # the whole array
        b"  ",
    ],
)
def test_items_outside_the_array_grammar_are_refused(items: bytes) -> None:
    assert native.scan_items(items, 0, len(items)) is None


def test_items_bounds_are_checked() -> None:
    from stepscope_analyzer.parse._scan import scan_items

    text = b'{"ph": "X", "cat": "a", "name": "a", "ts": 1, "dur": 1}'
    assert scan_items(b"xx" + text + b"yy", 2, 2 + len(text))["rows"] == 1  # type: ignore[index]
    for start, end in ((-1, 3), (3, 2), (0, len(text) + 1)):
        with pytest.raises(ValueError, match="start and end"):
            scan_items(text, start, end)

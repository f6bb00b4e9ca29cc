"""A node summary, whatever it holds, costs the analysis at most its own rank: arbitrary JSON put anywhere in an
honest summary, and arbitrary bytes spliced into it, are read (or refused with a reason), reduced with an honest peer
and written as a report with finite numbers and a bounded size (node_summary_target.one_summary; hypothesis for a
few seconds here and at length in `make fuzz`, which also runs the atheris target fuzz_node_summaries.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from node_summary_target import one_summary, seed

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(900)]  # `make fuzz` runs thousands of examples

leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
)


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:3]):
            out += _paths(value, (*path, i))
    return out


DOC = json.loads(seed())
PATHS = _paths(DOC)[1:]


def _replaced(path: tuple[Any, ...], value: Any) -> bytes:
    doc = json.loads(seed())
    at = doc
    for step in path[:-1]:
        at = at[step]
    at[path[-1]] = value
    return json.dumps(doc).encode()  # NaN and Infinity as JSON's NaN, Infinity


@settings(max_examples=max(10, settings.default.max_examples // 3))  # each usable one is reduced and reported
@given(st.sampled_from(PATHS), json_values)
def test_any_value_anywhere_in_a_summary(path: tuple[Any, ...], value: Any) -> None:
    one_summary(_replaced(path, value))


@given(st.integers(min_value=0, max_value=len(seed())), st.binary(max_size=40), st.integers(min_value=0, max_value=40))
def test_any_bytes_spliced_into_a_summary(at: int, data: bytes, cut: int) -> None:
    raw = seed()
    one_summary(raw[:at] + data + raw[at + cut :])

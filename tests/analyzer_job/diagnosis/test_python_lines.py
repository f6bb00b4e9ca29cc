"""The Python lines behind a host finding, from folded stacks (diagnosis.python_lines, analyses.folded_stacks):
- the deepest function that holds the named rank's excess is named, with the line that holds most of it;
- frames every rank runs alike (the loop, forward, backward) and the peers' waits are never named;
- work spread over a function's lines or its comprehensions counts as that function;
- less than one sample per step (a sample shifted to where the GIL was let go) names nothing;
- a file outside the hook's format or caps is refused or cut while it is read."""

from __future__ import annotations

import json

import pytest

from stepscope_analyzer.analyses.folded_stacks import FoldedStacksError, read_folded
from stepscope_analyzer.diagnosis.python_lines import python_lines
from stepscope_contract.python_stacks import HEADER_PREFIX, MAX_FRAMES, MAX_STACKS

pytestmark = pytest.mark.unit

LOOP = "<module> (train.py:90);main (train.py:40)"


def folded(stacks: dict[str, int], ticks: int = 50, steps: int = 5, window_ms: float = 500.0) -> bytes:
    """One sample weighs window_ms / ticks / steps = 2 ms per step."""
    header = {"hz": 100, "ticks": ticks, "windowMs": window_ms, "steps": steps, "dropped": 0}
    body = "".join(f"{k} {v}\n" for k, v in stacks.items())
    return (HEADER_PREFIX + json.dumps(header) + "\n" + body).encode()


def peer(wait: int = 26) -> bytes:
    return folded({f"{LOOP};forward (model.py:10)": 10, f"{LOOP};backward (torch/_tensor.py:600)": 10 + wait})


def test_the_deepest_function_with_the_excess_is_named_with_its_line() -> None:
    slow = folded({
        f"{LOOP};forward (model.py:10)": 10,
        f"{LOOP};backward (torch/_tensor.py:600)": 10,
        f"{LOOP};load (data.py:20);decode (data.py:31)": 28,
        f"{LOOP};load (data.py:20);decode (data.py:33)": 2,
    })  # fmt: skip
    (line,) = python_lines(read_folded(slow), [read_folded(peer()), read_folded(peer(24))])
    assert (line.function, line.file, line.line) == ("decode", "data.py", 31)
    assert line.ms_per_step == pytest.approx(60.0) and line.peers_ms_per_step == 0.0
    assert line.callers == ["load (data.py:20)", "main (train.py:40)", "<module> (train.py:90)"]


def test_a_comprehension_counts_as_the_function_it_is_written_in() -> None:
    slow = folded({
        f"{LOOP};forward (model.py:10)": 10,
        f"{LOOP};parse (io.py:5)": 8,
        f"{LOOP};parse (io.py:6);<genexpr> (io.py:6)": 20,
        f"{LOOP};parse (io.py:6);<listcomp> (io.py:7)": 8,
    })  # fmt: skip
    (line,) = python_lines(read_folded(slow), [read_folded(peer()), read_folded(peer())])
    assert (line.function, line.line) == ("parse", 6) and line.excess_ms_per_step == pytest.approx(72.0)


def test_what_every_rank_runs_alike_is_never_named() -> None:
    same = folded({f"{LOOP};forward (model.py:10)": 10, f"{LOOP};backward (torch/_tensor.py:600)": 36})
    assert python_lines(read_folded(same), [read_folded(peer()), read_folded(peer())]) == []


def test_less_than_one_sample_per_step_names_nothing() -> None:
    skid = folded({f"{LOOP};forward (model.py:10)": 10, f"{LOOP};backward (torch/_tensor.py:600)": 36,
                   f"{LOOP};load (data.py:20);__enter__ (torch/autograd/profiler.py:919)": 4})  # fmt: skip
    assert python_lines(read_folded(skid), [read_folded(peer()), read_folded(peer())]) == []


def test_a_file_not_the_hooks_is_refused_and_one_beyond_the_caps_is_cut() -> None:
    with pytest.raises(FoldedStacksError):
        read_folded(b"main;f 3\n")
    with pytest.raises(FoldedStacksError):
        read_folded((HEADER_PREFIX + '{"hz": 100, "ticks": -1, "windowMs": 1, "steps": 1}\n').encode())
    deep = ";".join(f"f{i} (x.py:{i})" for i in range(MAX_FRAMES + 5))
    many = {f"{LOOP};g{i} (x.py:1)": 1 for i in range(MAX_STACKS + 10)}
    stacks = read_folded(folded({deep: 3, **many}) + b"no count here\n")
    assert len(stacks.stacks) == MAX_STACKS and stacks.skipped == 1 + 10 + 1

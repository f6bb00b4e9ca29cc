"""Hypothesis strategies for the inputs that reach stepscope from outside: JSON values of any shape, documents that
look like a Flight Recorder dump, a GPU metrics line, a step telemetry reply or an AdmissionReview and then are bent
(fields of the wrong type, out-of-range numbers, NaN and Infinity, extra and missing keys), and raw bytes that are
sometimes gzip. The property tests (pytest -m fuzz) feed them to the readers, which must answer with their own
error type or a valid value, never with another exception."""

from __future__ import annotations

import gzip
import json
from typing import Any

from hypothesis import strategies as st

NUMBERS = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -1, 1, 2**31, 2**63, 2**64, 1e308, -0.0])
)
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=12)

json_values = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


def bent(template: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`template` with some of its keys replaced by any JSON value, dropped, or joined by an unknown key."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        doc = dict(template)
        for key in list(doc):
            choice = draw(st.integers(0, 5))
            if choice == 0:
                doc[key] = draw(json_values)
            elif choice == 1:
                del doc[key]
        if draw(st.booleans()):
            doc[draw(st.text(max_size=8))] = draw(json_values)
        return doc

    return build()


def encoded(doc: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON bytes of `doc` (NaN and Infinity written as Python does), sometimes gzip, sometimes cut short."""

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        data = json.dumps(draw(doc)).encode()
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        return gzip.compress(data) if draw(st.booleans()) else data

    return build() | st.binary(max_size=512)


def frame() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "name": st.text(max_size=8),
            "filename": st.sampled_from(["/app/t.py", "/x/torch/d.py", "<f>", ""]),
            "line": st.integers(-2, 2**32),
        }
    )


def fr_entry() -> st.SearchStrategy[dict[str, Any]]:
    sizes = st.lists(st.lists(st.integers(-1, 2**40), max_size=4), max_size=3)
    entry = st.fixed_dictionaries(
        {
            "process_group": st.lists(st.sampled_from(["0", "1", "default_pg", "tp", ""]), min_size=0, max_size=3),
            "profiling_name": st.sampled_from(["gloo:all_reduce", "nccl:broadcast", "nccl:send 0->1", "", "x"]),
            "collective_seq_id": st.integers(-2, 50),
            "pg_id": st.integers(-1, 3),
            "input_sizes": sizes,
            "output_sizes": sizes,
            "input_dtypes": st.lists(st.sampled_from(["Float", "Half", ""]), max_size=3),
            "state": st.sampled_from(["completed", "scheduled", "started", ""]),
            "retired": st.booleans(),
            "is_p2p": st.booleans(),
            "time_created_ns": st.integers(-1, 2**64),
            "frames": st.lists(frame(), max_size=3),
        }
    )
    return entry.flatmap(bent)


def fr_dump(rank: int | None = None) -> st.SearchStrategy[dict[str, Any]]:
    groups = st.dictionaries(
        st.sampled_from(["0", "1", "tp"]),
        st.fixed_dictionaries(
            {"desc": st.sampled_from(["default_pg", "tp", ""]), "ranks": st.lists(st.integers(-1, 9), max_size=5)}
        ),
        max_size=3,
    )
    info = st.fixed_dictionaries(
        {
            "rank": st.just(rank) if rank is not None else st.integers(-1, 9),
            "worldSize": st.integers(0, 10),
            "reason": st.sampled_from(["hang", "exit", "on-demand", ""]),
            "dumpedAtNs": st.integers(-1, 2**63),
            "processGroups": groups,
        }
    ).flatmap(bent)
    dump = st.fixed_dictionaries(
        {
            "version": st.just("2.10"),
            "entries": st.lists(fr_entry(), max_size=6),
            "pg_status": st.dictionaries(
                st.sampled_from(["0", "1"]),
                st.fixed_dictionaries({"last_completed_collective": st.integers(-1, 60) | st.text(max_size=3)}),
                max_size=2,
            ),
            "pg_config": st.dictionaries(
                st.sampled_from(["0", "1"]),
                st.fixed_dictionaries({"name": st.text(max_size=3), "ranks": st.sampled_from(["[0, 1]", "x", "[-1]"])}),
                max_size=2,
            ),
            "stepscope": info,
        }
    )
    return dump.flatmap(bent)


def gpu_line() -> st.SearchStrategy[dict[str, Any]]:
    line = st.fixed_dictionaries(
        {
            "t": NUMBERS,
            "gpu": st.integers(-1, 2000),
            "name": st.text(max_size=6),
            "utilization": st.fixed_dictionaries({"gpu": NUMBERS, "memory": NUMBERS}),
            "memory": st.fixed_dictionaries({"used": NUMBERS, "total": NUMBERS}),
            "powerW": NUMBERS,
            "smClockMHz": NUMBERS,
            "smClockMaxMHz": NUMBERS,
            "throttleReasons": st.integers(-1, 2**64),
        }
    )
    return line.flatmap(bent)


def rank_steps() -> st.SearchStrategy[dict[str, Any]]:
    values = st.lists(NUMBERS, max_size=12)
    steps = st.fixed_dictionaries(
        {
            "rank": st.integers(-1, 300),
            "worldSize": st.integers(0, 300),
            "stepsTotal": st.integers(-1, 2**64),
            "secondsSinceLastStep": NUMBERS | st.none(),
            "closed": st.booleans(),
            "endedAt": values,
            "durationMs": values,
            "backwardMs": values,
            "dataWaitMs": values,
            "profiled": st.lists(st.booleans(), max_size=12),
        }
    )
    return steps.flatmap(bent)


def admission_review() -> st.SearchStrategy[dict[str, Any]]:
    pod = st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {
                    "name": st.text(max_size=6),
                    "labels": st.dictionaries(
                        st.sampled_from(["stepscope.dev/inject", "app"]),
                        st.sampled_from(["true", "false", "x"]),
                        max_size=2,
                    ),
                }
            ).flatmap(bent),
            "spec": st.fixed_dictionaries(
                {
                    "containers": st.lists(
                        st.fixed_dictionaries({"name": st.text(max_size=5), "image": st.just("i")}).flatmap(bent),
                        max_size=2,
                    )
                }
            ).flatmap(bent),
        }
    ).flatmap(bent)
    request = st.fixed_dictionaries(
        {
            "uid": st.text(max_size=8),
            "kind": st.fixed_dictionaries({"kind": st.sampled_from(["Pod", "ConfigMap", ""])}).flatmap(bent),
            "operation": st.sampled_from(["CREATE", "UPDATE", ""]),
            "namespace": st.text(max_size=6),
            "object": pod,
        }
    ).flatmap(bent)
    return st.fixed_dictionaries({"apiVersion": st.just("admission.k8s.io/v1"), "request": request}).flatmap(bent)

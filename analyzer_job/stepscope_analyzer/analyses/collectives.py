"""Collectives per name and process group, with total and exposed (not overlapped by compute) time.

Where the calls' args record them (record_param_comms and the like, matched by external id), each row carries the
collective's name and the elements its calls sent and received. A collective's time is the union of its intervals
across threads and streams: gloo runs the calls of one step (DDP's buckets) concurrently on its worker threads, so
summed durations count the same wall-clock time twice and can exceed the window; the count is the calls."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import Collective

F64 = npt.NDArray[np.float64]
Union = tuple[F64, F64]


def pg_label(args: dict[str, Any]) -> str | None:
    name = args.get("Process Group Name")
    desc = args.get("Process Group Description")
    if name is None and desc is None:
        return None
    if name is not None and desc:
        return f"{name}:{desc}"
    return str(name if name is not None else desc)


def process_groups_by_external_id(ev: TraceColumns) -> dict[int, str]:
    """External id of record_param_comms-like events -> process group label ('<name>:<description>')."""
    out: dict[int, str] = {}
    for row, args in ev.collective_args.items():
        label = pg_label(args)
        ext = int(ev.external_id[row])
        if label is not None and ext >= 0:
            out[ext] = label
    return out


def default_process_group(metadata: dict[str, Any]) -> str | None:
    """The only process group of the trace (distributedInfo.pg_config), if there is exactly one."""
    info = metadata.get("distributedInfo")
    if not isinstance(info, dict):
        return None
    config = info.get("pg_config")
    if isinstance(config, list) and len(config) == 1 and isinstance(config[0], dict):
        return pg_label(
            {"Process Group Name": config[0].get("pg_name"), "Process Group Description": config[0].get("pg_desc")}
        )
    return None


def _number(v: Any) -> float:
    return float(v) if type(v) in (int, float) and v >= 0 else 0.0


def call_args_by_external_id(ev: TraceColumns) -> dict[int, tuple[str | None, float]]:
    """External id of record_param_comms-like events -> (the collective's name, In + Out msg nelems)."""
    out: dict[int, tuple[str | None, float]] = {}
    for row, args in ev.collective_args.items():
        ext = int(ev.external_id[row])
        name = args.get("Collective name")
        elems = _number(args.get("In msg nelems")) + _number(args.get("Out msg nelems"))
        if ext >= 0 and (name is not None or elems > 0):
            out[ext] = (str(name) if name is not None else None, elems)
    return out


def _op_and_elems(
    ev: TraceColumns, rows: list[int], by_ext: dict[int, tuple[str | None, float]]
) -> tuple[str | None, float]:
    """The collective name the rows' args agree on (None without one) and their elements, each call once."""
    names: set[str] = set()
    elems, seen = 0.0, set()
    for row in rows:
        ext = int(ev.external_id[row])
        call = by_ext.get(ext)
        if call is None or ext in seen:
            continue
        seen.add(ext)
        if call[0] is not None:
            names.add(call[0])
        elems += call[1]
    return (names.pop() if len(names) == 1 else None), elems


def collectives(
    ev: TraceColumns, rows: npt.NDArray[np.int64], compute: Union, pg_of_ext: dict[int, str], default_pg: str | None
) -> list[Collective]:
    """Group collective rows (NCCL kernels, gloo:*/c10d::* ops) by (name, process group)."""
    groups: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    for row in rows.tolist():
        pg = pg_of_ext.get(int(ev.external_id[row]), default_pg)
        groups[(ev.names[ev.name_id[row]], pg)].append(row)
    out: list[Collective] = []
    by_ext = call_args_by_external_id(ev)
    for (name, pg), members in groups.items():
        op, elems = _op_and_elems(ev, members, by_ext)
        idx = np.asarray(members, dtype=np.int64)
        ts = ev.ts[idx]
        end = ts + np.maximum(ev.dur[idx], 0.0)
        u = intervals.merge(ts, end)
        merged = intervals.length(*u)
        out.append(
            Collective(
                name=name,
                process_group=pg,
                count=int(idx.size),
                total_us=merged,
                exposed_us=merged - intervals.intersection_length(u, compute),
                op=op,
                elems=elems,
            )
        )
    out.sort(key=lambda c: c.total_us, reverse=True)
    return out

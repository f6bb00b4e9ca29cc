"""A rank's communication calls, kept call by call so that the ranks' calls can be matched centrally. Pure.

A call is a GPU communication kernel (NCCL) or a gloo work item (`gloo:<op>` on any thread). Its op, process group
and, for sends and receives, its peer come from the call's own args or from the `record_param_comms` event of the
same external id ("Collective name", "Process Group Name"/"Description", "Dst Rank"/"Src Rank"); a trace with a
single process group lends it to every call. The step a call belongs to is the recorded step it was issued in: a
kernel's launch (the runtime event of its correlation id), a host call's start.

Where a send or receive names no peer (gloo records none), its direction along the pipeline comes from the work
next to it on the training thread: a receive followed by backward work (autograd's ops) brings gradients from the
next stage, one followed by forward work brings activations from the previous stage; a send that follows backward
work goes to the previous stage, one that follows forward work to the next.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.collectives import pg_label
from stepscope_analyzer.analyses.phase_names import BACKWARD, COMM, name_mask
from stepscope_analyzer.analyses.step_phases import StepWindows, launch_of
from stepscope_analyzer.analyses.steps import step_numbers
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import MAX_COMM_CALLS, CommCalls

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_KERNEL_OP = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_HOST_OP = re.compile(r"^gloo:(\w+)$")
GLOO_CALL = re.compile(r"^gloo:\w+$")
"""gloo's work items: the lifetime of each collective, send and receive (waiting included)"""


def op_key(name: str) -> str:
    """'all_reduce', 'AllReduce', 'allreduce' -> 'allreduce'; 'recv_' -> 'recv'."""
    return name.replace("_", "").lower()


def _name_op(name: str) -> str | None:
    m = _KERNEL_OP.match(name) or _HOST_OP.match(name)
    return op_key(m.group(1)) if m else None


def _args_by_external_id(ev: TraceColumns) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for row, args in ev.collective_args.items():
        ext = int(ev.external_id[row])
        if ext >= 0 and (ext not in out or "Collective name" not in out[ext]):
            out[ext] = args
    return out


def _peer(op: str, args: dict[str, Any]) -> int:
    key = "Dst Rank" if op == "send" else "Src Rank" if op == "recv" else None
    value = args.get(key) if key else None
    return value if type(value) is int and value >= 0 else -1


def _steps_of(ev: TraceColumns, issued: F64, windows: StepWindows | None) -> I64:
    """The recorded step each call was issued in (-2 outside every step); -1 for all without step spans."""
    if windows is None or windows.count == 0:
        return np.full(issued.size, -1, dtype=np.int64)
    numbers = np.asarray(step_numbers(ev, windows.rows) or range(windows.count), dtype=np.int64)
    at = windows.index_of(issued)
    return np.where(at >= 0, numbers[np.maximum(at, 0)], -2)


def _directions(ev: TraceColumns, rows: I64, is_send: npt.NDArray[np.bool_], windows: StepWindows | None) -> I64:
    """+1 (the next stage), -1 (the previous stage) or 0 (not known) for each send/receive row, from the phase of
    the training thread's op just before a send and just after a receive."""
    out = np.zeros(rows.size, dtype=np.int64)
    if windows is None or rows.size == 0:
        return out
    thread = (ev.pid == windows.pid) & (ev.tid == windows.tid)
    ops = np.flatnonzero(thread & ev.cat_mask("cpu_op") & ~name_mask(ev, COMM))
    if ops.size == 0:
        return out
    backward = np.flatnonzero(thread & name_mask(ev, BACKWARD))
    bwd = intervals.merge(ev.ts[backward], ev.ts[backward] + ev.dur[backward])
    starts = np.sort(ev.ts[ops])
    ends = np.sort(ev.ts[ops] + ev.dur[ops])
    on_thread = thread[rows]
    after = np.searchsorted(starts, ev.ts[rows] + ev.dur[rows], side="left")
    before = np.searchsorted(ends, ev.ts[rows], side="right") - 1
    for i in range(rows.size):
        if not on_thread[i]:
            continue
        if is_send[i] and before[i] >= 0:
            out[i] = -1 if intervals.inside(bwd, ends[before[i] : before[i] + 1] - 1e-3)[0] else 1
        elif not is_send[i] and after[i] < starts.size:
            out[i] = 1 if intervals.inside(bwd, starts[after[i] : after[i] + 1])[0] else -1
    return out


def _bounded(steps: I64) -> int:
    """How many of the calls (in order) to keep: whole steps, at most MAX_COMM_CALLS."""
    if steps.size <= MAX_COMM_CALLS:
        return int(steps.size)
    last = steps[MAX_COMM_CALLS]
    cut = MAX_COMM_CALLS
    while cut > 0 and steps[cut - 1] == last:
        cut -= 1
    return cut or MAX_COMM_CALLS


def comm_calls(
    ev: TraceColumns, rows: I64, windows: StepWindows | None, *, default_pg: str | None, kernels: bool
) -> CommCalls | None:
    """The calls among `rows` (communication kernels when `kernels`, else host events, of which the gloo work items
    are kept), in the order they were issued; None when there are none."""
    if not kernels:
        rows = rows[ev.name_mask(ev.names_matching(GLOO_CALL))[rows]]
    if rows.size == 0:
        return None
    issued = ev.ts[rows]
    if kernels:  # a kernel belongs to the step that launched it
        launched, _ = launch_of(ev, rows)
        issued = np.where(np.isnan(launched), issued, launched)
    order = np.argsort(issued, kind="stable")
    rows, issued = rows[order], issued[order]
    steps = _steps_of(ev, issued, windows)
    keep = steps != -2
    rows, steps = rows[keep], steps[keep]
    n = _bounded(steps)
    rows, steps = rows[:n], steps[:n]
    by_ext = _args_by_external_id(ev)
    out = CommCalls()
    ops: dict[str, int] = {}
    groups: dict[str, int] = {}
    by_name: dict[int, str] = {}
    for row, name_id, ext in zip(rows.tolist(), ev.name_id[rows].tolist(), ev.external_id[rows].tolist(), strict=True):
        args = ev.collective_args.get(row) or by_ext.get(ext) or {}
        named = args.get("Collective name")
        if isinstance(named, str) and named:
            op = op_key(named)
        elif (op := by_name.get(name_id, "")) == "":
            op = by_name[name_id] = _name_op(ev.names[name_id]) or "unknown"
        label = pg_label(args) if args else None
        label = label or default_pg
        out.op_index.append(ops.setdefault(op, len(ops)))
        out.group_index.append(groups.setdefault(label, len(groups)) if label is not None else -1)
        out.peer.append(_peer(op, args))
    out.ops, out.groups = list(ops), list(groups)
    p2p = np.asarray([out.ops[i] in ("send", "recv") for i in out.op_index], dtype=bool)
    p2p &= np.asarray(out.peer) < 0
    if p2p.any() and not kernels:
        toward = np.zeros(rows.size, dtype=np.int64)
        sends = np.asarray([out.ops[i] == "send" for i in out.op_index], dtype=bool)
        toward[p2p] = _directions(ev, rows[p2p], sends[p2p], windows)
        out.toward = toward.tolist()
    out.step = steps.tolist()
    origin = float(windows.start[0]) if windows is not None and windows.count else float(ev.ts[rows].min())
    out.start_us = np.round(ev.ts[rows] - origin, 1).tolist()
    out.dur_us = np.round(np.maximum(ev.dur[rows], 0.0), 1).tolist()
    return out

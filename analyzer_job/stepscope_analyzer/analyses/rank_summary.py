"""summarize_trace: one rank's trace -> contract RankReport (HTA breakdowns, steps and their phases, bottlenecks,
collectives, unannotated host time)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.bottlenecks import bottlenecks, per_name
from stepscope_analyzer.analyses.call_floors import call_floors
from stepscope_analyzer.analyses.collectives import collectives, default_process_group, process_groups_by_external_id
from stepscope_analyzer.analyses.comm_calls import comm_calls
from stepscope_analyzer.analyses.cpu_breakdown import cpu_breakdown
from stepscope_analyzer.analyses.cpu_contention import call_slots, measured_waits, step_dilation, with_measured_waits
from stepscope_analyzer.analyses.gpu_breakdown import KERNEL_CATS, idle_breakdown, kernel_stats, temporal_breakdown
from stepscope_analyzer.analyses.gpu_breakdown import StreamIdle as StreamIdleParts
from stepscope_analyzer.analyses.host_gaps import host_gap_functions
from stepscope_analyzer.analyses.hta_filter import gpu_event_mask, hta_keep_mask
from stepscope_analyzer.analyses.kernel_types import KernelType, kernel_types_of
from stepscope_analyzer.analyses.memory import memory_usage
from stepscope_analyzer.analyses.self_times import self_durations, self_time_by_name
from stepscope_analyzer.analyses.step_phases import (
    StepWindows,
    cpu_step_phases,
    gpu_phase_sets,
    mean_phases,
    ops_outside_work,
    per_step,
    step_windows,
)
from stepscope_analyzer.analyses.step_spans import step_spans
from stepscope_analyzer.analyses.steps import stats_of, step_numbers, step_rows, step_stats
from stepscope_analyzer.analyses.trace_checks import check_event_times
from stepscope_analyzer.analyses.trace_info import trace_environment
from stepscope_analyzer.parse import ParsedTrace, TraceColumns, TraceError, parse_trace
from stepscope_analyzer.workers.cpu_quota import cpus_per_trace
from stepscope_contract.report import (
    Bottleneck,
    IdleBreakdown,
    KernelStat,
    PhaseSpan,
    ProcessGroup,
    RankReport,
    StepPhases,
    StreamIdle,
)

F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

KERNEL_CATEGORY = {
    KernelType.COMPUTATION: "kernel",
    KernelType.COMMUNICATION: "communication",
    KernelType.MEMORY: "memory",
}
HOST_CATEGORIES = (
    ("cuda_runtime", "runtime"),
    ("cuda_driver", "runtime"),
    ("python_function", "python"),
    ("cpu_op", "cpu_op"),
    ("user_annotation", "user_annotation"),  # record_function regions: data loading, the DataLoader's __next__
)


def summarize_trace(source: Path | bytes, *, rank: int | None = None, top_n: int = 50) -> RankReport:
    """Parse and summarise one rank's Kineto trace (path or bytes, plain or gzip).

    Raises TraceError (a ValueError) when the trace cannot be analysed. The rank comes from the trace's
    distributedInfo unless given; ``device`` is "cuda" when the trace has GPU kernels, else "cpu".
    """
    return summarize_parsed(parse_trace(source), rank=rank, top_n=top_n)


def summarize_parsed(
    trace: ParsedTrace, *, rank: int | None = None, top_n: int = 50, threads: int | None = None
) -> RankReport:
    """The report of a parsed trace. With `threads` > 1 (default: the CPUs this process may use, cpu_quota), a GPU
    trace's per-step phases are computed on a thread beside its breakdowns (both are mostly native and numpy work,
    which releases the GIL); a caller that fills every CPU with traces says 1."""
    ev = trace.events
    resolved = rank if rank is not None else trace.rank
    if resolved is None:
        resolved = 0
    if resolved < 0:
        raise TraceError(f"rank must be >= 0, got {resolved}")
    if len(ev) == 0:
        raise TraceError("trace has no complete events (nothing with 'ts', 'dur' and 'cat')")
    check_event_times(ev)
    is_gpu = gpu_event_mask(ev)
    keep = hta_keep_mask(ev, is_gpu)
    lane = keep & (ev.stream != -1)
    has_kernels = bool((lane & ev.cat_mask(*KERNEL_CATS)).any())
    windows = step_windows(ev)
    if windows is not None:
        steps = stats_of(windows.end - windows.start, step_numbers(ev, windows.rows))
    else:
        steps = step_stats(ev)
    report = RankReport(rank=resolved, world_size=trace.world_size, steps=steps, job_fingerprint=job_fingerprint(trace))
    report.process_groups = process_groups(trace)
    _wall_clock(report, trace, windows)
    if has_kernels and (cpus_per_trace() if threads is None else threads) > 1:
        with ThreadPoolExecutor(1, thread_name_prefix="stepscope-phases") as beside:
            later = beside.submit(_gpu_phases, ev, windows)
            _gpu(report, trace, keep=keep, is_gpu=is_gpu, lane=lane, top_n=top_n, windows=windows)
            phases, report.step_spans = later.result()
    elif has_kernels:
        _gpu(report, trace, keep=keep, is_gpu=is_gpu, lane=lane, top_n=top_n, windows=windows)
        phases, report.step_spans = _gpu_phases(ev, windows)
    else:
        _cpu(report, trace, top_n, windows)
        phases = _cpu_phases(report, trace, windows, top_n)
    _set_phases(report, phases)
    report.memory = memory_usage(ev, windows)
    report.environment = trace_environment(trace)
    return report


MAX_GROUPS = 64
"""process groups kept per rank (a job's groups per rank are a handful: default, pipeline, data, tensor, ...)"""


MAX_MEMBERS = 1024
"""members kept per process group"""


def job_fingerprint(trace: ParsedTrace) -> str | None:
    """backend/world size/the groups that span the whole world ("gloo/4/0:default_pg[4]"), if the trace says.

    Groups of fewer ranks (pipeline, data-parallel, tensor-parallel groups) are left out: each rank lists only the
    groups it belongs to, so they differ between ranks of one job (process_groups holds them; job_groups checks
    that the ranks agree on them)."""
    info = trace.distributed_info
    if not info:
        return None
    world = info.get("world_size")
    pgs = []
    for g in _pg_entries(info):
        if g.get("pg_size") == world or g.get("pg_size") is None:
            pgs.append(f"{g.get('pg_name')}:{g.get('pg_desc')}[{g.get('pg_size')}]")
    return f"{info.get('backend')}/{world}/{','.join(pgs)}"[:512]


def _pg_entries(info: dict[str, object]) -> list[dict[str, object]]:
    groups = info.get("pg_config")
    if not isinstance(groups, list):
        return []
    return [g for g in groups[:MAX_GROUPS] if isinstance(g, dict)]


def process_groups(trace: ParsedTrace) -> list[ProcessGroup]:
    """The process groups of distributedInfo.pg_config with their members; a group of the whole world keeps no
    member list (every rank), a larger group than MAX_MEMBERS keeps none either (summaries stay small)."""
    info = trace.distributed_info
    if not info:
        return []
    world = info.get("world_size")
    out = []
    for g in _pg_entries(info):
        members = g.get("ranks")
        listed = members if isinstance(members, list) and len(members) <= MAX_MEMBERS else []
        whole = g.get("pg_size") == world
        ranks = [] if whole else [int(r) for r in listed if isinstance(r, int) and 0 <= r < 1 << 24]
        out.append(ProcessGroup(name=str(g.get("pg_name"))[:64], desc=str(g.get("pg_desc") or "")[:128], ranks=ranks))
    return out


def _wall_clock(report: RankReport, trace: ParsedTrace, windows: StepWindows | None) -> None:
    """Wall-clock time of the recorded steps: Kineto's ts are µs after baseTimeNanoseconds (or since the epoch)."""
    ev = trace.events
    lo, hi = (float(windows.start[0]), float(windows.end[-1])) if windows else (float(ev.ts.min()), float(ev.end.max()))
    base = trace.metadata.get("baseTimeNanoseconds")
    if isinstance(base, int | float) and not isinstance(base, bool) and 0 < base < 1e20:
        offset = float(base) / 1e9
    elif lo > 1e15:  # already µs since the epoch (older Kineto)
        offset = 0.0
    else:
        return
    report.captured_from_unix_s = offset + lo / 1e6
    report.captured_to_unix_s = offset + hi / 1e6


def _cpu_phases(report: RankReport, trace: ParsedTrace, windows: StepWindows | None, top_n: int) -> list[StepPhases]:
    if windows is None:
        return []
    ev = trace.events
    phases, _, sets = cpu_step_phases(ev, windows)
    report.step_ops_outside_work = ops_outside_work(sets, windows)
    report.step_spans = step_spans(ev, windows, sets)
    gaps = host_gap_functions(ev, windows, sets, report.window_us, top_n=min(top_n, 10))
    merged = sorted(report.top_functions + gaps, key=lambda b: b.bottleneck_ratio, reverse=True)
    report.top_functions = merged[: top_n * 2]
    calls = call_slots(ev, windows)
    dilation = step_dilation(ev, windows, calls)
    waits = measured_waits(trace.metadata, [ev.names[ev.name_id[row]] for row in windows.rows.tolist()])
    if waits is not None and len(phases) == len(dilation):
        spans = zip(windows.start.tolist(), windows.end.tolist(), phases, strict=True)
        active = [end - start - p.communication_wait for start, end, p in spans]
        dilation = with_measured_waits(dilation, waits, active)
        report.step_cpu_wait = [round(w, 1) for w in waits]
    report.step_dilation = [round(d, 4) for d in dilation]
    report.call_floors = call_floors(ev, windows, calls)
    return phases


def _gpu_phases(ev: TraceColumns, windows: StepWindows | None) -> tuple[list[StepPhases], list[list[PhaseSpan]]]:
    """The steps' phases and their spans in time order (within each step's GPU window)."""
    if windows is None:
        return [], []
    rows = np.flatnonzero((ev.stream != -1) & ev.cat_mask(*KERNEL_CATS))
    found = gpu_phase_sets(ev, windows, rows, kernel_types_of(ev.names, ev.name_id[rows]))
    if found is None:
        return [], []
    sets, first, stop = found
    return per_step(sets, windows, (first, stop)), step_spans(ev, windows, sets, (first, stop))


def _set_phases(report: RankReport, phases: list[StepPhases]) -> None:
    """Phases per step and their mean; host time is the steps' data_loading + other (the same on CPU and GPU)."""
    if not phases or len(phases) != report.steps.count:
        return
    report.step_phases = phases
    report.phases = mean_phases(phases)
    report.host_time = sum(p.data_loading + p.other for p in phases)


def _host_bottlenecks(
    ev: TraceColumns,
    *,
    rows_mask: Mask,
    compute: tuple[F64, F64],
    window: float,
    top_n: int,
    compute_cats: tuple[str, ...] = (),
    nested: Mask | None = None,
) -> list[Bottleneck]:
    """`nested`: the host rows whose nesting gives the self times (default `rows_mask`; collectives nested in the
    ops that call them belong there too)."""
    out: list[Bottleneck] = []
    nest_rows = np.flatnonzero(rows_mask if nested is None else nested)
    own = np.zeros(ev.ts.size, dtype=np.float64)
    own[nest_rows] = self_durations(ev.pid, ev.tid, ev.ts, ev.dur, nest_rows)
    del nest_rows
    end = ev.ts + ev.dur
    step_ids = [i for i, n in enumerate(ev.names) if n.startswith("ProfilerStep#")]
    for cat, category in HOST_CATEGORIES:
        sel = rows_mask & ev.cat_mask(cat)
        if cat == "user_annotation":  # the step markers span everything; they are not a function
            sel &= ~ev.name_mask(step_ids)
        if not sel.any():
            continue
        times = per_name(ev.name_id[sel], ev.ts[sel], end[sel], compute)
        self_us = self_time_by_name(ev.name_id[sel], own[sel], len(ev.names))
        out.extend(
            bottlenecks(ev.names, times, category, window, is_compute=cat in compute_cats, top_n=top_n, self_us=self_us)
        )
    return out


def _gpu(
    report: RankReport,
    trace: ParsedTrace,
    *,
    keep: Mask,
    is_gpu: Mask,
    lane: Mask,
    top_n: int,
    windows: StepWindows | None,
) -> None:
    ev = trace.events
    rows = np.flatnonzero(lane)
    ktype = kernel_types_of(ev.names, ev.name_id[rows])
    ts = ev.ts[rows]
    end = ts + ev.dur[rows]
    tb = temporal_breakdown(ts, end, ktype)
    report.device = "cuda"
    report.idle_time = tb.idle_time
    report.compute_time = tb.compute_time
    report.non_compute_time = tb.non_compute_time
    report.kernel_time = tb.kernel_time
    report.idle_time_pctg = tb.pctg(tb.idle_time)
    report.compute_time_pctg = tb.pctg(tb.compute_time)
    report.non_compute_time_pctg = tb.pctg(tb.non_compute_time)
    overlap = tb.comp_comm_overlap
    report.comp_comm_overlap_pctg = round(overlap, 2) if overlap is not None else 0.0
    report.gpu_utilization = (tb.kernel_time - tb.idle_time) / tb.kernel_time if tb.kernel_time > 0 else 0.0
    report.communication_time = tb.comm_time
    report.memory_time = intervals.length(*tb.mem_union)
    report.exposed_communication_time = tb.comm_time - intervals.intersection_length(tb.comm_union, tb.comp_union)
    report.window_us = tb.kernel_time

    streams = idle_breakdown(ev, keep, is_gpu)
    report.idle_breakdown_by_stream = [
        StreamIdle(stream=s.stream, host_wait=s.host_wait, kernel_wait=s.kernel_wait, other=s.other) for s in streams
    ]
    report.idle_breakdown = merged_idle_breakdown(streams, tb.idle_time)
    report.top_kernels = [
        KernelStat(
            name=ev.names[k.name_id],
            kernel_type=k.kernel_type.name,
            count=k.count,
            sum_us=k.sum,
            mean_us=k.mean,
            max_us=k.max,
            min_us=k.min,
            stddev=k.std,
        )
        for k in kernel_stats(ev.name_id[rows], ev.dur[rows], ktype)[:top_n]
    ]
    window = tb.kernel_time
    tops = []
    for kt, category in KERNEL_CATEGORY.items():
        sel = ktype == kt
        times = per_name(ev.name_id[rows][sel], ts[sel], end[sel], tb.comp_union)
        tops.extend(
            bottlenecks(
                ev.names,
                times,
                category,
                window,
                is_compute=kt == KernelType.COMPUTATION,
                top_n=top_n,
                once=kt == KernelType.COMMUNICATION,
            )
        )
    tops.extend(
        _host_bottlenecks(
            ev, rows_mask=keep & ~is_gpu & (ev.stream == -1), compute=tb.comp_union, window=window, top_n=top_n
        )
    )
    tops.sort(key=lambda b: b.bottleneck_ratio, reverse=True)
    report.top_functions = tops[: top_n * 2]

    comm_rows = rows[ktype == KernelType.COMMUNICATION]
    default_pg = default_process_group(trace.metadata)
    report.collectives = collectives(ev, comm_rows, tb.comp_union, process_groups_by_external_id(ev), default_pg)
    report.comm_calls = comm_calls(ev, comm_rows, windows, default_pg=default_pg, kernels=True)
    report.host_gap_time = _gpu_host_gaps(ev, ts, end)


def _gpu_host_gaps(ev: TraceColumns, k_ts: F64, k_end: F64) -> float:
    """Per ProfilerStep: time from the step's start until a GPU kernel first runs (capped at the step's end)."""
    steps = step_rows(ev)
    if steps.size == 0 or k_ts.size == 0:
        return 0.0
    order = np.sort(k_ts)
    total = 0.0
    for row in steps.tolist():
        s, e = float(ev.ts[row]), float(ev.ts[row] + ev.dur[row])
        # a kernel already running at the step's start counts as work
        running = bool(np.any((k_ts < s) & (k_end > s)))
        if running:
            continue
        i = int(np.searchsorted(order, s, side="left"))
        first = float(order[i]) if i < order.size else e
        total += max(0.0, min(first, e) - s)
    return total


def _cpu(report: RankReport, trace: ParsedTrace, top_n: int, windows: StepWindows | None) -> None:
    ev = trace.events
    cb = cpu_breakdown(ev)
    window = cb.kernel_time
    report.device = "cpu"
    report.idle_time = cb.idle_time
    report.compute_time = cb.compute_time
    report.non_compute_time = cb.non_compute_time
    report.kernel_time = window
    report.window_us = window

    def pct(x: float) -> float:
        return round(100.0 * x / window, 2) if window > 0 else 0.0

    report.idle_time_pctg = pct(cb.idle_time)
    report.compute_time_pctg = pct(cb.compute_time)
    report.non_compute_time_pctg = pct(cb.non_compute_time)
    comm = intervals.length(*cb.comm_union)
    overlap = intervals.intersection_length(cb.comm_union, cb.compute_union)
    report.comp_comm_overlap_pctg = round(100.0 * overlap / comm, 2) if comm > 0 else 0.0
    report.cpu_utilization = cb.compute_time / window if window > 0 else 0.0
    report.communication_time = comm
    report.exposed_communication_time = comm - overlap
    report.host_gap_time = cb.host_gap_time
    report.host_time = cb.host_time
    in_window = (ev.ts < cb.window[1]) & (ev.ts + ev.dur > cb.window[0])
    rows_mask = cb.train_mask & ~cb.comm_mask & in_window
    comm_sel = cb.comm_mask & in_window
    tops = _host_bottlenecks(
        ev,
        rows_mask=rows_mask,
        compute=cb.compute_union,
        window=window,
        top_n=top_n,
        compute_cats=("cpu_op",),
        nested=rows_mask | (comm_sel & cb.train_mask),
    )
    end = ev.ts + ev.dur
    times = per_name(ev.name_id[comm_sel], ev.ts[comm_sel], end[comm_sel], cb.compute_union)
    tops.extend(bottlenecks(ev.names, times, "communication", window, is_compute=False, top_n=top_n, once=True))
    tops.sort(key=lambda b: b.bottleneck_ratio, reverse=True)
    report.top_functions = tops[: top_n * 2]
    default_pg = default_process_group(trace.metadata)
    comm_rows = np.flatnonzero(comm_sel)
    report.collectives = collectives(ev, comm_rows, cb.compute_union, process_groups_by_external_id(ev), default_pg)
    report.comm_calls = comm_calls(ev, comm_rows, windows, default_pg=default_pg, kernels=False)


def merged_idle_breakdown(streams: list[StreamIdleParts], idle_time: float) -> IdleBreakdown:
    """The GPU's idle time (streams merged, so it never exceeds the window) split in the proportions that HTA's
    per-stream breakdown gives host_wait, kernel_wait and other."""
    parts = [sum(s.host_wait for s in streams), sum(s.kernel_wait for s in streams), sum(s.other for s in streams)]
    total = sum(parts)
    if total <= 0 or idle_time <= 0:
        return IdleBreakdown()
    host, kernel, other = (idle_time * p / total for p in parts)
    return IdleBreakdown(host_wait=host, kernel_wait=kernel, other=other)

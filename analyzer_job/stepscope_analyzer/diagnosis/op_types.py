"""The step's work by op type, a rank against its peers: where its excess goes (matmul, attention, communication,
memory copies, ...). Pure.

An op's type comes from the names the kernel libraries and PyTorch give their work: GEMM kernels (cuBLAS, CUTLASS,
`xmma`/`wgmma`) and `aten::mm`/`addmm`/`bmm` are matmul; flash/fused attention kernels and
`scaled_dot_product_attention` attention; cuDNN convolution kernels and `aten::convolution` convolution;
layer/batch/ RMS norms normalization; NCCL kernels and gloo/c10d calls communication; memory copies and sets memory;
the rest other compute. GPU ranks are read from their top kernels (communication and memory kernels by their HTA
class), CPU ranks from their ops' self time (a wrapper such as `aten::linear` adds only its own time, so nothing
counts twice) and their communication's wall-clock time.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict

from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import OpTypeTime, RankReport, SlowRank

TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(
            r"(?i)^(nccl|gloo:|_?c10d(_functional)?::|record_param_comms)|all_?reduce|all_?gather|reduce_?scatter"
        ),
    ),
    ("memory", re.compile(r"(?i)memcpy|memset|^aten::(copy_|_to_copy|to|zero_|fill_|empty|empty_strided|clone)$")),
    ("attention", re.compile(r"(?i)flash|fmha|attention|attn")),
    ("convolution", re.compile(r"(?i)conv|cudnn")),
    (
        "matmul",
        re.compile(r"(?i)gemm|xmma|wgmma|cutlass|cublas|matmul|^aten::(mm|addmm|bmm|baddbmm|addbmm|_scaled_mm)$"),
    ),
    ("normalization", re.compile(r"(?i)norm")),
)
OTHER = "other compute"
BY_KERNEL_TYPE = {"COMMUNICATION": "communication", "MEMORY": "memory"}
"""a GPU kernel's class (KernelStat.kernel_type) that is its op type"""
MIN_US = 1.0
"""op types under this many µs per step on every compared rank are left out"""


@functools.lru_cache(maxsize=4096)
def op_type(name: str) -> str:
    """The op type a kernel or op name says (names repeat on every rank of a job: each is matched once)."""
    return next((kind for kind, pattern in TYPES if pattern.search(name)), OTHER)


def rank_op_types(r: RankReport) -> dict[str, float]:
    """The rank's µs per step per op type."""
    steps = max(1, r.steps.count)
    out: dict[str, float] = defaultdict(float)
    if r.device == "cuda" and r.top_kernels:
        for k in r.top_kernels:  # communication and memory kernels as HTA's kernel classes say
            kind = BY_KERNEL_TYPE.get(k.kernel_type) or op_type(k.name)
            out[kind] += k.sum_us / steps
        return dict(out)
    for f in r.top_functions:
        if f.category == "cpu_op" and f.self_us is not None and op_type(f.name) != "communication":
            out[op_type(f.name)] += f.self_us / steps
    if r.communication_time > 0:  # the union of the calls: gloo records each on two threads
        out["communication"] = r.communication_time / steps
    return dict(out)


def _peers(rank: int, ranks: list[RankReport], layout: Layout | None) -> list[RankReport]:
    if layout is None or layout.stages < 2:
        return [r for r in ranks if r.rank != rank]
    stage = layout.stage.get(rank)
    return [r for r in ranks if r.rank != rank and layout.stage.get(r.rank) == stage]


def _subject(ranks: list[RankReport], slow: list[SlowRank]) -> int | None:
    ids = {r.rank for r in ranks}
    named = next((s.rank for s in slow if s.rank in ids), None)
    if named is not None:
        return named
    timed = [r for r in ranks if r.steps.count]
    return max(timed, key=lambda r: (r.steps.median_us, -r.rank)).rank if timed else None


def by_op_type(ranks: list[RankReport], slow: list[SlowRank], layout: Layout | None) -> list[OpTypeTime]:
    """The top slow rank (else the slowest) against the median of its peers, per op type, most time first."""
    rank = _subject(ranks, slow)
    if rank is None:
        return []
    peers = _peers(rank, ranks, layout)
    if not peers:
        return []
    mine = rank_op_types(next(r for r in ranks if r.rank == rank))
    theirs = [rank_op_types(p) for p in peers]
    kinds = set(mine) | {k for t in theirs for k in t}
    out = []
    for kind in kinds:
        med = median([t.get(kind, 0.0) for t in theirs])
        own = mine.get(kind, 0.0)
        if max(med, own) < MIN_US:
            continue
        out.append(
            OpTypeTime(
                op_type=kind,
                median_us=round(med, 1),
                rank=rank,
                rank_us=round(own, 1),
                beyond_median_us=round(own - med, 1),
            )
        )
    out.sort(key=lambda t: (-max(t.rank_us, t.median_us), t.op_type))
    return out

"""The short report summary that goes into the ProfileSession's status, for `kubectl get` and pipelines. Pure.

It carries the culprit (slowest rank = the top slow rank, and its cause; without one, the cause of the job's top
finding: a pipeline stage imbalance, bubble or data imbalance), the diagnosis' headline as the top bottleneck
(what the culprit runs, where a hung rank is stuck; the top bottleneck only when no rank is the culprit) and the
job's numbers, each the same figure as in report.json. After a hang or a desync, `hungRanks` holds the culprits
(the ranks the others wait for) and `waitingRanks` the hung ranks that wait for them, with what most of them wait
in; when no rank stands out, every hung rank is told as hung."""

from __future__ import annotations

from collections import Counter

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_contract.report import Diagnosis, Hang, RankStatus, Report
from stepscope_contract.session import ReportSummary

MAX_LISTED = 64


def safe_text(text: str, limit: int) -> str:
    """Valid UTF-8 (lone surrogates from undecodable names replaced), cut to `limit` characters."""
    clean = text.encode("utf-8", "replace").decode("utf-8")
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _ms(us: float | None) -> float | None:
    return round(us / 1000.0, 3) if us else None


def standstill_roles(d: Diagnosis) -> tuple[list[int], list[int]]:
    """(culprits, waiting) of a standstill: the ranks that hold the job up (hung culprits, and culprits that left no
    hang of their own, e.g. a dead process) and the hung ranks that wait for them; every hung rank is a culprit when
    none stands out."""
    culprits = {h.rank for h in d.hangs if h.culprit} | {s.rank for s in d.slow_ranks if s.cause in STANDSTILL}
    if not culprits:
        return sorted(h.rank for h in d.hangs), []
    return sorted(culprits), sorted(h.rank for h in d.hangs if h.rank not in culprits)


def _waiting_in(hangs: list[Hang]) -> str | None:
    """What most waiting ranks wait in ('all_reduce at train.py:52')."""
    places = Counter(
        h.waiting_collective + (f" at {h.location}" if h.location else "")
        for h in hangs
        if not h.culprit and h.waiting_collective
    )
    return safe_text(places.most_common(1)[0][0], 256) if places else None


def build_status_summary(report: Report) -> ReportSummary:
    d: Diagnosis = report.diagnosis
    top = d.slow_ranks[0] if d.slow_ranks else None
    node = d.slow_nodes[0].node if d.slow_nodes else (top.node if top else None)
    culprits, waiting = standstill_roles(d)
    return ReportSummary(
        verdict=safe_text(d.verdict, 1024),
        slowest_rank=top.rank if top else None,
        slowest_node=safe_text(node, 253) if node else None,
        cause=top.cause.value if top else (d.findings[0].cause.value if d.findings else None),
        top_bottleneck=safe_text(d.headline, 256) if d.headline else None,
        slow_ranks=sorted(s.rank for s in d.slow_ranks)[:MAX_LISTED],
        hung_ranks=culprits[:MAX_LISTED],
        waiting_ranks=waiting[:MAX_LISTED] or None,
        waiting_in=_waiting_in(d.hangs) if waiting else None,
        errored_ranks=sorted(r.rank for r in report.ranks if r.status in (RankStatus.ERROR, RankStatus.MISSING))[
            :MAX_LISTED
        ],
        median_step_ms=_ms(d.median_step_us),
        p90_step_ms=_ms(d.p90_step_us),
        slowdown_percent=top.slowdown_pct if top and top.slowdown_pct else None,
        estimated_speedup=round(d.estimated_speedup, 3) if d.estimated_speedup else None,
    )

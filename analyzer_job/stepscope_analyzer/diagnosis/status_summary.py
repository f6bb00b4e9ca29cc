"""The short report summary that goes into the ProfileSession's status. Pure."""

from __future__ import annotations

from stepscope_contract.report import Diagnosis, RankStatus, Report
from stepscope_contract.session import ReportSummary

MAX_LISTED = 64


def safe_text(text: str, limit: int) -> str:
    """Valid UTF-8 (lone surrogates from undecodable names replaced), cut to `limit` characters."""
    clean = text.encode("utf-8", "replace").decode("utf-8")
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def build_status_summary(report: Report) -> ReportSummary:
    d: Diagnosis = report.diagnosis
    top = d.slow_ranks[0] if d.slow_ranks else None
    node = d.slow_nodes[0].node if d.slow_nodes else (top.node if top else None)
    return ReportSummary(
        verdict=safe_text(d.verdict, 1024),
        slowest_rank=top.rank if top else None,
        slowest_node=safe_text(node, 253) if node else None,
        cause=top.cause.value if top else None,
        top_bottleneck=safe_text(d.bottlenecks[0].name, 256) if d.bottlenecks else None,
        slow_ranks=sorted(s.rank for s in d.slow_ranks)[:MAX_LISTED],
        hung_ranks=sorted(h.rank for h in d.hangs)[:MAX_LISTED],
        errored_ranks=sorted(r.rank for r in report.ranks if r.status in (RankStatus.ERROR, RankStatus.MISSING))[
            :MAX_LISTED
        ],
    )

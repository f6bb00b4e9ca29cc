"""report.html: one self-contained page (inline CSS and SVG, no script, no external URL), jinja2 with
autoescape on, so every name taken from a trace is escaped."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.report.bytecode_cache import bytecode_cache
from stepscope_analyzer.report.charts import bottleneck_chart, breakdown_chart
from stepscope_analyzer.report.environment import environment_rows, environment_table, gpu_metrics_note
from stepscope_analyzer.report.flame_charts import flame_chart
from stepscope_analyzer.report.gain import gain_sentence
from stepscope_analyzer.report.gpu_charts import gpu_charts
from stepscope_analyzer.report.hang_view import hang_view
from stepscope_analyzer.report.memory_charts import memory_chart, memory_ranks
from stepscope_analyzer.report.per_step import rank_per_step
from stepscope_analyzer.report.phase_charts import PHASE_COLORS, phase_chart, step_phase_chart
from stepscope_analyzer.report.timeline import timeline_chart
from stepscope_analyzer.report.trace_access import trace_access
from stepscope_contract.report import RankReport, RankStatus, Report
from stepscope_contract.storage import SPEEDSCOPE_FILE

MAX_TABLE_NAME = 160
MAX_TABLE_RANKS = 1024


def _short(text: object, limit: int = MAX_TABLE_NAME) -> str:
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _us(value: float) -> str:
    """µs as a readable duration (a negative one with its sign: the low end of a saving's interval)."""
    if value < 0:
        return "-" + _us(-value)
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f} s"
    if value >= 1_000:
        return f"{value / 1_000:.2f} ms"
    return f"{value:.0f} µs"


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("stepscope_analyzer.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=bytecode_cache(),
    )
    env.filters["short"] = _short
    env.filters["us"] = _us
    env.filters["gib"] = _gib
    return env


def render_html(report: Report) -> str:
    d = report.diagnosis
    highlight = {s.rank for s in d.slow_ranks}
    ok = [r for r in report.ranks if r.status is RankStatus.OK]
    top = d.slow_ranks[0] if d.slow_ranks else None
    if top is None:
        severity = "error" if not ok and not d.hangs else "ok"
    else:
        severity = "hang" if top.cause in STANDSTILL else "slow"
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            report=report,
            d=d,
            top=top,
            severity=severity,
            highlight=highlight,
            ranks=report.ranks[:MAX_TABLE_RANKS],
            ranks_cut=max(0, len(report.ranks) - MAX_TABLE_RANKS),
            breakdown=breakdown_chart(ok, highlight),
            timeline=timeline_chart(report.timeline, highlight, report.merged_trace) if report.timeline else None,
            bottlenecks=bottleneck_chart(d.bottlenecks),
            hang=hang_view(d, report.ranks),
            standstill={c.value for c in STANDSTILL},
            per_step={r.rank: r.per_step or rank_per_step(r) for r in ok},
            any_gpu=any(r.device == "cuda" for r in ok),
            steps_per_rank=_steps_per_rank(ok),
            waits=sorted(d.waits, key=lambda w: (-w.waited_us_per_step, w.rank))[:MAX_WAIT_ROWS],
            waits_cut=max(0, len(d.waits) - MAX_WAIT_ROWS),
            where={x.rank: f"stage {x.stage}, replica {x.replica}" for x in (d.layout.ranks if d.layout else [])},
            segment_colors={"compute": "#2f7ed8", "non-compute": "#f28f43", "idle": "#c8c8c8"},
            **_explanations(report, ok, highlight),
        )
    )


MAX_STEP_VIEWS = 4
MAX_WAIT_ROWS = 32
"""rows of the who-waits-for-whom table (the ranks that wait most)"""


def _steps_per_rank(ok: list[RankReport]) -> int:
    """The recorded steps of a typical rank (the communication table's per-step figures divide by it)."""
    counts = sorted(r.steps.count for r in ok if r.steps.count > 0)
    return counts[len(counts) // 2] if counts else 1


def _explanations(report: Report, ok: list[RankReport], highlight: set[int]) -> dict[str, Any]:
    """What the template needs to explain the step: phases, GPU metrics, gain, environment, trace access."""
    by_rank = {r.rank: r for r in ok}
    slow_ok = [by_rank[s.rank] for s in report.diagnosis.slow_ranks if s.rank in by_rank][:MAX_STEP_VIEWS]
    step_views = [(r.rank, c) for r in slow_ok if (c := step_phase_chart(r)) is not None]
    return {
        "gain": gain_sentence(report.diagnosis),
        "phases": phase_chart(ok, highlight),
        "phase_colors": {k.replace("_", " "): v for k, v in PHASE_COLORS.items()},
        "step_views": step_views,
        "gpu_plots": gpu_charts(ok, highlight),
        "gpu_ranks": [r for r in ok if r.gpu_metrics is not None][:MAX_TABLE_RANKS],
        "gpu_note": gpu_metrics_note(report.ranks),
        "memory_plot": memory_chart(ok, highlight),
        "memory_ranks": memory_ranks(ok)[:MAX_TABLE_RANKS],
        "env_rows": environment_rows(report),
        "env_table": environment_table(report.ranks[:MAX_TABLE_RANKS], report.diagnosis.hangs),
        "access": trace_access(report),
        **_python_views(report),
    }


def _python_views(report: Report) -> dict[str, Any]:
    """The named rank's flame graphs and the speedscope file beside the page."""
    profile = report.python_profile
    if profile is None:
        return {"flame": None, "flame_diff": None, "speedscope": None}
    return {
        "flame": flame_chart(profile.stacks, f"rank {profile.rank}"),
        "flame_diff": flame_chart(profile.differential, f"rank {profile.rank} beyond ranks {profile.peers}"),
        "speedscope": SPEEDSCOPE_FILE,
    }


def render_page(template: str, **context: object) -> str:
    """Another page of the same family (diff.html): the same environment, filters and shared style."""
    return _environment().get_template(template).render(**context)


def html_bytes(report: Report) -> bytes:
    """The page as UTF-8; undecodable characters from names become replacement marks."""
    return render_html(report).encode("utf-8", "replace")

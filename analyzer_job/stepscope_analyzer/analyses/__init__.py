"""Per-rank analyses with HTA's semantics: temporal/idle/kernel breakdowns, overlap, steps, bottlenecks."""

from stepscope_analyzer.analyses.rank_summary import summarize_parsed, summarize_trace

__all__ = ["summarize_parsed", "summarize_trace"]

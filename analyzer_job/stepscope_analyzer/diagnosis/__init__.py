"""Cross-rank differential diagnosis: from per-rank summaries (and hang evidence) to a Diagnosis. Pure."""

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.diagnose import diagnose
from stepscope_analyzer.diagnosis.hangs import HangEvidence, collective_in_stacks
from stepscope_analyzer.diagnosis.rank_costs import with_collective_waits
from stepscope_analyzer.diagnosis.status_summary import build_status_summary, safe_text

__all__ = [
    "DiagnosisConfig",
    "HangEvidence",
    "build_status_summary",
    "collective_in_stacks",
    "diagnose",
    "safe_text",
    "with_collective_waits",
]

"""Cross-rank differential diagnosis: from per-rank summaries (and hang evidence) to a Diagnosis. Pure."""

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.diagnose import diagnose
from stepscope_analyzer.diagnosis.hangs import HangEvidence, collective_in_stacks
from stepscope_analyzer.diagnosis.rank_costs import with_collective_waits

# The CR status summary (diagnosis.status_summary) is imported from its module where it is used (the analyzer Job):
# with the session spec it needs, it would add to `stepscope analyze`'s imports, which its first rank waits for.

__all__ = [
    "DiagnosisConfig",
    "HangEvidence",
    "collective_in_stacks",
    "diagnose",
    "with_collective_waits",
]

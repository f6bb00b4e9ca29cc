"""The diff tests' helpers (report_maker, gate_job) are imported from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

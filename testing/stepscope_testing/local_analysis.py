"""A local folder's report as `stepscope analyze FOLDER` makes it: every rank summarised, Flight Recorder dumps
read, the named ranks' Python stacks, the reduce; for tests and benches that analyse generated or recorded jobs."""

from __future__ import annotations

from pathlib import Path

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.python_stacks_io import load_python_stacks
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_contract.report import Report


def analyse_folder(folder: Path, config: DiagnosisConfig | None = None) -> Report:
    """The report of `folder` (a session folder or a plain folder of traces), diagnosed with `config`'s thresholds
    (the defaults without it)."""
    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    outcomes = summarize_all(store, layout)
    dumps = flight_recorder_dumps(store, layout)
    return reduce_outcomes(outcomes, config=config, include_missing=layout.session, notes=layout.notes,
                           flight_recorder=dumps,
                           python_stacks=lambda ranks: load_python_stacks(store, layout, ranks))  # fmt: skip

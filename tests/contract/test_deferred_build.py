"""The session's, the wire's and the trigger's models build their validators on first use: importing them builds
none (the analyze command imports them and validates none), and a first use still validates, aliases and rejects
exactly as a built model does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit


def test_importing_builds_no_validator_and_the_first_use_validates() -> None:
    code = textwrap.dedent(
        """
        from pydantic import ValidationError
        from stepscope_contract import session, trigger, wire

        models = [wire.RankMeta, wire.CaptureRequest, session.ProfileSession, trigger.ProfileTrigger]
        print([m.__pydantic_complete__ for m in models])
        base = {"captureId": "c1", "pid": 7, "stepsRequested": 5, "stepsCaptured": 5}
        meta = wire.RankMeta.model_validate({**base, "rank": 3, "worldSize": 4})
        print(meta.rank, meta.world_size, wire.RankMeta.__pydantic_complete__)
        try:
            wire.RankMeta.model_validate({**base, "rank": -1})
        except ValidationError as exc:
            print(exc.errors()[0]["loc"])
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[False, False, False, False]", "3 4 True", "('rank',)"]


def test_the_report_models_build_on_first_use_and_build_now_builds_a_tree_ahead() -> None:
    """Importing the report's models builds no validator; `build_now` builds a model's and every model it holds (at
    any depth: RankReport -> StepStats), leaves the others deferred, and a built model still rejects what it must."""
    code = textwrap.dedent(
        """
        from pydantic import ValidationError
        from stepscope_contract import report
        from stepscope_contract.deferred import build_now

        print(any(m.__pydantic_complete__ for m in report.ReportModel.__subclasses__()))
        build_now(report.RankReport)
        print(report.RankReport.__pydantic_complete__, report.StepStats.__pydantic_complete__,
              report.Report.__pydantic_complete__, report.Diagnosis.__pydantic_complete__)
        try:
            report.StepStats.model_validate({"count": 1, "unknown": 2})
        except ValidationError as exc:
            print(exc.errors()[0]["type"])
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False", "True True False False", "extra_forbidden"]

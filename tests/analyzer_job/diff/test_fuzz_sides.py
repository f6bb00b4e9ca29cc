"""Property tests (hypothesis) of the diff's inputs: any stored report.json body gives a Report or a SideError,
never another exception; any baseline URI is judged inside or outside a namespace folder without an exception, and
one judged inside lies below the folder by whole path segments."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_analyzer.diff.sides import SideError, _read_report
from stepscope_analyzer.ranks.storage_io import LocalStore
from stepscope_contract.report import Report
from stepscope_contract.storage import confinement_error, parse_storage_uri
from stepscope_testing.hostile_inputs import encoded, json_values

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
QUICK = settings(max_examples=max(20, settings.default.max_examples // 3))

report_like = st.fixed_dictionaries(
    {"ranks": st.lists(json_values, max_size=3), "diagnosis": json_values, "schemaVersion": json_values}
)


@QUICK
@given(encoded(report_like) | encoded(json_values))
def test_any_stored_report_gives_a_report_or_a_side_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.json"
        path.write_bytes(raw)
        with contextlib.suppress(SideError):
            assert isinstance(_read_report(LocalStore(), str(path)), Report)


segment = st.sampled_from(["team-a", "team-ab", "team-b", "p", "..", ".", "", "report.json", "s-1", "%2e%2e"])


@given(
    st.sampled_from(["s3://", "oss://", "file:///", "s3:/", "", "gs://"]),
    st.sampled_from(["b", "other", ""]),
    st.lists(segment, max_size=6),
)
def test_any_baseline_uri_is_judged(scheme: str, bucket: str, segments: list[str]) -> None:
    uri = f"{scheme}{bucket}/" + "/".join(segments)
    folder = parse_storage_uri("s3://b/p").child("team-a")
    why = confinement_error(uri, folder)
    if why is None:
        target = parse_storage_uri(uri)
        assert target.bucket == "b" and target.prefix.split("/")[:2] == ["p", "team-a"]
        assert len(target.prefix.split("/")) > 2

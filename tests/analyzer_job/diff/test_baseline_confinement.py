"""A baseline is confined to the session's own namespace folder, `<storage.uri>/<namespace>/`: a baseline URI or an
index entry that points into another namespace's folder of the same bucket is refused (Regressed Unknown, reason
BaselineRefused, a message that names the folder it must lie in); one that only shares a prefix of the namespace's
name ('team-ab' for 'team-a'), or is the folder itself, is refused too; one inside the folder is compared."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_maker import noisy_job

from stepscope_analyzer.commands.gate_step import run_gate, write_index_entry
from stepscope_analyzer.diff.baseline import BaselineError, find_baseline
from stepscope_analyzer.ranks.storage_io import location_of, open_store
from stepscope_analyzer.report import model_json_bytes
from stepscope_contract.session import ConditionStatus, ProfileSessionSpec
from stepscope_contract.storage import REPORT_JSON, confinement_error, parse_storage_uri, report_location

pytestmark = pytest.mark.unit


def _spec(root: Path, **baseline: str) -> ProfileSessionSpec:
    return ProfileSessionSpec.model_validate(
        {
            "targets": {"jobRef": {"kind": "Job", "name": "t"}},
            "storage": {"uri": f"file://{root}/sessions"},
            "baseline": baseline,
        }
    )


def _stored(root: Path, namespace: str, name: str) -> str:
    """A finished session of `namespace`: its report.json and its index entry; the report's URL."""
    folder = location_of(f"file://{root}/sessions/{namespace}/{name}-abcd1234")
    store = open_store(folder)
    base = noisy_job(n_steps=20, noise=0.05, seed=1)
    url = store.write(report_location(folder).key(REPORT_JSON), model_json_bytes(base), "application/json")
    write_index_entry(
        _spec(root, session=name), base, store, namespace=namespace, name=name, uid="abcd1234", folder=folder,
        report_json=url, log=print,
    )  # fmt: skip
    return url


def _gate(root: Path, spec: ProfileSessionSpec, namespace: str) -> tuple[ConditionStatus, str, str]:
    folder = location_of(f"file://{root}/sessions/{namespace}/ci-1-ffff0000")
    gate = run_gate(spec, namespace, open_store(folder), report_location(folder), noisy_job(), log=print)
    assert gate is not None
    return gate.condition


def test_a_baseline_uri_in_another_namespace_is_refused(tmp_path: Path) -> None:
    other = _stored(tmp_path, "team-b", "main")
    status, reason, message = _gate(tmp_path, _spec(tmp_path, uri=other), "team-a")
    assert (status, reason) == (ConditionStatus.UNKNOWN, "BaselineRefused")
    assert f"must lie in this namespace's folder file://{tmp_path}/sessions/team-a/" in message
    assert "spec.baseline.uri" in message


def test_an_index_entry_pointing_into_another_namespace_is_refused(tmp_path: Path) -> None:
    other = _stored(tmp_path, "team-b", "main")
    own = _stored(tmp_path, "team-a", "main")
    index = Path(f"{tmp_path}/sessions/team-a/_sessions/main.json")
    index.write_text(index.read_text().replace(own, other))
    store = open_store(location_of(f"file://{tmp_path}/sessions"))
    with pytest.raises(BaselineError) as info:
        find_baseline(_spec(tmp_path, session="main"), "team-a", store)
    assert info.value.reason == "BaselineRefused" and "the index entry" in str(info.value)


def test_a_namespace_sharing_a_prefix_is_another_namespace(tmp_path: Path) -> None:
    other = _stored(tmp_path, "team-ab", "main")
    status, reason, _ = _gate(tmp_path, _spec(tmp_path, uri=other), "team-a")
    assert (status, reason) == (ConditionStatus.UNKNOWN, "BaselineRefused")


def test_a_baseline_in_the_own_namespace_is_compared(tmp_path: Path) -> None:
    own = _stored(tmp_path, "team-a", "main")
    by_uri = _gate(tmp_path, _spec(tmp_path, uri=own), "team-a")
    by_name = _gate(tmp_path, _spec(tmp_path, session="main"), "team-a")
    assert by_uri[1] != "BaselineRefused" and by_uri[0] is not ConditionStatus.UNKNOWN, by_uri
    assert by_name[1] != "BaselineRefused" and by_name[0] is not ConditionStatus.UNKNOWN, by_name


@pytest.mark.parametrize(
    ("uri", "inside"),
    [
        ("s3://b/p/team-a/s-1/report/report.json", True),
        ("s3://b/p/team-a/_sessions/x.json", True),
        ("s3://b/p/team-a", False),
        ("s3://b/p/team-a/", False),
        ("s3://b/p/team-b/s-1/report/report.json", False),
        ("s3://b/p/team-ab/s-1/report.json", False),
        ("s3://b/team-a/s-1/report.json", False),
        ("s3://other/p/team-a/s-1/report.json", False),
        ("oss://b/p/team-a/s-1/report.json", False),
        ("s3://b/p/team-a/../team-b/report.json", False),
    ],
)
def test_confinement_is_by_whole_segments(uri: str, inside: bool) -> None:
    folder = parse_storage_uri("s3://b/p").child("team-a")
    assert (confinement_error(uri, folder) is None) is inside

"""The kinds of a rank's files are named once, in the contract: the operator and the analyzer recognise them with
`rank_file_of`, and the hook (stdlib only, so it keeps its own copies) writes the same names."""

from __future__ import annotations

import pytest

from stepscope_contract.storage import (
    RankFile,
    StorageLocation,
    parse_storage_uri,
    rank_artifact_key,
    rank_file_of,
    session_location,
)
from stepscope_hook import _flight_recorder, _runtime

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("kind", list(RankFile))
def test_every_kind_is_recognised_where_the_sidecar_stores_it(kind: RankFile) -> None:
    location: StorageLocation = parse_storage_uri("s3://bucket/prefix")
    folder = session_location(location, "team", "session", "0123456789abcdef")
    key = rank_artifact_key(folder, 7, kind.value)
    assert rank_file_of(key) is kind
    assert rank_file_of(f"s3://bucket/{key}") is kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("trace.pt.trace.json.gz", RankFile.TRACE),
        ("worker3.pt.trace.json", RankFile.TRACE),
        ("rank12.pt.trace.json.gz", RankFile.TRACE),
        ("summary.json", RankFile.SUMMARY),
        ("report.json", None),
        ("summary.json.bak", None),
        ("trace.json", None),
        ("", None),
    ],
)
def test_kinds_by_name(name: str, kind: RankFile | None) -> None:
    assert rank_file_of(name) is kind


def test_the_hook_writes_the_contracts_names() -> None:
    assert RankFile.TRACE.value == _runtime.TRACE_FILE
    assert RankFile.STACKS.value == _runtime.STACKS_FILE
    assert RankFile.FLIGHT_RECORDER.value == _flight_recorder.FLIGHT_RECORDER_FILE

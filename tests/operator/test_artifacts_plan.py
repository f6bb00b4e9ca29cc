"""What the operator decides when a session is deleted, from its metadata and accepted spec only (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from stepscope_analyzer.commands.cleanup import CleanupRefused, deletion_target, index_entry_is_this_session
from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.constants import ACCEPTED_SPEC_ANNOTATION
from stepscope_contract.session_index import SessionIndexEntry
from stepscope_contract.storage import parse_storage_uri
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.session.artifacts import cleanup_job_name, plan_deletion

pytestmark = pytest.mark.unit
UID = "1234abcd-0000-1111-2222-333344445555"


def _body(storage: dict[str, Any] | None, artifacts_uri: str | None = None, deleting: bool = True) -> dict[str, Any]:
    spec = {"targets": {"selector": {"matchLabels": {"a": "b"}}}, "storage": storage}
    annotations = {ACCEPTED_SPEC_ANNOTATION: json.dumps(spec)} if storage is not None else {}
    meta: dict[str, Any] = {"name": "s", "namespace": "team-a", "uid": UID, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"storage": {"uri": "s3://evil/x", "deleteOnSessionDelete": True}},
            "status": {"artifactsUri": artifacts_uri} if artifacts_uri else {}}  # fmt: skip


def test_the_folder_comes_from_the_accepted_spec_not_from_status_or_the_current_spec() -> None:
    storage = {"uri": "s3://ours/p", "deleteOnSessionDelete": True, "credentialsSecret": {"name": "keys"}}
    plan = plan_deletion(_body(storage, "s3://theirs/prefix"), OperatorConfig())
    assert plan.location == "s3://ours/p/team-a/s-1234abcd"
    assert [(n.warning, n.reason) for n in plan.notices] == [(True, "ArtifactsUriIgnored")]
    assert plan.job is not None and plan.job["metadata"]["name"] == cleanup_job_name("s", UID) == "s-cleanup-1234abcd"
    container = plan.job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "--session-json" and container["args"][2:] == ["--mode", "delete"]
    document = SessionDocument.from_json(container["args"][1])
    assert (document.namespace, document.name, document.uid) == ("team-a", "s", UID)
    assert document.spec.storage.uri == "s3://ours/p"  # the accepted spec, not the current one
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e} == {"keys"}
    assert "ownerReferences" not in plan.job["metadata"] and plan.job["spec"]["ttlSecondsAfterFinished"] >= 0


def test_nothing_is_deleted_unless_the_accepted_spec_asks() -> None:
    assert plan_deletion(_body(None), OperatorConfig()).job is None  # never accepted: nothing was written
    assert plan_deletion(_body({"uri": "s3://ours/p"}), OperatorConfig()).job is None


def test_file_folders_are_deleted_only_in_local_mode() -> None:
    body = _body({"uri": "file:///data", "deleteOnSessionDelete": True})
    refused = plan_deletion(body, OperatorConfig())
    assert refused.job is None and refused.notices[0].reason == "ArtifactsNotDeleted"
    local = plan_deletion(body, OperatorConfig(local_mode=True))
    assert local.job is not None
    env = {e["name"]: e.get("value") for e in local.job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["STEPSCOPE_ALLOW_FILE_DELETION"] == "true"


def _document(storage: dict[str, Any]) -> SessionDocument:
    spec = {"targets": {"selector": {"matchLabels": {"a": "b"}}}, "storage": storage}
    return SessionDocument.model_validate({"namespace": "team-a", "name": "s", "uid": UID, "spec": spec})


def test_the_cleanup_job_recomputes_the_folder_from_the_accepted_session() -> None:
    storage = {"uri": "s3://ours/p", "deleteOnSessionDelete": True}
    location, options = deletion_target(_document(storage), allow_file=False)
    assert location.uri == "s3://ours/p/team-a/s-1234abcd" and options.endpoint is None
    for document, why in [
        (_document({"uri": "s3://ours/p"}), "keeps the artifacts"),
        (_document({"uri": "file:///data", "deleteOnSessionDelete": True}), "local mode"),
    ]:
        with pytest.raises(CleanupRefused, match=why):
            deletion_target(document, allow_file=False)
    local, _ = deletion_target(_document({"uri": "file:///data", "deleteOnSessionDelete": True}), allow_file=True)
    assert local.uri == "file:///data/team-a/s-1234abcd"


def test_only_the_sessions_own_index_entry_is_removed() -> None:
    folder = parse_storage_uri("s3://b/sessions/default/victim-abcdef01")

    def entry(uid: str, where: str) -> bytes:
        return SessionIndexEntry(namespace="default", name="victim", uid=uid, folder=where, report_json=where + "/r",
                                 analysed_at=datetime.now(UTC)).model_dump_json().encode()  # fmt: skip

    assert index_entry_is_this_session(entry(UID, folder.uri), UID, folder)
    assert not index_entry_is_this_session(entry("later-uid", folder.uri), UID, folder)  # the name was reused since
    assert not index_entry_is_this_session(entry(UID, "s3://b/elsewhere"), UID, folder)
    assert not index_entry_is_this_session(b"not json", UID, folder)

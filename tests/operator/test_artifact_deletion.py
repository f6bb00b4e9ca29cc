"""Deleting a session's artifacts trusts nothing a status writer can set: the real operator, the local cluster's
runner executing the cleanup Job (`stepscope analyzer-job --mode delete`) and moto S3.

The attack: whoever can patch a session's status (a user with rights on its status subresource) points
`status.artifactsUri` at another team's S3 prefix or at a local directory, then deletes the session. The other prefix
and the directory stay intact; only the session's own folder (recomputed from the accepted spec, namespace, name and
uid) is deleted, by a Job that runs with the session's own credentials Secret; a Warning event says the claimed URI
was ignored."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import API, OperatorProcess, events_with, session, wait_for

from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.session_index import SessionIndexEntry
from stepscope_contract.storage import parse_storage_uri, session_location
from stepscope_local.cluster import CRD_PATH, LocalCluster
from stepscope_local.kube.errors import ApiError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

OURS, THEIRS = "team-a-traces", "team-b-traces"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(workdir=tmp_path / "cluster", buckets=(OURS, THEIRS)) as c:
        c.create_secret("default", "s3-creds", {"AWS_ACCESS_KEY_ID": "team-a", "AWS_SECRET_ACCESS_KEY": "team-a-key"})
        yield c


@pytest.fixture
def operator(cluster: LocalCluster, tmp_path: Path) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(cluster.api, tmp_path)
    proc.start()
    yield proc
    proc.kill(signal.SIGTERM)


def _keys(cluster: LocalCluster, bucket: str) -> list[str]:
    assert cluster.s3 is not None
    return sorted(o["Key"] for o in cluster.s3.client().list_objects_v2(Bucket=bucket).get("Contents", []))


def _put(cluster: LocalCluster, bucket: str, *keys: str) -> None:
    assert cluster.s3 is not None
    for key in keys:
        cluster.s3.client().put_object(Bucket=bucket, Key=key, Body=b"data")


def _events(cluster: LocalCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.api.list("v1", "events", "default") if e["involvedObject"]["name"] == name]


def _gone(cluster: LocalCluster, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.api.get(API, "profilesessions", "default", name) is None:
            return
        time.sleep(0.3)
    raise AssertionError(f"{name} was never released")


def test_a_forged_artifacts_uri_deletes_only_the_sessions_own_folder(
    cluster: LocalCluster, operator: OperatorProcess, tmp_path: Path
) -> None:
    victim_dir = tmp_path / "victim"
    (victim_dir / "sub").mkdir(parents=True)
    (victim_dir / "sub" / "precious.txt").write_text("keep me")
    _put(cluster, THEIRS, "team-b/prefix/default/model-1/ranks/0/trace.pt.trace.json.gz", "team-b/prefix/other.txt")
    no_pod = {"selector": {"matchLabels": {"app": "nobody"}}, "waitSeconds": 0}  # fails at once, but was accepted
    spec = session("victim", no_pod)
    spec["spec"]["storage"] = {
        "uri": f"s3://{OURS}/sessions",
        "endpoint": cluster.s3_endpoint,
        "addressingStyle": "path",
        "credentialsSecret": {"name": "s3-creds"},
        "deleteOnSessionDelete": True,
    }
    cluster.api.apply(spec)
    obj = wait_for(cluster.api, "victim", ("Failed",))
    own = session_location(parse_storage_uri(f"s3://{OURS}/sessions"), "default", "victim", obj["metadata"]["uid"])
    assert obj["status"]["artifactsUri"] == own.uri
    _put(cluster, OURS, f"{own.prefix}/ranks/0/trace.pt.trace.json.gz", f"{own.prefix}/report/report.json")
    _put(cluster, OURS, "sessions/default/neighbour-0000abcd/ranks/0/manifest.json")
    # its sessions-index entry (what names it as a baseline) goes with it; another session's entry stays
    assert cluster.s3 is not None
    for name, uid, folder in (("victim", obj["metadata"]["uid"], own.uri), ("other", "u-2", "s3://x/y")):
        entry = SessionIndexEntry(namespace="default", name=name, uid=uid, folder=folder, report_json=folder + "/r",
                                  analysed_at=datetime.now(UTC))  # fmt: skip
        cluster.s3.client().put_object(Bucket=OURS, Key=f"sessions/default/_sessions/{name}.json",
                                       Body=entry.model_dump_json().encode())  # fmt: skip

    for forged in (f"s3://{THEIRS}/team-b/prefix", f"file://{victim_dir}"):
        cluster.api.patch_status(API, "profilesessions", "default", "victim", {"artifactsUri": forged})
        assert cluster.api.get(API, "profilesessions", "default", "victim")["status"]["artifactsUri"] == forged

    cluster.api.delete(API, "profilesessions", "default", "victim")
    _gone(cluster, "victim")

    assert _keys(cluster, THEIRS) == ["team-b/prefix/default/model-1/ranks/0/trace.pt.trace.json.gz",
                                      "team-b/prefix/other.txt"]  # fmt: skip
    assert (victim_dir / "sub" / "precious.txt").read_text() == "keep me"
    assert _keys(cluster, OURS) == ["sessions/default/_sessions/other.json",
                                    "sessions/default/neighbour-0000abcd/ranks/0/manifest.json"]  # fmt: skip
    events_with(cluster.api, "ArtifactsDeleted", about="victim")  # kopf posts it from its own queue
    reasons = {(e["type"], e["reason"]) for e in _events(cluster, "victim")}
    assert ("Warning", "ArtifactsUriIgnored") in reasons and ("Normal", "ArtifactsDeleted") in reasons, reasons
    # the deletion ran as a Job in the session's namespace with the session's own Secret, not the operator's keys
    jobs = [j for j in cluster.api.list("batch/v1", "jobs", "default") if "cleanup" in j["metadata"]["name"]]
    assert len(jobs) == 1 and not jobs[0]["metadata"].get("ownerReferences")
    pod = jobs[0]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "stepscope-analyzer"
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in pod["containers"][0]["env"] if "valueFrom" in e}
    assert refs == {"AWS_ACCESS_KEY_ID": "s3-creds", "AWS_SECRET_ACCESS_KEY": "s3-creds"}
    args = pod["containers"][0]["args"]
    assert args[0] == "--session-json" and forged not in " ".join(args)
    assert SessionDocument.from_json(args[1]).uid == obj["metadata"]["uid"]  # the accepted session, folder recomputed


def test_without_delete_on_session_delete_nothing_is_deleted(cluster: LocalCluster, operator: OperatorProcess) -> None:
    spec = session("keeper", {"selector": {"matchLabels": {"app": "nobody"}}, "waitSeconds": 0})
    spec["spec"]["storage"] = {"uri": f"s3://{OURS}/sessions", "endpoint": cluster.s3_endpoint}
    cluster.api.apply(spec)
    obj = wait_for(cluster.api, "keeper", ("Failed",))
    own = parse_storage_uri(obj["status"]["artifactsUri"])
    _put(cluster, OURS, f"{own.prefix}/ranks/0/manifest.json")
    # the current spec now asks for deletion, but the accepted (frozen) spec did not; the API server refuses the edit
    edited = {**spec, "spec": {**spec["spec"], "storage": {**spec["spec"]["storage"], "deleteOnSessionDelete": True}}}
    with pytest.raises(ApiError, match=r"spec\.storage cannot change once the session exists"):
        cluster.api.apply(edited)
    # ... and where it would not (a CRD without that CEL rule), the operator still goes by the accepted spec
    crd = yaml.safe_load(CRD_PATH.read_text())
    storage = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["storage"]
    storage["x-kubernetes-validations"] = [r for r in storage["x-kubernetes-validations"] if "oldSelf" not in r["rule"]]
    cluster.api.apply(crd)
    cluster.api.apply(edited)
    cluster.api.delete(API, "profilesessions", "default", "keeper")
    _gone(cluster, "keeper")
    assert _keys(cluster, OURS) == [f"{own.prefix}/ranks/0/manifest.json"]
    assert not [j for j in cluster.api.list("batch/v1", "jobs", "default") if "cleanup" in j["metadata"]["name"]]

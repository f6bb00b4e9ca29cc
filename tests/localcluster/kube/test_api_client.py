"""The emulator over real HTTP with the official `kubernetes` client: the fidelity kopf and kubectl rely on."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from stepscope_local.kube import EmulatorServer

from ..conftest import CRD_PATH, session_body

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
GROUP, VERSION, PLURAL = "stepscope.dev", "v1alpha1", "profilesessions"


@pytest.fixture
def k8s(api: EmulatorServer) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(api.kubeconfig_path)) as api_client:
        yield api_client


def _raw(
    k8s: client.ApiClient, path: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    try:
        resp = k8s.call_api(path, method, body=body, header_params=headers or {}, _preload_content=False)
    except ApiException as exc:
        return int(exc.status), json.loads(exc.body)
    return int(resp.status), json.loads(resp.data)


def _create(k8s: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, body
    )
    return out


def test_create_sets_identity_and_defaults_and_duplicates_conflict(k8s: client.ApiClient) -> None:
    code, obj = _raw(
        k8s,
        f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}",
        "POST",
        session_body("s1", capture={}),
        {"Content-Type": "application/json"},
    )
    assert code == 201
    meta = obj["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0
    assert obj["spec"]["capture"]["steps"] == 5  # CRD default applied
    with pytest.raises(ApiException) as info:
        _create(k8s, session_body("s1"))
    assert info.value.status == 409
    second = _create(k8s, session_body("s2"))
    assert int(second["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])


def test_invalid_spec_is_422_naming_the_field(k8s: client.ApiClient) -> None:
    body = session_body("bad", capture={"steps": 5000})
    with pytest.raises(ApiException) as info:
        _create(k8s, body)
    assert info.value.status == 422
    assert "spec.capture.steps:" in json.loads(info.value.body)["message"]
    missing = session_body("nostore")
    del missing["spec"]["storage"]  # type: ignore[attr-defined]
    with pytest.raises(ApiException) as info:
        _create(k8s, missing)
    assert "spec.storage:" in json.loads(info.value.body)["message"]


def test_lists_have_kind_and_selectors_work(k8s: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s)
    for i, (app, tier) in enumerate([("x", "1"), ("y", "1"), ("z", None)]):
        labels = {"app": app, **({"tier": tier} if tier else {})}
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}", "labels": labels}})
    _, raw = _raw(k8s, "/api/v1/namespaces/default/configmaps")
    assert raw["kind"] == "ConfigMapList" and raw["apiVersion"] == "v1" and raw["metadata"]["resourceVersion"]

    def names(**kw: str) -> list[str]:
        return sorted(i.metadata.name for i in core.list_namespaced_config_map("default", **kw).items)

    assert names(label_selector="app in (x,y)") == ["c0", "c1"]
    assert names(label_selector="app notin (x),tier") == ["c1"]
    assert names(label_selector="!tier") == ["c2"]
    assert names(label_selector="app!=x") == ["c1", "c2"]
    assert names(field_selector="metadata.name=c2") == ["c2"]
    assert names(field_selector="metadata.namespace=other") == []


def test_patch_types_generation_and_status_isolation(k8s: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(k8s)
    obj = _create(k8s, session_body("p", capture={}))
    status = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "p", {"status": {"phase": "Pending"}, "spec": {"capture": {"steps": 9}}}
    )
    assert status["status"]["phase"] == "Pending" and status["spec"]["capture"]["steps"] == 5
    assert status["metadata"]["generation"] == 1  # status writes do not bump generation
    main = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "p", {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Failed"}}
    )
    assert main["status"]["phase"] == "Pending" and main["metadata"]["generation"] == 1
    spec = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "p", {"spec": {"ttlSecondsAfterFinished": 7}}
    )
    assert spec["metadata"]["generation"] == 2 and spec["spec"]["ttlSecondsAfterFinished"] == 7
    rv = spec["metadata"]["resourceVersion"]
    assert int(rv) > int(obj["metadata"]["resourceVersion"])

    def json_patch(ops: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        return _raw(
            k8s,
            f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}/p",
            "PATCH",
            ops,
            {"Content-Type": "application/json-patch+json"},
        )

    code, out = json_patch(
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/finalizers", "value": ["test/f"]},
        ]
    )
    assert code == 200 and out["metadata"]["finalizers"] == ["test/f"]
    code, out = json_patch(
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "remove", "path": "/metadata/finalizers"},
        ]
    )
    assert code == 422 and out["kind"] == "Status"
    stale = dict(spec, metadata={**spec["metadata"], "resourceVersion": rv})
    with pytest.raises(ApiException) as info:
        custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "p", stale)
    assert info.value.status == 409


def test_builtin_pod_and_job_status_isolation(k8s: client.ApiClient) -> None:
    core, batch = client.CoreV1Api(k8s), client.BatchV1Api(k8s)
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }
    created = core.create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"  # status is not settable on create
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running", "podIP": "127.0.0.2"}})
    out = core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "X"}})
    assert out.status.phase == "Running" and out.status.pod_ip == "127.0.0.2"
    job = {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}},
    }
    batch.create_namespaced_job("default", job)
    out_job = batch.patch_namespaced_job_status(
        "j", "default", {"status": {"succeeded": 1}, "spec": {"parallelism": 9}}
    )
    assert out_job.status.succeeded == 1 and out_job.spec.parallelism is None


def test_finalizers_and_owner_garbage_collection(k8s: client.ApiClient, api: EmulatorServer) -> None:
    core = client.CoreV1Api(k8s)
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner", "finalizers": ["x/y"]}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_secret("default", {"metadata": {"name": "dep", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", "default")
    marked = core.read_namespaced_config_map("owner", "default")
    assert marked.metadata.deletion_timestamp is not None
    assert api.get("v1", "secrets", "default", "dep") is not None  # owner not gone yet
    core.patch_namespaced_config_map("owner", "default", {"metadata": {"finalizers": None}})
    assert api.get("v1", "configmaps", "default", "owner") is None
    assert api.get("v1", "secrets", "default", "dep") is None


def test_crd_registration_over_http_serves_discovery(k8s: client.ApiClient) -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    crd["metadata"]["name"] = "widgets.example.dev"
    crd["spec"].update(
        group="example.dev",
        names={
            "kind": "Widget",
            "plural": "widgets",
            "singular": "widget",
            "shortNames": ["wd"],
            "listKind": "WidgetList",
        },
    )
    client.ApiextensionsV1Api(k8s).create_custom_resource_definition(crd)
    groups = client.ApisApi(k8s).get_api_versions()
    assert "example.dev" in [g.name for g in groups.groups]
    resources = client.CustomObjectsApi(k8s).get_api_resources("example.dev", "v1alpha1")
    names = {r.name: r for r in resources.resources}
    assert names["widgets"].kind == "Widget" and names["widgets"].short_names == ["wd"] and "widgets/status" in names
    core = client.CoreApi(k8s).get_api_versions()
    assert core.versions == ["v1"]
    v1 = {r.name for r in client.CoreV1Api(k8s).get_api_resources().resources}
    assert {"pods", "pods/status", "secrets", "configmaps", "events", "namespaces", "services"} <= v1
    assert client.VersionApi(k8s).get_code().major == "1"


def test_watch_resumes_from_resource_version(k8s: client.ApiClient, api: EmulatorServer) -> None:
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", {"metadata": {"name": "w0", "labels": {"w": "1"}}})
    listing = core.list_namespaced_config_map("default", label_selector="w=1")
    rv = listing.metadata.resource_version

    def later() -> None:
        time.sleep(0.2)
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "w1", "namespace": "default", "labels": {"w": "1"}},
            }
        )
        api.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "default"}})
        api.delete("v1", "configmaps", "default", "w1")

    thread = threading.Thread(target=later)
    thread.start()
    events = []
    for event in watch.Watch().stream(
        core.list_namespaced_config_map, "default", label_selector="w=1", resource_version=rv, timeout_seconds=2
    ):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 2:
            break
    thread.join()
    assert events == [("ADDED", "w1"), ("DELETED", "w1")]


def test_server_side_table_for_printer_columns(k8s: client.ApiClient, api: EmulatorServer) -> None:
    _create(k8s, session_body("t"))
    api.patch_status(f"{GROUP}/{VERSION}", PLURAL, "default", "t", {"phase": "Capturing", "progress": "2/4"})
    _, tbl = _raw(
        k8s,
        f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert tbl["kind"] == "Table"
    cols = [c["name"] for c in tbl["columnDefinitions"]]
    assert cols[:3] == ["Name", "Phase", "Captured"] and "Report" in cols
    assert tbl["rows"][0]["cells"][:3] == ["t", "Capturing", "2/4"]


def test_unknown_fields_are_pruned_but_preserved_where_the_schema_says(api: EmulatorServer) -> None:
    body = session_body("pr")
    body["spec"]["bogus"] = 1  # type: ignore[index]
    api.apply(body)
    stored = api.patch_status(
        f"{GROUP}/{VERSION}",
        PLURAL,
        "default",
        "pr",
        {"phase": "Pending", "unknownField": "x", "kopf": {"progress": {"h": {"retries": 1}}}},
    )
    assert "bogus" not in stored["spec"]
    assert "unknownField" not in stored["status"]
    assert stored["status"]["kopf"] == {"progress": {"h": {"retries": 1}}}
    assert stored["spec"]["targets"]["selector"]["matchLabels"] == {"app": "trainer"}

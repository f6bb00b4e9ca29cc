"""Sidecar injection as a pure function: what a pod gets, what it keeps, and that nothing is injected twice.

Every patched pod is validated against the Kubernetes OpenAPI schema (kubernetes-validate, strict)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from stepscope_contract.constants import INJECT_LABEL, INJECTED_ANNOTATION, SIDECAR_CONTAINER_NAME
from stepscope_operator.webhook.injection import (
    HOOK_PATH,
    INIT_CONTAINER_NAME,
    ORIGINAL_PYTHONPATH_ENV,
    RUN_PATH,
    InjectionConfig,
    decide,
    mutate,
)

pytestmark = pytest.mark.unit

K8S_VERSIONS = ("1.29.0", "1.32.0", "1.35.0")


def apply_json_patch(document: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 (the jsonpatch library) on a copy; raises on any invalid operation."""
    result: Any = jsonpatch.apply_patch(document, ops, in_place=False)
    return result


def make_pod(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "team-a", "labels": dict(labels or {})},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "trainer",
                    "image": "pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime",
                    "command": ["torchrun", "train.py"],
                    "env": [{"name": "RANK", "value": "0"}],
                }
            ],
        },
    }
    pod["spec"].update(spec)
    return pod


def validate_pod(pod: dict[str, Any]) -> None:
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env") or []}


def _inject(pod: dict[str, Any], config: InjectionConfig | None = None, ns: dict[str, str] | None = None) -> Any:
    ops = mutate(pod, config or InjectionConfig(), ns)
    assert ops, "expected an injection"
    patched = apply_json_patch(pod, ops)
    validate_pod(patched)
    return patched


def test_labelled_pod_gets_sidecar_init_container_volumes_and_env() -> None:
    patched = _inject(make_pod({INJECT_LABEL: "true"}))
    spec = patched["spec"]
    assert [c["name"] for c in spec["containers"]] == ["trainer"]
    # the hook is installed first; the sidecar is a native one (keeps running, ends with the training: Jobs complete)
    assert [c["name"] for c in spec["initContainers"]] == [INIT_CONTAINER_NAME, SIDECAR_CONTAINER_NAME]
    assert spec["initContainers"][0]["command"] == ["stepscope", "install-hook", HOOK_PATH]
    assert "restartPolicy" not in spec["initContainers"][0]
    sidecar = spec["initContainers"][1]
    assert sidecar["restartPolicy"] == "Always" and "startupProbe" not in sidecar
    assert sidecar["command"] + sidecar["args"] == [
        "stepscope",
        "sidecar",
        "--host",
        "$(POD_IP)",
        "--port",
        "8471",
        "--hook-dir",
        RUN_PATH,
        "--token-file",
        "/var/run/secrets/stepscope/token",
    ]
    env = _env(sidecar)
    # $(POD_IP) expands only from a variable defined in the container's env.
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["STEPSCOPE_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["STEPSCOPE_POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["STEPSCOPE_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "AWS_ACCESS_KEY_ID" not in env
    sc = sidecar["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["allowPrivilegeEscalation"] is False
    assert sidecar["resources"]["limits"]["memory"] == "256Mi"
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/var/run/secrets/stepscope"]["readOnly"] is True and RUN_PATH in mounts

    trainer = spec["containers"][0]
    tenv = _env(trainer)
    assert tenv["PYTHONPATH"] == {"name": "PYTHONPATH", "value": HOOK_PATH}
    assert tenv["STEPSCOPE_HOOK_DIR"]["value"] == RUN_PATH
    assert tenv["STEPSCOPE_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert tenv["RANK"]["value"] == "0"
    assert {m["mountPath"] for m in trainer["volumeMounts"]} == {HOOK_PATH, RUN_PATH}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["stepscope-token"]["secret"]["secretName"] == "stepscope-sidecar-token"
    assert volumes["stepscope-token"]["secret"]["optional"] is True
    assert "emptyDir" in volumes["stepscope-hook"] and "emptyDir" in volumes["stepscope-run"]
    annotations = patched["metadata"]["annotations"]
    assert annotations[INJECTED_ANNOTATION] == "true"
    assert annotations["stepscope.dev/sidecar-port"] == "8471"


def test_the_flight_recorder_is_turned_on_unless_the_container_chose_a_buffer_size() -> None:
    tenv = _env(_inject(make_pod({INJECT_LABEL: "true"}))["spec"]["containers"][0])
    assert tenv["TORCH_FR_BUFFER_SIZE"] == {"name": "TORCH_FR_BUFFER_SIZE", "value": "2000"}
    assert tenv["TORCH_NCCL_TRACE_BUFFER_SIZE"]["value"] == "2000"  # the name torch < 2.6 reads
    for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        pod = make_pod({INJECT_LABEL: "true"})
        pod["spec"]["containers"][0]["env"].append({"name": name, "value": "0"})
        env = _inject(pod)["spec"]["containers"][0]["env"]
        assert [e for e in env if e["name"].startswith("TORCH_")] == [{"name": name, "value": "0"}]
    off = InjectionConfig(flight_recorder_buffer_size=0)
    pod = make_pod({INJECT_LABEL: "true"})
    env = apply_json_patch(pod, mutate(pod, off, None))["spec"]["containers"][0]["env"]
    assert not [e for e in env if e["name"].startswith("TORCH_")]


def test_the_flight_recorder_buffer_size_comes_from_the_operator_environment() -> None:
    assert InjectionConfig.from_env({}).flight_recorder_buffer_size == 2000
    assert InjectionConfig.from_env({"STEPSCOPE_FR_BUFFER_SIZE": "500"}).flight_recorder_buffer_size == 500
    assert InjectionConfig.from_env({"STEPSCOPE_FR_BUFFER_SIZE": "0"}).flight_recorder_buffer_size == 0
    with pytest.raises(ValueError, match="STEPSCOPE_FR_BUFFER_SIZE"):
        InjectionConfig.from_env({"STEPSCOPE_FR_BUFFER_SIZE": "-1"})


def test_existing_pythonpath_keeps_its_value_after_the_hook() -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    pod["spec"]["containers"][0]["env"].append({"name": "PYTHONPATH", "value": "/app:/lib"})
    tenv = _env(_inject(pod)["spec"]["containers"][0])
    assert tenv["PYTHONPATH"]["value"] == f"{HOOK_PATH}:/app:/lib"


def test_pythonpath_from_a_configmap_is_kept_through_a_variable_defined_before_it() -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    ref = {"configMapKeyRef": {"name": "paths", "key": "pythonpath"}}
    pod["spec"]["containers"][0]["env"].append({"name": "PYTHONPATH", "valueFrom": ref})
    env = _inject(pod)["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.index(ORIGINAL_PYTHONPATH_ENV) < names.index("PYTHONPATH")
    assert env[names.index(ORIGINAL_PYTHONPATH_ENV)]["valueFrom"] == ref
    assert env[names.index("PYTHONPATH")]["value"] == f"{HOOK_PATH}:$({ORIGINAL_PYTHONPATH_ENV})"


def test_existing_volumes_mounts_and_init_containers_are_kept() -> None:
    pod = make_pod(
        {INJECT_LABEL: "true"},
        volumes=[{"name": "data", "emptyDir": {}}],
        initContainers=[{"name": "fetch", "image": "busybox", "command": ["true"]}],
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pod["metadata"]["annotations"] = {"team": "vision"}
    patched = _inject(pod)
    assert [v["name"] for v in patched["spec"]["volumes"]] == [
        "data",
        "stepscope-hook",
        "stepscope-run",
        "stepscope-token",
    ]
    assert [c["name"] for c in patched["spec"]["initContainers"]] == [
        "fetch",
        INIT_CONTAINER_NAME,
        SIDECAR_CONTAINER_NAME,
    ]
    assert [m["mountPath"] for m in patched["spec"]["containers"][0]["volumeMounts"]] == ["/data", HOOK_PATH, RUN_PATH]
    assert patched["metadata"]["annotations"]["team"] == "vision"


def test_injection_is_idempotent() -> None:
    patched = _inject(make_pod({INJECT_LABEL: "true"}))
    assert mutate(patched, InjectionConfig(), None) == []
    assert mutate(patched, InjectionConfig(), {INJECT_LABEL: "true"}) == []
    # The annotation lost but the containers there (a copied manifest): still no second sidecar.
    del patched["metadata"]["annotations"][INJECTED_ANNOTATION]
    assert mutate(patched, InjectionConfig(), None) == []


@pytest.mark.parametrize(
    ("labels", "ns_labels", "inject"),
    [
        ({INJECT_LABEL: "true"}, None, True),
        ({}, {INJECT_LABEL: "true"}, True),
        ({}, None, False),
        ({}, {INJECT_LABEL: "false"}, False),
        ({INJECT_LABEL: "false"}, {INJECT_LABEL: "true"}, False),
        ({INJECT_LABEL: "FALSE"}, None, False),
        ({INJECT_LABEL: "yes"}, {INJECT_LABEL: "true"}, False),
        ({INJECT_LABEL: "true", "app.kubernetes.io/part-of": "stepscope"}, None, False),
    ],
)
def test_decision(labels: dict[str, str], ns_labels: dict[str, str] | None, inject: bool) -> None:
    pod = make_pod(labels)
    assert decide(pod, ns_labels).inject is inject
    assert bool(mutate(pod, InjectionConfig(), ns_labels)) is inject


def test_credentials_only_through_secret_key_refs() -> None:
    config = InjectionConfig(credentials_secret="s3-keys", access_key_id_key="id", secret_access_key_key="secret")
    sidecar = _inject(make_pod({INJECT_LABEL: "true"}), config)["spec"]["initContainers"][1]
    env = _env(sidecar)
    # optional: a missing Secret leaves the training unprofiled instead of keeping the pod from starting
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"] == {"secretKeyRef": {"name": "s3-keys", "key": "id", "optional": True}}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "s3-keys", "key": "secret", "optional": True}
    }
    assert all("value" not in e for e in env.values() if e["name"].startswith("AWS_"))


def test_containers_annotation_limits_the_training_containers() -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    pod["spec"]["containers"].append({"name": "log-shipper", "image": "fluent/fluent-bit:3.0"})
    pod["metadata"]["annotations"] = {"stepscope.dev/containers": "trainer"}
    containers = _inject(pod)["spec"]["containers"]
    assert "PYTHONPATH" in _env(containers[0])
    assert "env" not in containers[1] and "volumeMounts" not in containers[1]


def test_pod_without_metadata_annotations_or_labels_in_a_labelled_namespace() -> None:
    pod = {"spec": {"containers": [{"name": "t", "image": "python:3.11"}]}}
    patched = apply_json_patch(pod, mutate(pod, InjectionConfig(), {INJECT_LABEL: "true"}))
    assert patched["metadata"]["annotations"][INJECTED_ANNOTATION] == "true"
    validate_pod({"apiVersion": "v1", "kind": "Pod", **patched})


def test_config_from_env() -> None:
    config = InjectionConfig.from_env(
        {
            "STEPSCOPE_SIDECAR_IMAGE": "registry.example/stepscope/sidecar:1.2.3",
            "STEPSCOPE_SIDECAR_IMAGE_PULL_POLICY": "Always",
            "STEPSCOPE_SIDECAR_PORT": "9000",
            "STEPSCOPE_SIDECAR_TOKEN_SECRET": "tok",
            "STEPSCOPE_SIDECAR_CREDENTIALS_SECRET": "keys",
            "STEPSCOPE_SIDECAR_RUN_AS_USER": "1000",
            "STEPSCOPE_SIDECAR_RESOURCES": '{"limits": {"memory": "1Gi"}}',
            "STEPSCOPE_SIDECAR_STORAGE_BASE": "s3://b/p",
            "STEPSCOPE_SIDECAR_STORAGE_ENDPOINT": "https://minio:9000",
        }
    )
    sidecar = _inject(make_pod({INJECT_LABEL: "true"}), config)["spec"]["initContainers"][1]
    env = _env(sidecar)
    assert env["STEPSCOPE_STORAGE_BASE"]["value"] == "s3://b/p"
    assert env["STEPSCOPE_STORAGE_ENDPOINT"]["value"] == "https://minio:9000"
    assert sidecar["image"] == "registry.example/stepscope/sidecar:1.2.3"
    assert sidecar["imagePullPolicy"] == "Always"
    assert sidecar["args"][3] == "9000" and sidecar["ports"][0]["containerPort"] == 9000
    assert sidecar["securityContext"]["runAsUser"] == 1000
    assert sidecar["resources"] == {"limits": {"memory": "1Gi"}}
    assert InjectionConfig.from_env({}) == InjectionConfig()
    with pytest.raises(ValueError, match="JSON object"):
        InjectionConfig.from_env({"STEPSCOPE_SIDECAR_RESOURCES": "[1]"})


def test_json_patch_applier_rejects_invalid_operations() -> None:
    with pytest.raises(jsonpatch.JsonPatchConflict):
        apply_json_patch({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}])
    with pytest.raises(jsonpatch.JsonPatchConflict):
        apply_json_patch({"a": []}, [{"op": "add", "path": "/a/3", "value": 1}])
    assert apply_json_patch({"a/b": [1]}, [{"op": "add", "path": "/a~1b/0", "value": 0}]) == {"a/b": [0, 1]}


def _strip_injection(template: dict[str, Any]) -> dict[str, Any]:
    """A pod template without what injection adds (names starting with stepscope, the hook's env, annotations)."""
    out = copy.deepcopy(template)
    out["metadata"].pop("annotations", None)
    spec = out["spec"]
    spec["containers"] = [c for c in spec["containers"] if not c["name"].startswith("stepscope")]
    for key in ("initContainers", "volumes"):
        kept = [x for x in spec.get(key, []) if not x["name"].startswith("stepscope")]
        spec.pop(key, None)
        if kept:
            spec[key] = kept
    for container in spec["containers"]:
        for key in ("env", "volumeMounts"):
            kept = [
                x
                for x in container.get(key, [])
                if not x["name"].startswith(("stepscope", "STEPSCOPE", "PYTHONPATH", "TORCH_FR", "TORCH_NCCL_TRACE"))
            ]
            container.pop(key, None)
            if kept:
                container[key] = kept
    return out


def test_manual_injection_doc_matches_what_the_webhook_injects() -> None:
    from pathlib import Path

    import yaml

    doc = (Path(__file__).resolve().parents[2] / "docs" / "manual-injection.md").read_text()
    job = yaml.safe_load(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)
    template = job["spec"]["template"]
    user = _strip_injection(template)
    config = InjectionConfig(
        credentials_secret="stepscope-s3",
        storage_base="s3://ml-team-profiles/stepscope",
        storage_endpoint="https://minio.storage:9000",
    )
    assert apply_json_patch(user, mutate(user, config, {INJECT_LABEL: "true"})) == template

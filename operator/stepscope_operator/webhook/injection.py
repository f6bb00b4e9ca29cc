"""Sidecar injection as a pure function: a Pod in, the JSON Patch (RFC 6902) that adds stepscope to it out.

What an injected pod gets (docs/interfaces.md, "Sidecar" and "Training container"):
- the init container `stepscope-install-hook` (`stepscope install-hook /stepscope/hook`) copying the hook into the
  shared emptyDir `stepscope-hook`;
- the native sidecar `stepscope-sidecar` (an init container with `restartPolicy: Always`, after the hook's
  installer) listening on the pod IP, sharing the emptyDir `stepscope-run` with the
  training container(s), with the token Secret mounted, storage credentials only through `secretKeyRef` and the
  only destinations it uploads to (`STEPSCOPE_STORAGE_BASE`, `STEPSCOPE_STORAGE_ENDPOINT`);
- on each training container: `PYTHONPATH` (the hook folder prepended to any value already set),
  `STEPSCOPE_HOOK_DIR`, `STEPSCOPE_POD_NAME` / `STEPSCOPE_NODE_NAME` and the two volume mounts; and PyTorch's Flight
  Recorder on (`TORCH_FR_BUFFER_SIZE`, and `TORCH_NCCL_TRACE_BUFFER_SIZE` for torch < 2.6) unless the container
  sets either itself, so that a hang's dump says which rank, collective and line;
- the annotation `stepscope.dev/injected: "true"`, which makes injection idempotent.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stepscope_contract.constants import (
    DEFAULT_SIDECAR_PORT,
    ENV_HOOK_DIR,
    ENV_JOB_NAME,
    ENV_NODE_NAME,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_STORAGE_BASE,
    ENV_STORAGE_ENDPOINT,
    INJECT_LABEL,
    INJECTED_ANNOTATION,
    SIDECAR_CONTAINER_NAME,
    SIDECAR_PORT_ANNOTATION,
)
from stepscope_operator.session.targets import JOB_NAME, JOB_NAME_LEGACY, JOBSET_NAME, PYTORCHJOB_NAME
from stepscope_storage.credentials import ENV_ACCESS_KEY_ID, ENV_SECRET_ACCESS_KEY, secret_env

JSONPatchOp = dict[str, Any]

INIT_CONTAINER_NAME = "stepscope-install-hook"
HOOK_VOLUME = "stepscope-hook"
RUN_VOLUME = "stepscope-run"
TOKEN_VOLUME = "stepscope-token"  # noqa: S105 - a volume name
HOOK_PATH = "/stepscope/hook"
RUN_PATH = "/stepscope/run"
TOKEN_DIR = "/var/run/secrets/stepscope"  # noqa: S105 - a path
TOKEN_KEY = "token"  # noqa: S105 - the key of the token in its Secret
# stepscope's own pods (operator, analyzer Jobs) carry this label and are never injected.
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF_VALUE = "stepscope"
# Optional pod annotation: comma-separated names of the training containers (default: every container).
CONTAINERS_ANNOTATION = "stepscope.dev/containers"
# Where a PYTHONPATH given through valueFrom is moved, so that `$(...)` can prepend the hook folder to it.
ORIGINAL_PYTHONPATH_ENV = "STEPSCOPE_ORIGINAL_PYTHONPATH"

# PyTorch's Flight Recorder: entries of its ring buffer of recent collectives (1-2 KiB each with the Python
# stack that issued it; bench/hook_overhead.py measures time and memory). 0: leave the variables unset.
DEFAULT_FR_BUFFER_SIZE = 2000
FR_BUFFER_ENVS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")

_DEFAULT_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "256Mi"},
}


@dataclass(frozen=True)
class InjectionConfig:
    """What the webhook injects; read from the operator's environment (the Helm chart sets it)."""

    sidecar_image: str = "stepscope/sidecar:0.1.0"
    image_pull_policy: str = "IfNotPresent"
    sidecar_port: int = DEFAULT_SIDECAR_PORT
    token_secret: str = "stepscope-sidecar-token"  # noqa: S105 - a Secret's name
    credentials_secret: str | None = None  # Secret with the access keys (stepscope_storage.credentials)
    access_key_id_key: str = ENV_ACCESS_KEY_ID  # the Secret's keys are named like the variables by default
    secret_access_key_key: str = ENV_SECRET_ACCESS_KEY
    # Where injected sidecars may upload: sessions must use this storage URI (comma-separated for several) and
    # endpoint; anything else gets 400 from the sidecar (docs/security.md).
    storage_base: str = ""
    storage_endpoint: str = ""
    run_as_user: int = 65532
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: copy.deepcopy(_DEFAULT_RESOURCES))
    flight_recorder_buffer_size: int = DEFAULT_FR_BUFFER_SIZE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> InjectionConfig:
        e = os.environ if env is None else env
        resources: Mapping[str, Mapping[str, str]] = copy.deepcopy(_DEFAULT_RESOURCES)
        raw = e.get("STEPSCOPE_SIDECAR_RESOURCES")
        if raw:
            parsed = json.loads(raw)
            if not isinstance(parsed, dict):
                raise ValueError("STEPSCOPE_SIDECAR_RESOURCES must be a JSON object")
            resources = parsed
        return cls(
            sidecar_image=e.get("STEPSCOPE_SIDECAR_IMAGE", cls.sidecar_image),
            image_pull_policy=e.get("STEPSCOPE_SIDECAR_IMAGE_PULL_POLICY", cls.image_pull_policy),
            sidecar_port=int(e.get("STEPSCOPE_SIDECAR_PORT", cls.sidecar_port)),
            token_secret=e.get("STEPSCOPE_SIDECAR_TOKEN_SECRET", cls.token_secret),
            credentials_secret=e.get("STEPSCOPE_SIDECAR_CREDENTIALS_SECRET") or None,
            access_key_id_key=e.get("STEPSCOPE_SIDECAR_CREDENTIALS_ACCESS_KEY_ID_KEY", cls.access_key_id_key),
            secret_access_key_key=e.get(
                "STEPSCOPE_SIDECAR_CREDENTIALS_SECRET_ACCESS_KEY_KEY", cls.secret_access_key_key
            ),
            storage_base=e.get("STEPSCOPE_SIDECAR_STORAGE_BASE", cls.storage_base),
            storage_endpoint=e.get("STEPSCOPE_SIDECAR_STORAGE_ENDPOINT", cls.storage_endpoint),
            run_as_user=int(e.get("STEPSCOPE_SIDECAR_RUN_AS_USER", cls.run_as_user)),
            resources=resources,
            flight_recorder_buffer_size=_buffer_size(e.get("STEPSCOPE_FR_BUFFER_SIZE")),
        )


def _buffer_size(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_FR_BUFFER_SIZE
    value = int(raw)
    if not 0 <= value <= 1_000_000:
        raise ValueError(f"STEPSCOPE_FR_BUFFER_SIZE must be 0..1000000, got {value}")
    return value


@dataclass(frozen=True)
class Decision:
    inject: bool
    reason: str


def decide(pod: Mapping[str, Any], namespace_labels: Mapping[str, str] | None) -> Decision:
    """Whether `pod` gets the sidecar: a pod's opt-out wins, then idempotency, then the pod's or namespace's label."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    pod_label = str(labels.get(INJECT_LABEL, "")).lower()
    ns_label = str((namespace_labels or {}).get(INJECT_LABEL, "")).lower()
    if pod_label == "false":
        return Decision(False, f"pod opted out ({INJECT_LABEL}=false)")
    if labels.get(PART_OF_LABEL) == PART_OF_VALUE:
        return Decision(False, "stepscope's own pod (operator or analyzer)")
    if str(annotations.get(INJECTED_ANNOTATION, "")).lower() == "true":
        return Decision(False, f"already injected ({INJECTED_ANNOTATION})")
    spec = pod.get("spec") or {}
    names = {c.get("name") for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])}
    if SIDECAR_CONTAINER_NAME in names or INIT_CONTAINER_NAME in names:
        return Decision(False, "the pod already has stepscope's containers")
    if pod_label == "true":
        return Decision(True, f"pod labelled {INJECT_LABEL}=true")
    if ns_label == "true" and not pod_label:
        return Decision(True, f"namespace labelled {INJECT_LABEL}=true")
    return Decision(False, "not requested")


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _security_context(config: InjectionConfig) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": config.run_as_user,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def sidecar_container(config: InjectionConfig) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        _field_env("POD_IP", "status.podIP"),
        _field_env(ENV_POD_NAME, "metadata.name"),
        _field_env(ENV_POD_NAMESPACE, "metadata.namespace"),
        _field_env(ENV_NODE_NAME, "spec.nodeName"),
        {"name": "TMPDIR", "value": RUN_PATH},  # the root filesystem is read-only
        {"name": ENV_STORAGE_BASE, "value": config.storage_base},
        {"name": ENV_STORAGE_ENDPOINT, "value": config.storage_endpoint},
    ]
    if config.credentials_secret:
        # optional: a missing Secret must not keep the pod (and its training) from starting.
        env += secret_env(config.credentials_secret, config.access_key_id_key, config.secret_access_key_key,
                          optional=True)  # fmt: skip
    return {
        "name": SIDECAR_CONTAINER_NAME,
        "image": config.sidecar_image,
        "imagePullPolicy": config.image_pull_policy,
        # A native sidecar (an init container that keeps running): started before the training containers and
        # stopped once they end, so that a Job's pod still completes (Kubernetes >= 1.29).
        "restartPolicy": "Always",
        "command": ["stepscope", "sidecar"],
        "args": [
            "--host",
            "$(POD_IP)",
            "--port",
            str(config.sidecar_port),
            "--hook-dir",
            RUN_PATH,
            "--token-file",
            f"{TOKEN_DIR}/{TOKEN_KEY}",
        ],
        "env": env,
        "ports": [{"name": "stepscope", "containerPort": config.sidecar_port, "protocol": "TCP"}],
        "resources": copy.deepcopy(dict(config.resources)),
        "securityContext": _security_context(config),
        "volumeMounts": [
            {"name": RUN_VOLUME, "mountPath": RUN_PATH},
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True},
        ],
    }


def init_container(config: InjectionConfig) -> dict[str, Any]:
    return {
        "name": INIT_CONTAINER_NAME,
        "image": config.sidecar_image,
        "imagePullPolicy": config.image_pull_policy,
        "command": ["stepscope", "install-hook", HOOK_PATH],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "securityContext": _security_context(config),
        "volumeMounts": [{"name": HOOK_VOLUME, "mountPath": HOOK_PATH}],
    }


def volumes(config: InjectionConfig) -> list[dict[str, Any]]:
    return [
        {"name": HOOK_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": RUN_VOLUME, "emptyDir": {}},
        {
            "name": TOKEN_VOLUME,
            "secret": {
                "secretName": config.token_secret,
                "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
                "defaultMode": 0o444,  # the sidecar runs as non-root without an fsGroup
                # A missing Secret must not keep the pod from starting: the sidecar then exits (no token), the
                # training runs unprofiled.
                "optional": True,
            },
        },
    ]


def _training_env(existing: list[dict[str, Any]], fr_buffer_size: int = DEFAULT_FR_BUFFER_SIZE) -> list[dict[str, Any]]:
    """The container's env with PYTHONPATH (hook first), the hook's variables and the Flight Recorder's buffer
    size; user values are kept (a container that sets either Flight Recorder variable keeps its choice)."""
    env = [dict(e) for e in existing]
    index = next((i for i, e in enumerate(env) if e.get("name") == "PYTHONPATH"), None)
    if index is None:
        env.append({"name": "PYTHONPATH", "value": HOOK_PATH})
    elif "valueFrom" in env[index]:
        # $(VAR) expands only variables defined earlier in the list: move the original one just before.
        original = {"name": ORIGINAL_PYTHONPATH_ENV, "valueFrom": env[index]["valueFrom"]}
        env[index] = {"name": "PYTHONPATH", "value": f"{HOOK_PATH}:$({ORIGINAL_PYTHONPATH_ENV})"}
        env.insert(index, original)
    else:
        value = str(env[index].get("value") or "")
        env[index] = {"name": "PYTHONPATH", "value": f"{HOOK_PATH}:{value}" if value else HOOK_PATH}
    names = {e.get("name") for e in env}
    for item in (
        {"name": ENV_HOOK_DIR, "value": RUN_PATH},
        _field_env(ENV_POD_NAME, "metadata.name"),
        _field_env(ENV_NODE_NAME, "spec.nodeName"),
    ):
        if item["name"] not in names:
            env.append(item)
    if fr_buffer_size > 0 and not names & set(FR_BUFFER_ENVS):
        env.extend({"name": name, "value": str(fr_buffer_size)} for name in FR_BUFFER_ENVS)
    return env


JOB_NAME_LABELS = (PYTORCHJOB_NAME, JOBSET_NAME, JOB_NAME, JOB_NAME_LEGACY)


def with_job_name(sidecar: dict[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """The sidecar with STEPSCOPE_JOB_NAME (the job_name label of its step metrics) from the pod's job label, when the
    pod has one (PyTorchJob, JobSet and TrainJob, batch Job)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    key = next((k for k in JOB_NAME_LABELS if labels.get(k)), None)
    if key is not None:
        sidecar["env"].append(_field_env(ENV_JOB_NAME, f"metadata.labels['{key}']"))
    return sidecar


def _training_indices(pod: Mapping[str, Any]) -> list[int]:
    metadata = pod.get("metadata") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    wanted_raw = str((metadata.get("annotations") or {}).get(CONTAINERS_ANNOTATION, "")).strip()
    wanted = {n.strip() for n in wanted_raw.split(",") if n.strip()}
    return [i for i, c in enumerate(containers) if not wanted or c.get("name") in wanted]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _append_ops(path: str, current: list[Any] | None, items: list[Any]) -> list[JSONPatchOp]:
    if current is None:
        return [{"op": "add", "path": path, "value": items}]
    return [{"op": "add", "path": f"{path}/-", "value": item} for item in items]


def mutate(
    pod: Mapping[str, Any], config: InjectionConfig, namespace_labels: Mapping[str, str] | None = None
) -> list[JSONPatchOp]:
    """The JSON Patch that injects stepscope into `pod`; empty when `decide` says no."""
    if not decide(pod, namespace_labels).inject:
        return []
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ops: list[JSONPatchOp] = []
    annotations = {INJECTED_ANNOTATION: "true", SIDECAR_PORT_ANNOTATION: str(config.sidecar_port)}
    if metadata.get("annotations") is None:
        if not metadata:
            ops.append({"op": "add", "path": "/metadata", "value": {}})
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    else:
        for key, value in annotations.items():
            ops.append({"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value})

    containers: list[dict[str, Any]] = spec.get("containers") or []
    for i in _training_indices(pod):
        container = containers[i]
        ops.append(
            {
                "op": "add",
                "path": f"/spec/containers/{i}/env",
                "value": _training_env(container.get("env") or [], config.flight_recorder_buffer_size),
            }
        )
        mounts = [
            {"name": HOOK_VOLUME, "mountPath": HOOK_PATH, "readOnly": True},
            {"name": RUN_VOLUME, "mountPath": RUN_PATH},
        ]
        ops.extend(_append_ops(f"/spec/containers/{i}/volumeMounts", container.get("volumeMounts"), mounts))
    added = [init_container(config), with_job_name(sidecar_container(config), pod)]
    ops.extend(_append_ops("/spec/initContainers", spec.get("initContainers"), added))
    ops.extend(_append_ops("/spec/volumes", spec.get("volumes"), volumes(config)))
    return ops

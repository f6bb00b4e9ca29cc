"""What `stepscope local-cluster` and `stepscope demo` put into a fresh local cluster so that the examples work as
they are: the operator's storage settings, the Secrets the examples name, the demo training's script, the buckets,
and the operator process itself.

The layout mirrors a Helm install in `stepscope-system`: that namespace holds the install's storage settings
(ConfigMap `stepscope-storage`, the keys the operator reads as `STEPSCOPE_STORAGE_*`, which `stepscope check` reads
too) and the operator runs as its ServiceAccount `stepscope-operator` (the emulator records its requests). The
training namespace (`default`) holds the credentials Secret `stepscope-s3`, the sidecar token derived for it, and a
copy of the storage settings for pods that carry the sidecar in their manifest (the sidecar reads the same
`STEPSCOPE_STORAGE_BASE`/`STEPSCOPE_STORAGE_ENDPOINT` as its only destinations, examples/demo/train-job.yaml).
Sessions then need only `storage.uri`: the operator fills the endpoint, addressing style and Secret in.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_local.manifests import DEMO_DIR, load_all, script_configmap
from stepscope_local.ports import free_port

if TYPE_CHECKING:
    from stepscope_local.cluster import LocalCluster

OPERATOR_NAMESPACE, OPERATOR_ACCOUNT = "stepscope-system", "stepscope-operator"  # as the Helm chart installs it
INSTALL_NAMESPACE = OPERATOR_NAMESPACE
MASTER_TOKEN = "demo-master-token"  # noqa: S105 - the local operator's master; secrets.yaml holds the one derived
TRAINING_NAMESPACE = "default"
ANALYZER_ACCOUNT = "stepscope-analyzer"
STORAGE_CONFIGMAP = "stepscope-storage"
STORAGE_LABELS = {"app.kubernetes.io/part-of": "stepscope", "app.kubernetes.io/component": "storage-settings"}
CREDENTIALS_SECRET = "stepscope-s3"  # noqa: S105 - a Secret's name (examples/demo/secrets.yaml)
TOKEN_SECRET = "stepscope-sidecar-token"  # noqa: S105 - a Secret's name (examples/demo/secrets.yaml)
BUCKETS = ("stepscope-demo", "stepscope-traces")  # the buckets the examples name
STORAGE_BASE = "s3://stepscope-demo/sessions"
BIN = Path(sys.executable).parent
# `stepscope local-cluster` onboards namespaces by label, as the chart with onboarding.byLabel=true does
ONBOARDING_ENV = {"STEPSCOPE_ONBOARD_LABEL": "true"}


def storage_settings(cluster: LocalCluster) -> dict[str, str]:
    """The install's storage settings for this cluster's S3, as the operator reads them (`STEPSCOPE_STORAGE_*`)."""
    return {
        "STEPSCOPE_STORAGE_BASE": STORAGE_BASE,
        "STEPSCOPE_STORAGE_ENDPOINT": cluster.s3_endpoint,
        "STEPSCOPE_STORAGE_REGION": cluster.s3_region,
        "STEPSCOPE_STORAGE_ADDRESSING_STYLE": "path",
        "STEPSCOPE_STORAGE_CREDENTIALS_SECRET": CREDENTIALS_SECRET,
    }


def install(cluster: LocalCluster) -> None:
    """Namespaces, storage settings, Secrets, the demo training's script and the examples' buckets."""
    cluster.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALL_NAMESPACE}})
    for namespace, labels in ((INSTALL_NAMESPACE, STORAGE_LABELS), (TRAINING_NAMESPACE, {})):
        cluster.api.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": STORAGE_CONFIGMAP, "namespace": namespace, "labels": labels},
                "data": storage_settings(cluster),
            }
        )
    for doc in load_all(DEMO_DIR / "secrets.yaml"):  # the S3 keys (moto takes any), the namespace's sidecar token
        cluster.api.apply(doc)
    cluster.api.apply(script_configmap(TRAINING_NAMESPACE))
    cluster.api.apply(  # as the chart gives each training namespace: the account the analyzer Job runs as
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": ANALYZER_ACCOUNT,
                "namespace": TRAINING_NAMESPACE,
                "labels": {"app.kubernetes.io/part-of": "stepscope", "app.kubernetes.io/component": "analyzer"},
            },
        }
    )
    assert cluster.s3 is not None
    for bucket in BUCKETS:
        cluster.s3.create_bucket(bucket)


def shell_lines(cluster: LocalCluster) -> list[str]:
    """`export` lines a shell can `eval`: the kubeconfig and the S3 endpoint and keys (AWS CLI and boto3 names)."""
    values = {
        "KUBECONFIG": str(cluster.kubeconfig_path),
        "AWS_ENDPOINT_URL": cluster.s3_endpoint,
        "AWS_ACCESS_KEY_ID": cluster.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": cluster.s3_secret_key,
        "AWS_DEFAULT_REGION": cluster.s3_region,
    }
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]


def operator_env(
    cluster: LocalCluster,
    workdir: Path,
    health_port: int,
    namespaces: str = "",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    token = workdir / "operator" / "token"
    token.parent.mkdir(parents=True, exist_ok=True)
    token.write_text(MASTER_TOKEN)  # examples/demo/secrets.yaml holds the token derived for "default"
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        # the operator's own identity, as the chart's ServiceAccount (the emulator records who made which request)
        "KUBECONFIG": str(cluster.service_account_kubeconfig(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)),
        "STEPSCOPE_WATCH_NAMESPACES": namespaces,
        "STEPSCOPE_LOCAL_MODE": "true",
        "STEPSCOPE_SIDECAR_TOKEN_FILE": str(token),
        "STEPSCOPE_ANALYZER_COMMAND": json.dumps(["stepscope", "analyzer-job"]),
        "STEPSCOPE_METRICS_PORT": str(free_port()),
        "STEPSCOPE_HEALTH_PORT": str(health_port),
        "STEPSCOPE_TICK_SECONDS": "0.5",
        "STEPSCOPE_TRIGGER_TICK_SECONDS": "1",
        **storage_settings(cluster),
        **(extra or {}),
    }


def start_operator(
    cluster: LocalCluster,
    workdir: Path,
    command: list[str] | None = None,
    health_port: int | None = None,
    namespaces: str = "",
    *,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """The operator as a local process (its log in `workdir/operator.log`), configured for this cluster."""
    env = operator_env(cluster, workdir, health_port or free_port(), namespaces, extra_env)
    log = (workdir / "operator.log").open("ab")
    return subprocess.Popen(
        command or [str(BIN / "stepscope"), "operator"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )

"""`stepscope check`: does this install work? Four checks against the cluster in the kubeconfig, a table, and exit
status 1 naming every check that failed.

- crd: the ProfileSession CRD exists, is Established and its version is served (listed in discovery, listable).
- operator: a probe ProfileSession that matches no pod (`targets.waitSeconds: 0`) gets a phase within `--timeout`,
  which only a running operator that watches the namespace gives it; the probe is deleted afterwards.
- webhook: a labelled Pod created with `dryRun=All` must come back with the `stepscope-sidecar` container (the
  mutating webhook runs on dry-run requests; nothing is created). On an API server without admission webhooks
  (admissionregistration.k8s.io not served, as in `stepscope local-cluster`) the check is skipped and says so.
- team: the training namespace holds the sidecar token Secret, the analyzer's ServiceAccount and the install's
  default credentials Secret, or the check names what is missing and how to add it (check_team.py).
- storage: with the install's storage settings (ConfigMap labelled `app.kubernetes.io/component: storage-settings`
  in `--install-namespace`) and the credentials Secret of the training namespace, a probe object is written, read
  back and deleted.

Permissions it needs (docs/interfaces.md): get customresourcedefinitions; create/get/delete profilesessions and
create pods (dry-run) in the namespace; list mutatingwebhookconfigurations; list configmaps in the install namespace;
get the credentials Secret (and, to find the storage settings without --install-namespace, list configmaps
cluster-wide; without that permission it looks in `stepscope`).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stepscope_cli.commands.args import check_parser
from stepscope_cli.commands.check_report import CheckResult, exit_code, fail, ok, render, skip
from stepscope_cli.commands.check_team import check_team
from stepscope_contract.constants import API_VERSION, CRD_NAME, GROUP, KIND, PLURAL, SIDECAR_CONTAINER_NAME, VERSION
from stepscope_contract.storage import AddressingStyle, Scheme, StorageLocation, StorageUriError, parse_storage_uri
from stepscope_contract.storage_defaults import StorageDefaults
from stepscope_storage import Connection, Credentials, TransferSettings, open_store

DEFAULT_INSTALL_NAMESPACE = "stepscope"
SETTINGS_SELECTOR = "app.kubernetes.io/part-of=stepscope,app.kubernetes.io/component=storage-settings"
PROBE_LABEL = "stepscope.dev/check"
# the probe object is tiny: two tries per request and short timeouts, so a wrong endpoint fails the check quickly
PROBE_TRANSFER = TransferSettings(attempts=2, connect_timeout=10, read_timeout=20)


class Cluster:
    """Raw JSON calls through the official client (kubeconfig, else the pod's service account)."""

    def __init__(self, kubeconfig: str | None) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        path = kubeconfig or os.environ.get("KUBECONFIG")
        if path:
            config.load_kube_config(config_file=path, client_configuration=cfg)
        else:
            config.load_incluster_config(client_configuration=cfg)
        self._api = client.ApiClient(cfg)
        self.context_namespace = "default"
        if path:
            _, active = config.list_kube_config_contexts(config_file=path)
            self.context_namespace = (active or {}).get("context", {}).get("namespace") or "default"

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        """(HTTP status, JSON body); a 401 raises: with rejected credentials no answer means anything."""
        from kubernetes.client.exceptions import ApiException

        try:
            response = self._api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=30,
            )
            return int(response.status), json.loads(response.data or b"null")
        except ApiException as exc:
            if exc.status == 401:
                raise
            try:
                return int(exc.status), json.loads(exc.body or "null")
            except ValueError:
                return int(exc.status), {"message": str(exc.body)[:300]}

    def close(self) -> None:
        self._api.close()


@dataclass
class Context:
    cluster: Cluster
    namespace: str
    install_namespace: str | None  # None: find the storage settings by their labels
    timeout: float
    storage_uri: str | None
    probe_id: str = field(default_factory=lambda: secrets.token_hex(3))


def _message(body: Any) -> str:
    return str((body or {}).get("message", body))[:300] if isinstance(body, dict) else str(body)[:300]


# ---- crd ------------------------------------------------------------------------------------------------------------
def check_crd(ctx: Context) -> CheckResult:
    code, crd = ctx.cluster.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    if code != 200:
        return fail("crd", f"CustomResourceDefinition {CRD_NAME} not found ({code}): install the chart (crds/)")
    conditions = {c.get("type"): c.get("status") for c in (crd.get("status") or {}).get("conditions") or []}
    if conditions.get("Established") != "True":
        return fail("crd", f"{CRD_NAME} exists but is not Established: {conditions}")
    versions = [v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
    if VERSION not in versions:
        return fail("crd", f"{CRD_NAME} does not serve {VERSION} (served: {', '.join(map(str, versions)) or 'none'})")
    code, resources = ctx.cluster.call("GET", f"/apis/{GROUP}/{VERSION}")
    names = [r.get("name") for r in (resources or {}).get("resources") or []] if code == 200 else []
    if PLURAL not in names:
        return fail("crd", f"{GROUP}/{VERSION} discovery does not list {PLURAL} ({code})")
    code, listed = ctx.cluster.call("GET", f"/apis/{GROUP}/{VERSION}/namespaces/{ctx.namespace}/{PLURAL}")
    if code != 200:
        return fail("crd", f"cannot list {PLURAL} in namespace {ctx.namespace} ({code}): {_message(listed)}")
    return ok("crd", f"{CRD_NAME} established, {VERSION} served and listable in namespace {ctx.namespace}")


# ---- operator -------------------------------------------------------------------------------------------------------
def _probe_session(ctx: Context, name: str, uri: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": ctx.namespace, "labels": {PROBE_LABEL: "probe"}},
        "spec": {
            "targets": {"selector": {"matchLabels": {f"{PROBE_LABEL}-probe": ctx.probe_id}}, "waitSeconds": 0},
            "storage": {"uri": uri},
            "analysis": {"enabled": False},
            "ttlSecondsAfterFinished": 0,
        },
    }


def _delete_probe(ctx: Context, path: str) -> None:
    ctx.cluster.call("DELETE", path)
    deadline = time.monotonic() + ctx.timeout
    while time.monotonic() < deadline and ctx.cluster.call("GET", path)[0] == 200:
        time.sleep(0.5)


def check_operator(ctx: Context) -> CheckResult:
    name = f"stepscope-check-{ctx.probe_id}"
    collection = f"/apis/{GROUP}/{VERSION}/namespaces/{ctx.namespace}/{PLURAL}"
    uri = ctx.storage_uri or "s3://stepscope-check/probe"
    if not uri.startswith(("s3://", "oss://")):
        uri = "s3://stepscope-check/probe"  # never touched: the probe matches no pod and records nothing
    code, created = ctx.cluster.call("POST", collection, _probe_session(ctx, name, uri))
    if code not in (200, 201):
        return fail(
            "operator", f"could not create the probe session {ctx.namespace}/{name} ({code}): {_message(created)}"
        )
    started = time.monotonic()
    status: dict[str, Any] = {}
    try:
        while time.monotonic() - started < ctx.timeout:
            code, obj = ctx.cluster.call("GET", f"{collection}/{name}")
            status = (obj or {}).get("status") or {} if code == 200 else {}
            if status.get("phase"):
                break
            time.sleep(0.5)
    finally:
        _delete_probe(ctx, f"{collection}/{name}")
    if not status.get("phase"):
        return fail(
            "operator",
            f"no operator processed the probe session {ctx.namespace}/{name} within {ctx.timeout:.0f} s: is the "
            f"operator running, and does it watch namespace {ctx.namespace}?",
        )
    return ok(
        "operator",
        f"processed the probe session {ctx.namespace}/{name} in {time.monotonic() - started:.1f} s "
        f"(phase {status.get('phase')}; the probe matches no pod) and released it",
    )


# ---- webhook --------------------------------------------------------------------------------------------------------
def _probe_pod(ctx: Context) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"stepscope-check-{ctx.probe_id}",
            "namespace": ctx.namespace,
            "labels": {"stepscope.dev/inject": "true", PROBE_LABEL: "probe"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "busybox", "command": ["true"]}],
        },
    }


def check_webhook(ctx: Context) -> CheckResult:
    code, groups = ctx.cluster.call("GET", "/apis")
    served = {g.get("name") for g in (groups or {}).get("groups") or []} if code == 200 else set()
    if "admissionregistration.k8s.io" not in served:
        return skip(
            "webhook",
            "this API server runs no admission webhooks (admissionregistration.k8s.io is not served; the local "
            "cluster is such a server): pods there carry the sidecar in their manifest (docs/manual-injection.md)",
        )
    code, configs = ctx.cluster.call(
        "GET",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        query={"labelSelector": "app.kubernetes.io/part-of=stepscope"},
    )
    if code != 200 or not (configs or {}).get("items"):
        return fail("webhook", f"no stepscope MutatingWebhookConfiguration ({code}); installed with webhook.enabled?")
    code, pod = ctx.cluster.call(
        "POST", f"/api/v1/namespaces/{ctx.namespace}/pods", _probe_pod(ctx), query={"dryRun": "All"}
    )
    if code not in (200, 201):
        return fail("webhook", f"the dry-run pod was refused ({code}): {_message(pod)}")
    spec = (pod or {}).get("spec") or {}
    names = [c.get("name") for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]]
    if SIDECAR_CONTAINER_NAME not in names:
        return fail(
            "webhook",
            f"a dry-run pod labelled stepscope.dev/inject=true came back without {SIDECAR_CONTAINER_NAME}: the "
            "webhook did not mutate it (failurePolicy Ignore hides its errors: see the operator's log)",
        )
    return ok("webhook", f"a dry-run pod labelled stepscope.dev/inject=true got {SIDECAR_CONTAINER_NAME} (not created)")


# ---- storage --------------------------------------------------------------------------------------------------------
def storage_settings(ctx: Context) -> tuple[StorageDefaults, str]:
    """The install's storage settings ConfigMap: in --install-namespace, else found by its labels (cluster-wide list,
    which may be forbidden: then the chart's usual namespace `stepscope`)."""
    query = {"labelSelector": SETTINGS_SELECTOR}
    items: list[dict[str, Any]] = []
    if ctx.install_namespace is None:
        code, listed = ctx.cluster.call("GET", "/api/v1/configmaps", query=query)
        items = (listed or {}).get("items") or [] if code == 200 else []
    namespace = ctx.install_namespace or DEFAULT_INSTALL_NAMESPACE
    if not items:
        code, listed = ctx.cluster.call("GET", f"/api/v1/namespaces/{namespace}/configmaps", query=query)
        items = (listed or {}).get("items") or [] if code == 200 else []
    if not items:
        return StorageDefaults(), f"no storage settings ConfigMap in namespace {namespace}"
    meta = items[0].get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace', namespace)}/{meta.get('name')}"
    return StorageDefaults.from_env(items[0].get("data") or {}), where


def credentials_of(ctx: Context, settings: StorageDefaults) -> tuple[Credentials | None, str]:
    """(the credentials, where they came from); raises ValueError naming what is wrong."""
    if not settings.credentials_secret:
        return None, "the environment's own credentials (no credentials Secret configured)"
    name = settings.credentials_secret
    code, secret = ctx.cluster.call("GET", f"/api/v1/namespaces/{ctx.namespace}/secrets/{name}")
    if code != 200:
        raise ValueError(f"Secret {ctx.namespace}/{name} cannot be read ({code}): {_message(secret)}")
    data = (secret or {}).get("data") or {}
    missing = [k for k in (settings.access_key_id_key, settings.secret_access_key_key) if k not in data]
    if missing:
        raise ValueError(f"Secret {ctx.namespace}/{name} has no key {', '.join(missing)} (it has: {', '.join(data)})")
    decoded = {
        k: base64.b64decode(data[k]).decode() for k in (settings.access_key_id_key, settings.secret_access_key_key)
    }
    credentials = Credentials(decoded[settings.access_key_id_key], decoded[settings.secret_access_key_key])
    return credentials, f"Secret {ctx.namespace}/{name}"


def _round_trip(settings: StorageDefaults, uri: str, credentials: Credentials | None, probe: str) -> str:
    """Write, read back and delete one object (through stepscope_storage, as the sidecars and the analyzer reach
    the store); returns its URI. Raises the store's own error."""
    location = parse_storage_uri(uri)
    connection = Connection(
        settings.endpoint or None, settings.region or None, AddressingStyle(settings.addressing_style or "auto")
    )
    store = open_store(location, connection, credentials, PROBE_TRANSFER)
    # `.stepscope-check` is spelt here, not through StorageLocation.child, which would rename a leading dot
    folder = StorageLocation(
        location.scheme, location.bucket, "/".join(p for p in (location.prefix, ".stepscope-check", probe) if p)
    )
    key = folder.key("probe.txt")
    body = f"stepscope check {probe}".encode()
    written = store.write(key, body, "text/plain")
    try:
        read = store.read(key, most=len(body) + 1)
        if read != body:
            raise ValueError(f"read back {len(read)} bytes that differ from the {len(body)} written")
    finally:
        store.delete_prefix(folder)
    return written


def check_storage(ctx: Context) -> CheckResult:
    settings, source = storage_settings(ctx)
    uri = ctx.storage_uri or settings.base
    if not uri:
        return fail("storage", f"{source} names no storage base (Helm value storage.bucket); pass --storage-uri")
    try:
        location = parse_storage_uri(uri)
    except StorageUriError as exc:
        return fail("storage", f"{uri}: {exc}")
    if location.scheme is Scheme.FILE:
        return skip("storage", f"{uri} is a folder on each pod's node; it cannot be checked from here")
    try:
        credentials, creds_source = credentials_of(ctx, settings)
        written = _round_trip(settings, uri, credentials, ctx.probe_id)
    except Exception as exc:  # the store's own error names the problem (NoSuchBucket, InvalidAccessKeyId, ...)
        return fail("storage", f"{uri} via {settings.endpoint or 'the default endpoint'}: {str(exc)[:300]}")
    where = settings.endpoint or "the default endpoint"
    return ok("storage", f"wrote, read and deleted {written} at {where} with {creds_source} ({source})")


# ---- command line ---------------------------------------------------------------------------------------------------
def check_namespace(ctx: Context) -> CheckResult:
    settings, _ = storage_settings(ctx)
    return check_team(ctx.cluster.call, ctx.namespace, settings.credentials_secret)


CHECKS: dict[str, Callable[[Context], CheckResult]] = {
    "crd": check_crd,
    "operator": check_operator,
    "webhook": check_webhook,
    "team": check_namespace,
    "storage": check_storage,
}


def main(argv: list[str] | None = None) -> int:
    args = check_parser().parse_args(sys.argv[1:] if argv is None else argv)
    cluster = Cluster(args.kubeconfig)  # its errors reach the user as one line (stepscope_cli.failures)
    ctx = Context(
        cluster, args.namespace or cluster.context_namespace, args.install_namespace, args.timeout, args.storage_uri
    )
    try:
        results = [check(ctx) for name, check in CHECKS.items() if name not in args.skip]
    finally:
        cluster.close()
    print(render(results))
    return exit_code(results)

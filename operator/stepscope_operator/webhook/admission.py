"""The sidecar-injection webhook: an HTTPS server answering AdmissionReview v1 with a JSON Patch.

Importing this module registers a kopf startup handler that starts the server when `STEPSCOPE_WEBHOOK_PORT` is set
(certificate and key: `$STEPSCOPE_WEBHOOK_CERT_DIR/tls.crt` and `tls.key`, re-read when they change, so that
cert-manager's renewals need no restart); without that variable it does nothing. `serve()` runs the same server
without kopf (tests).

Two paths, so that the webhook never needs to read Namespaces: the MutatingWebhookConfiguration sends pods labelled
`stepscope.dev/inject: "true"` to `/mutate` and unlabelled pods of namespaces so labelled to `/mutate-namespace`.
The webhook never blocks a pod: anything it cannot understand is allowed unchanged, with a warning.

Port 9443 takes bodies from whatever can reach it, so what a body may cost is bounded: at most MAX_REVIEW_BYTES (an
AdmissionReview of a Pod is tens of kB; larger bodies are refused with 413 before they are buffered), and the review
is decoded in two steps: first its envelope (the request's uid, kind and operation; every other field is skipped
without building objects), then the pod only when the review is a Pod CREATE (decoded by msgspec, bounded in depth).
The chart's NetworkPolicy admits the port only from the API server.

What the answer may cost is bounded too, since any user who may create a pod in an opted-in namespace reaches the
port through the API server: a pod with more than MAX_PATCHED_CONTAINERS containers and init containers together
is admitted unchanged with a warning (counted from the pod's shape before it is decoded), and so is a pod whose
patch would encode to more than MAX_PATCH_BYTES. Decoding, deciding and encoding run off the event loop, in a pool
of REVIEW_WORKERS threads: kopf's handlers never wait behind a review, and at most that many reviews are held
decoded at once (the others wait as the bytes they were sent).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import ssl
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kopf
import msgspec
from aiohttp import web

from stepscope_contract.constants import INJECT_LABEL
from stepscope_operator.webhook.injection import InjectionConfig, decide, mutate

log = logging.getLogger("stepscope.webhook")

ADMISSION_API_VERSION = "admission.k8s.io/v1"
POD_PATH = "/mutate"
NAMESPACE_PATH = "/mutate-namespace"
DEFAULT_CERT_DIR = "/etc/stepscope/webhook-tls"
CERT_RELOAD_SECONDS = 60.0
MAX_REVIEW_BYTES = 1024 * 1024
MAX_PATCHED_CONTAINERS = 64  # containers and init containers of one pod, together
MAX_PATCH_BYTES = 2 * 1024 * 1024  # the JSON Patch, encoded (before base64)
REVIEW_WORKERS = 2  # reviews decoded and answered at once

_CONFIG_KEY: web.AppKey[InjectionConfig] = web.AppKey("config", InjectionConfig)
_POOL_KEY: web.AppKey[ThreadPoolExecutor] = web.AppKey("review_pool", ThreadPoolExecutor)


def _review(
    uid: str, allowed: bool = True, patch: bytes | None = None, warnings: list[str] | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch).decode("ascii")
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def review_response(body: Any, namespace_labels: Mapping[str, str] | None, config: InjectionConfig) -> dict[str, Any]:
    """The AdmissionReview answering `body` (already JSON-decoded). Pure; never raises, never denies."""
    if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
        return _review("", warnings=["stepscope: malformed AdmissionReview (no request); pod admitted unchanged"])
    request: dict[str, Any] = body["request"]
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        return _review("", warnings=["stepscope: AdmissionReview without a uid; pod admitted unchanged"])
    kind = request.get("kind") or {}
    pod = request.get("object")
    if not isinstance(kind, dict) or kind.get("kind") != "Pod" or request.get("operation", "CREATE") != "CREATE":
        return _review(uid)
    refused = request.get("podRefused")
    if isinstance(refused, str):
        return _review(uid, warnings=[f"stepscope: sidecar not injected ({refused}); pod admitted unchanged"])
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return _review(uid, warnings=["stepscope: the review holds no pod spec; pod admitted unchanged"])
    too_many = too_many_containers(pod["spec"])
    if too_many:
        return _review(uid, warnings=[f"stepscope: sidecar not injected ({too_many}); pod admitted unchanged"])
    try:
        decision = decide(pod, namespace_labels)
        ops = mutate(pod, config, namespace_labels) if decision.inject else []
        patch = json.dumps(ops, separators=(",", ":")).encode() if ops else b""
        del ops
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        log.warning("cannot inject into the pod of review %s: %r", uid, exc)
        return _review(
            uid, warnings=[f"stepscope: sidecar not injected ({type(exc).__name__}); pod admitted unchanged"]
        )
    if len(patch) > MAX_PATCH_BYTES:
        log.warning("review %s: a patch of %d bytes is over %d; not injected", uid, len(patch), MAX_PATCH_BYTES)
        return _review(
            uid,
            warnings=[
                f"stepscope: sidecar not injected (the patch would be over {MAX_PATCH_BYTES} bytes); "
                "pod admitted unchanged"
            ],
        )
    log.info(
        "review %s, pod %s/%s: %s (%s)",
        uid,
        request.get("namespace", ""),
        (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get("generateName", ""),
        "inject" if patch else "skip",
        decision.reason,
    )
    return _review(uid, patch=patch)


def too_many_containers(spec: Mapping[str, Any]) -> str:
    """Why the pod has too many containers to patch ("" when it has not)."""
    count = sum(len(v) for v in (spec.get("containers"), spec.get("initContainers")) if isinstance(v, list))
    if count > MAX_PATCHED_CONTAINERS:
        return f"{count} containers and init containers, over {MAX_PATCHED_CONTAINERS}"
    return ""


class _Kind(msgspec.Struct):
    kind: str = ""


class _Request(msgspec.Struct):
    """The fields the webhook decides on, typed as scalars (a deep structure in one of them is refused while it is
    read); the pod stays raw bytes until it is needed; every other field is skipped."""

    uid: str = ""
    kind: _Kind | None = None
    operation: str = "CREATE"
    namespace: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


class _Envelope(msgspec.Struct):
    request: _Request | None = None


_ENVELOPE = msgspec.json.Decoder(_Envelope)


class _Counted(msgspec.Struct, gc=False):
    """A list element, skipped unbuilt (the shape decode only counts them). Untracked by the garbage collector: tens
    of thousands of them would otherwise start collections of the whole operator heap, on whichever thread (the
    event loop's included) allocates next."""


class _SpecShape(msgspec.Struct):
    containers: list[_Counted] | None = None
    initContainers: list[_Counted] | None = None  # the pod's field


class _PodShape(msgspec.Struct):
    spec: _SpecShape | None = None


_POD_SHAPE = msgspec.json.Decoder(_PodShape)


def _container_count(raw: msgspec.Raw) -> int | None:
    """How many containers and init containers the pod holds, without decoding them; None when the pod does not
    have the expected shape (the full decode then says what it can)."""
    try:
        shape = _POD_SHAPE.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    if shape.spec is None:
        return None
    return len(shape.spec.containers or ()) + len(shape.spec.initContainers or ())


def decode_review(raw: bytes) -> dict[str, Any] | str:
    """The review as `review_response` reads it, built shallow (the pod decoded only for a Pod CREATE), or why the
    body is not an AdmissionReview."""
    try:
        envelope = _ENVELOPE.decode(raw)
    except msgspec.ValidationError as exc:
        return f"not an AdmissionReview ({str(exc)[:200]})"
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return "the AdmissionReview is not JSON (or nested too deep)"
    req = envelope.request
    if req is None:
        return {}
    kind = req.kind.kind if req.kind is not None else ""
    pod: Any = None
    request: dict[str, Any] = {"uid": req.uid, "kind": {"kind": kind}, "operation": req.operation}
    request["namespace"] = req.namespace
    if kind == "Pod" and req.operation == "CREATE":
        count = _container_count(req.object)
        if count is not None and count > MAX_PATCHED_CONTAINERS:
            request["podRefused"] = f"{count} containers and init containers, over {MAX_PATCHED_CONTAINERS}"
            return {"request": {**request, "object": None}}
        try:
            pod = msgspec.json.decode(req.object)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):  # nested too deep, or not UTF-8
            pod = None
    return {"request": {**request, "object": pod}}


def answer(raw: bytes, namespace_labels: Mapping[str, str] | None, config: InjectionConfig) -> bytes:
    """The encoded AdmissionReview answering the body `raw`. Pure; never raises for any body."""
    body = decode_review(raw)
    if isinstance(body, str):
        return json.dumps(_review("", warnings=[f"stepscope: {body}; pod admitted unchanged"])).encode()
    return json.dumps(review_response(body, namespace_labels, config), separators=(",", ":")).encode()


async def _handle(request: web.Request, namespace_labels: Mapping[str, str] | None) -> web.Response:
    config = request.app[_CONFIG_KEY]
    if request.content_length is not None and request.content_length > MAX_REVIEW_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_REVIEW_BYTES, actual_size=request.content_length)
    raw = await request.read()  # read() refuses more than client_max_size as it reads
    # Off the loop, in a pool of REVIEW_WORKERS threads: a review never delays kopf's handlers, and at most
    # REVIEW_WORKERS reviews are held decoded at once.
    loop = asyncio.get_running_loop()
    encoded = await loop.run_in_executor(request.app[_POOL_KEY], answer, raw, namespace_labels, config)
    return web.Response(body=encoded, content_type="application/json")


async def _pod_labelled(request: web.Request) -> web.Response:
    return await _handle(request, None)


async def _namespace_labelled(request: web.Request) -> web.Response:
    return await _handle(request, {INJECT_LABEL: "true"})


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _stop_pool(app: web.Application) -> None:
    app[_POOL_KEY].shutdown(wait=False, cancel_futures=True)


def build_app(config: InjectionConfig) -> web.Application:
    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app[_CONFIG_KEY] = config
    app[_POOL_KEY] = ThreadPoolExecutor(max_workers=REVIEW_WORKERS, thread_name_prefix="stepscope-review")
    app.on_cleanup.append(_stop_pool)
    app.router.add_post(POD_PATH, _pod_labelled)
    app.router.add_post(NAMESPACE_PATH, _namespace_labelled)
    app.router.add_get("/healthz", _healthz)
    return app


async def serve(host: str, port: int, ssl_context: ssl.SSLContext | None, config: InjectionConfig) -> web.AppRunner:
    """Start the webhook on host:port (port 0: a free one; read it with `bound_port`). Stop: `runner.cleanup()`."""
    runner = web.AppRunner(build_app(config), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        return int(address[1])
    raise RuntimeError("the webhook is not listening")


def ssl_context_from_dir(cert_dir: str | os.PathLike[str]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    folder = Path(cert_dir)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    return context


def _cert_stamp(cert_dir: Path) -> tuple[float, float]:
    return ((cert_dir / "tls.crt").stat().st_mtime, (cert_dir / "tls.key").stat().st_mtime)


def cert_stamp(cert_dir: Path) -> tuple[float, float]:
    """Modification times of tls.crt and tls.key: take it before loading them, for `reload_certificates`."""
    return _cert_stamp(cert_dir)


async def reload_certificates(
    context: ssl.SSLContext,
    cert_dir: Path,
    interval: float = CERT_RELOAD_SECONDS,
    loaded: tuple[float, float] | None = None,
) -> None:
    """Load renewed certificates into the live context (new handshakes use them); runs until cancelled.
    `loaded`: the `cert_stamp` taken before the context was loaded (a renewal in between is not missed)."""
    stamp = loaded if loaded is not None else _cert_stamp(cert_dir)
    while True:
        await asyncio.sleep(interval)
        try:
            current = _cert_stamp(cert_dir)
            if current != stamp:
                context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
                stamp = current
                log.info("webhook certificate reloaded from %s", cert_dir)
        except (OSError, ssl.SSLError) as exc:
            log.warning("webhook certificate not reloaded: %s", exc)


@kopf.on.startup(id="webhook-server")
async def start_webhook(memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    port = os.environ.get("STEPSCOPE_WEBHOOK_PORT")
    if not port:
        return
    cert_dir = Path(os.environ.get("STEPSCOPE_WEBHOOK_CERT_DIR") or DEFAULT_CERT_DIR)
    loaded = cert_stamp(cert_dir)
    context = ssl_context_from_dir(cert_dir)
    host = os.environ.get("STEPSCOPE_WEBHOOK_HOST") or "0.0.0.0"
    runner = await serve(host, int(port), context, InjectionConfig.from_env())
    memo.webhook_runner = runner
    memo.webhook_reloader = asyncio.create_task(reload_certificates(context, cert_dir, loaded=loaded))
    logger.info("sidecar-injection webhook listening on %s:%s (paths %s, %s)", host, port, POD_PATH, NAMESPACE_PATH)


@kopf.on.cleanup(id="webhook-server-stop")
async def stop_webhook(memo: kopf.Memo, **_: Any) -> None:
    reloader: asyncio.Task[None] | None = memo.get("webhook_reloader")
    if reloader is not None:
        reloader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reloader
    runner: web.AppRunner | None = memo.get("webhook_runner")
    if runner is not None:
        await runner.cleanup()

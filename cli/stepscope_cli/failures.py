"""What a command's failure means to its user: one line naming the cause and the fix, instead of a traceback.

`explain(exc)` walks the exception and its causes (`raise ... from`, and the exception being handled when it was
raised) and returns the first match of RULES, one small record per kind of failure a user can fix: an API server or a
storage endpoint that cannot be reached, credentials refused, something that does not exist, a missing kubeconfig or
file. Anything else is an unexpected failure: its type and message, and `--debug` for the traceback. Exceptions are
matched by their class names, so this module imports none of the clients (kubernetes, urllib3, botocore, aiohttp)
whose errors it names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from stepscope_storage.failure_fix import ENDPOINT_FIX, storage_failure
from stepscope_storage.failure_fix import chain as _chain
from stepscope_storage.failure_fix import class_names as _names

DEBUG_HINT = "run it again with --debug for the traceback"
KUBE_FIX = (
    "check KUBECONFIG ({kubeconfig}) and its current context (kubectl cluster-info); for the local cluster run "
    'eval "$(stepscope local-cluster --background)"'
)


@dataclass(frozen=True)
class Failure:
    cause: str
    fix: str

    def line(self, command: str) -> str:
        return f"stepscope {command}: {self.cause}; {self.fix}"


def _kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or "unset: ~/.kube/config, else the pod's service account"


def _api_message(exc: BaseException) -> str:
    """The `message` of a Kubernetes Status body, else the HTTP reason."""
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return str(message or getattr(exc, "reason", "") or "").strip()


def _short_reason(exc: BaseException) -> str:
    text = str(exc)
    for pattern, words in (
        (r"Connection refused|ECONNREFUSED|Errno 111|Connect call failed", "connection refused"),
        (r"Name or service not known|nodename nor servname|getaddrinfo|Temporary failure in name resolution",
         "the host name does not resolve"),
        (r"timed out|Timeout", "timed out"),
        (r"CERTIFICATE_VERIFY_FAILED|SSLError|certificate", "its TLS certificate is not trusted"),
        (r"Network is unreachable|No route to host", "no route to the host"),
    ):  # fmt: skip
        if re.search(pattern, text):
            return words
    return "no connection"


def _url_of(exc: BaseException) -> tuple[str, str]:
    """(base URL, path) of the request a connection error was about, as far as the exception says."""
    pool = getattr(exc, "pool", None)
    host, port = getattr(pool, "host", None), getattr(pool, "port", None)
    scheme = getattr(pool, "scheme", "http")
    path = str(getattr(exc, "url", "") or "")
    if host:
        return f"{scheme}://{host}{f':{port}' if port else ''}", path
    if isinstance(getattr(exc, "host", None), str) and getattr(exc, "port", None):  # aiohttp's connector errors
        return f"http://{exc.host}:{exc.port}", ""  # type: ignore[attr-defined]
    endpoint = str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")
    if endpoint:
        return endpoint, ""
    match = re.search(r"(https?://[^\s'\"/]+)(/[^\s'\"]*)?", str(exc))
    if match:
        return match.group(1), match.group(2) or ""
    match = re.search(r"host='([^']+)', port=(\d+)", str(exc))
    return (f"http://{match.group(1)}:{match.group(2)}", "") if match else ("", "")


def _is_kube_path(path: str) -> bool:
    return path.startswith(("/api/", "/apis/", "/api?", "/apis?", "/version")) or path in ("/api", "/apis")


def _connection(exc: BaseException) -> Failure | None:
    names = _names(exc)
    if not names & {
        "MaxRetryError",
        "NewConnectionError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ConnectionError",
        "ConnectionRefusedError",
        "gaierror",
    }:
        return None
    base, path = _url_of(exc)
    reason = _short_reason(exc)
    if type(exc).__module__.startswith("botocore"):  # EndpointConnectionError, ConnectTimeoutError
        return Failure(f"cannot reach the storage endpoint {base or '(unknown)'} ({reason})", ENDPOINT_FIX)
    if _is_kube_path(path) or base == _kube_server():
        return Failure(
            f"cannot reach the Kubernetes API server at {base} ({reason})", KUBE_FIX.format(kubeconfig=_kubeconfig())
        )
    where = f" {base}" if base else ""
    return Failure(f"cannot reach{where} ({reason})", "check the address and that the server runs")


def _kube_server() -> str:
    """The server of the kubeconfig's current context, when one is readable (the URL an error names may omit the
    path that would say it is the API server)."""
    path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser("~/.kube/config")
    try:
        import yaml

        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        current = config.get("current-context")
        context = next(c["context"] for c in config.get("contexts", []) if c.get("name") == current)
        cluster = next(c["cluster"] for c in config.get("clusters", []) if c.get("name") == context.get("cluster"))
        return str(cluster.get("server", "")).rstrip("/")
    except Exception:  # no kubeconfig, or one this reading does not follow: no server to compare with
        return ""


def _kube_status(exc: BaseException) -> Failure | None:
    if "ApiException" not in _names(exc):
        return None
    status = int(getattr(exc, "status", 0) or 0)
    message = _api_message(exc)
    if status == 401:
        return Failure(
            f"the Kubernetes API server rejected the credentials (401 {message or 'Unauthorized'})",
            f"renew the credentials of KUBECONFIG ({_kubeconfig()}), e.g. with your cloud's get-credentials command",
        )
    if status == 403:
        return Failure(
            f"the Kubernetes API server forbids it (403): {message}",
            "grant that permission to your user (docs/interfaces.md lists what each command needs; "
            "kubectl auth can-i <verb> <resource> -n <namespace>)",
        )
    if status == 404:
        return Failure(
            f"not found (404): {message}",
            "check the name and the namespace (-n); is stepscope installed there (kubectl get crd "
            "profilesessions.stepscope.dev)?",
        )
    if status == 0:
        return Failure(
            f"cannot reach the Kubernetes API server ({message or 'no connection'})",
            KUBE_FIX.format(kubeconfig=_kubeconfig()),
        )
    return None


def _kube_config(exc: BaseException) -> Failure | None:
    if "ConfigException" not in _names(exc):
        return None
    return Failure(
        f"no usable kubeconfig (KUBECONFIG {_kubeconfig()}: {str(exc).strip() or 'none found'})",
        'set KUBECONFIG or pass --kubeconfig; for the local cluster run eval "$(stepscope local-cluster --background)"',
    )


def _storage(exc: BaseException) -> Failure | None:
    """Credentials and missing buckets or keys (an unreachable endpoint is _connection's, which names its URL)."""
    answered = {"ClientError", "NoCredentialsError", "PartialCredentialsError"}
    found = storage_failure(exc) if _names(exc) & answered else None
    return Failure(*found) if found is not None else None


def _files(exc: BaseException) -> Failure | None:
    if isinstance(exc, FileNotFoundError):
        return Failure(f"no such file or folder: {exc.filename}", "check the path")
    if isinstance(exc, PermissionError):
        return Failure(f"permission denied: {exc.filename}", "check the file's owner and mode")
    return None


# The order matters: a Kubernetes Status before the connection error beneath it, storage before generic errors.
RULES: tuple[Callable[[BaseException], Failure | None], ...] = (
    _kube_status,
    _kube_config,
    _storage,
    _connection,
    _files,
)


def explain(exc: BaseException) -> Failure:
    """The first rule that recognises the exception or one of its causes; else an unexpected failure."""
    chain = list(_chain(exc))
    for rule in RULES:
        for link in chain:
            failure = rule(link)
            if failure is not None:
                return failure
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Failure(f"unexpected {type(exc).__name__}{f': {text}' if text else ''}", DEBUG_HINT)

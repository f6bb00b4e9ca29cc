"""Pure translation of a container spec into a local process: argv, environment, working directory.

Fidelity gaps (documented): images are ignored and commands run from this machine's venv (`python`/`python3` ->
the venv's interpreter, `stepscope` -> the venv's console script); volumes are host directories, so every command
element, argument and env value that starts with a mountPath (also after `--flag=`) is rewritten to the host path.
"""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
_VAR_RE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\$")
_FIELD_RE = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")

SecretReader = Callable[[str, str], Mapping[str, str] | None]  # (namespace, name) -> decoded data


class ContainerConfigError(Exception):
    """The container cannot start (like CreateContainerConfigError): a missing Secret key, for instance."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: known variables are replaced, unknown ones kept, `$$` escapes `$`."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR_RE.sub(sub, text)


def field_value(pod: Mapping[str, Any], path: str) -> str:
    meta = pod.get("metadata") or {}
    m = _FIELD_RE.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName"),
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
        "status.podIP": (pod.get("status") or {}).get("podIP"),
        "status.hostIP": (pod.get("status") or {}).get("hostIP"),
    }
    if path not in simple:
        raise ContainerConfigError(f"unsupported fieldRef {path!r}")
    return str(simple[path] or "")


def rewrite_path(value: str, mounts: Mapping[str, Path]) -> str:
    """Replace a leading mountPath (or one after `--flag=`) with its host directory."""
    prefix, sep, rest = value.partition("=") if value.startswith("-") else ("", "", value)
    for mount in sorted(mounts, key=len, reverse=True):
        if rest == mount or rest.startswith(mount.rstrip("/") + "/"):
            return prefix + sep + str(mounts[mount]) + rest[len(mount.rstrip("/")) :]
    return value


def container_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    read_secret: SecretReader,
    read_configmap: SecretReader,
    base: Mapping[str, str],
) -> dict[str, str]:
    """The container's environment (envFrom, then env in order with `$(VAR)` over what came before)."""
    ns = str((pod.get("metadata") or {}).get("namespace", "default"))
    env: dict[str, str] = dict(base)
    declared: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source.get("secretRef") or source.get("configMapRef")
        reader = read_secret if "secretRef" in source else read_configmap
        data = reader(ns, ref["name"]) if ref else None
        if data is None:
            if ref and not ref.get("optional"):
                raise ContainerConfigError(f"envFrom {ref['name']!r} not found")
            continue
        for key, value in data.items():
            declared[source.get("prefix", "") + key] = value
    for item in container.get("env") or []:
        name = item["name"]
        if "value" in item:
            declared[name] = expand(str(item["value"]), declared)
        elif "valueFrom" in item:
            declared[name] = _value_from(item["valueFrom"], pod, ns, read_secret, read_configmap, name)
        else:
            declared[name] = ""
    env.update(declared)
    return env


def _value_from(  # noqa: PLR0917
    source: Mapping[str, Any],
    pod: Mapping[str, Any],
    ns: str,
    read_secret: SecretReader,
    read_configmap: SecretReader,
    name: str,
) -> str:
    if "fieldRef" in source:
        return field_value(pod, source["fieldRef"]["fieldPath"])
    for key, reader in (("secretKeyRef", read_secret), ("configMapKeyRef", read_configmap)):
        if key in source:
            ref = source[key]
            data = reader(ns, ref["name"])
            if data is None or ref["key"] not in data:
                if ref.get("optional"):
                    return ""
                raise ContainerConfigError(f"{key} {ref['name']}/{ref['key']} for env {name} not found")
            return data[ref["key"]]
    if "resourceFieldRef" in source:
        return "0"
    raise ContainerConfigError(f"unsupported valueFrom for env {name}")


def decode_secret(secret: Mapping[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
    return data


def map_executable(arg0: str) -> str:
    """Commands resolve to this machine's venv: the images' Python and `stepscope` are the venv's."""
    if arg0 in ("python", "python3") or re.fullmatch(r"(/usr(/local)?/bin/)?python3?(\.\d+)?", arg0):
        return sys.executable
    name = Path(arg0).name
    if name == "stepscope" or (arg0.startswith("/") and (VENV_BIN / name).exists() and name.startswith("stepscope")):
        return str(VENV_BIN / "stepscope")
    return arg0


def container_argv(container: Mapping[str, Any], env: Mapping[str, str], mounts: Mapping[str, Path]) -> list[str]:
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    argv = [rewrite_path(expand(part, env), mounts) for part in command + args]
    if not argv:
        raise ContainerConfigError(f"container {container.get('name')!r} has no command (images are not run)")
    argv[0] = map_executable(argv[0])
    return argv

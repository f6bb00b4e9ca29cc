"""Kubernetes protobuf request bodies decoded into the JSON objects the store holds.

kubectl's imperative commands (`kubectl create secret|configmap|namespace|serviceaccount`) send their object as
`application/vnd.kubernetes.protobuf`: the magic `k8s\\x00`, then a `runtime.Unknown` message (its `typeMeta` with
apiVersion and kind, its `raw` bytes the object's own message). The kinds users create that way are described here,
one table of field numbers per message (from k8s.io/api's generated.proto), and decoded by a small reader of the
protobuf wire format; fields outside the table are skipped, as a JSON decoder skips unknown keys. A body of any other
kind gets 415, so its command fails with a message instead of storing half an object.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stepscope_local.kube.errors import ApiError, bad_request

MAGIC = b"k8s\x00"
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Field:
    """One field of a message: its JSON name, its type (`string`, `bytes`, `int`, `bool`, `time`, a message name,
    or `map:string`/`map:bytes` for map<string, ...>) and whether it repeats."""

    name: str
    type: str
    repeated: bool = False


MESSAGES: dict[str, dict[int, Field]] = {
    "Unknown": {1: Field("typeMeta", "TypeMeta"), 2: Field("raw", "raw")},
    "TypeMeta": {1: Field("apiVersion", "string"), 2: Field("kind", "string")},
    "ObjectMeta": {
        1: Field("name", "string"),
        2: Field("generateName", "string"),
        3: Field("namespace", "string"),
        5: Field("uid", "string"),
        6: Field("resourceVersion", "string"),
        7: Field("generation", "int"),
        8: Field("creationTimestamp", "time"),
        11: Field("labels", "map:string"),
        12: Field("annotations", "map:string"),
        13: Field("ownerReferences", "OwnerReference", repeated=True),
        14: Field("finalizers", "string", repeated=True),
    },
    "OwnerReference": {
        1: Field("kind", "string"),
        3: Field("name", "string"),
        4: Field("uid", "string"),
        5: Field("apiVersion", "string"),
        6: Field("controller", "bool"),
        7: Field("blockOwnerDeletion", "bool"),
    },
    "Time": {1: Field("seconds", "int"), 2: Field("nanos", "int")},
    "Secret": {
        1: Field("metadata", "ObjectMeta"),
        2: Field("data", "map:bytes"),
        3: Field("type", "string"),
        4: Field("stringData", "map:string"),
        5: Field("immutable", "bool"),
    },
    "ConfigMap": {
        1: Field("metadata", "ObjectMeta"),
        2: Field("data", "map:string"),
        3: Field("binaryData", "map:bytes"),
        4: Field("immutable", "bool"),
    },
    "Namespace": {
        1: Field("metadata", "ObjectMeta"),
        2: Field("spec", "NamespaceSpec"),
        3: Field("status", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: Field("finalizers", "string", repeated=True)},
    "NamespaceStatus": {1: Field("phase", "string")},
    "ServiceAccount": {
        1: Field("metadata", "ObjectMeta"),
        2: Field("secrets", "ObjectReference", repeated=True),
        3: Field("imagePullSecrets", "LocalObjectReference", repeated=True),
        4: Field("automountServiceAccountToken", "bool"),
    },
    "ObjectReference": {
        1: Field("kind", "string"),
        2: Field("namespace", "string"),
        3: Field("name", "string"),
        4: Field("uid", "string"),
        5: Field("apiVersion", "string"),
        6: Field("resourceVersion", "string"),
        7: Field("fieldPath", "string"),
    },
    "LocalObjectReference": {1: Field("name", "string")},
}
KINDS = {("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Namespace"), ("v1", "ServiceAccount")}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise bad_request("the protobuf body ends inside a varint")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of every field of one message: ints for varints and fixed, bytes for
    length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        elif wire == LENGTH:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise bad_request(f"the protobuf body has a field of wire type {wire}, which Kubernetes never sends")
        if pos > len(buf):
            raise bad_request("the protobuf body ends inside a field")
        yield number, wire, value


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise bad_request("the protobuf body has a number where a string belongs")
    return value.decode("utf-8", errors="replace")


def _map_entry(value: int | bytes, kind: str) -> tuple[str, str]:
    if not isinstance(value, bytes):
        raise bad_request("the protobuf body has a number where a map entry belongs")
    entry = {number: raw for number, _, raw in _fields(value)}
    key, raw = entry.get(1, b""), entry.get(2, b"")
    text = base64.b64encode(raw).decode() if kind == "bytes" and isinstance(raw, bytes) else _text(raw)
    return _text(key), text


def _time(value: int | bytes) -> str | None:
    """RFC 3339 in seconds, as metav1.Time marshals; None for Go's zero time (and anything before 1970)."""
    parts = decode_message("Time", value if isinstance(value, bytes) else b"")
    seconds = int(parts.get("seconds", 0))
    if seconds <= 0:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scalar(field: Field, value: int | bytes) -> Any:
    if field.type == "string":
        return _text(value)
    if field.type == "int":
        number = value if isinstance(value, int) else 0
        return number - (1 << 64) if number >= 1 << 63 else number
    if field.type == "bool":
        return bool(value)
    if field.type == "time":
        return _time(value)
    if field.type == "raw":
        return value
    return decode_message(field.type, value if isinstance(value, bytes) else b"")


def decode_message(message: str, buf: bytes) -> dict[str, Any]:
    """One message of MESSAGES as a JSON object (fields not in its table are skipped).

    Go writes every scalar of a proto2 message, empty ones too; their zero values (an empty string, 0, false, the
    zero time) are left out, as Go's JSON encoder leaves out empty fields marked omitempty."""
    table = MESSAGES[message]
    out: dict[str, Any] = {}
    for number, _, value in _fields(buf):
        field = table.get(number)
        if field is None:
            continue
        if field.type.startswith("map:"):
            key, text = _map_entry(value, field.type.removeprefix("map:"))
            out.setdefault(field.name, {})[key] = text
        elif field.repeated:
            out.setdefault(field.name, []).append(_scalar(field, value))
        elif (scalar := _scalar(field, value)) not in ("", 0, False, None):
            out[field.name] = scalar
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body (`k8s\\x00` + runtime.Unknown) as the object's JSON form, with apiVersion and kind.

    400 for a body that is not Kubernetes' protobuf envelope; 415 for a kind outside KINDS."""
    if not body.startswith(MAGIC):
        raise bad_request("the protobuf body does not start with Kubernetes' magic bytes k8s\\x00")
    unknown = decode_message("Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if (api_version, kind) not in KINDS:
        accepted = ", ".join(sorted(k for _, k in KINDS))
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the local emulator decodes protobuf bodies of {accepted} only, not {api_version} {kind or '(no kind)'}; "
            "send JSON (kubectl apply -f)",
        )
    raw = unknown.get("raw", b"")
    return {"apiVersion": api_version, "kind": kind, **decode_message(kind, raw if isinstance(raw, bytes) else b"")}

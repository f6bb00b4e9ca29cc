"""Storage locations and the key layout, with name sanitising. Pure: no client, no I/O.

Layout (design.md):
    <prefix>/<namespace>/<session>-<uid8>/ranks/<rank>/{trace.pt.trace.json.gz, gpu_metrics.jsonl.gz,
                                                         stacks.txt, manifest.json}
    <prefix>/<namespace>/<session>-<uid8>/report/{report.html, report.json}
    <prefix>/<namespace>/<session>-<uid8>/summaries/rank-<rank>.json   (analyzer map step output)
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final
from urllib.parse import quote

TRACE_FILE: Final = "trace.pt.trace.json.gz"
GPU_METRICS_FILE: Final = "gpu_metrics.jsonl.gz"
STACKS_FILE: Final = "stacks.txt"
MANIFEST_FILE: Final = "manifest.json"
REPORT_HTML: Final = "report.html"
REPORT_JSON: Final = "report.json"
RANK_FILES: Final = (TRACE_FILE, GPU_METRICS_FILE, STACKS_FILE, MANIFEST_FILE)

MAX_SEGMENT = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Scheme(StrEnum):
    S3 = "s3"
    OSS = "oss"
    FILE = "file"


class StorageUriError(ValueError):
    """A storage URI stepscope cannot use; the message says why."""


@dataclass(frozen=True)
class StorageLocation:
    """A parsed storage URI. For file:// the bucket is empty and prefix is an absolute path."""

    scheme: Scheme
    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        if self.scheme is Scheme.FILE:
            return f"file://{self.prefix}"
        return (
            f"{self.scheme.value}://{self.bucket}/{self.prefix}"
            if self.prefix
            else (f"{self.scheme.value}://{self.bucket}")
        )

    def child(self, *segments: str) -> StorageLocation:
        """A location below this one; each segment is sanitised, so none can climb out."""
        parts = [sanitize_segment(s) for s in segments]
        joined = "/".join(p for p in [self.prefix.rstrip("/"), *parts] if p)
        if self.scheme is Scheme.FILE and not joined.startswith("/"):
            joined = "/" + joined
        return StorageLocation(self.scheme, self.bucket, joined)

    def key(self, filename: str) -> str:
        """Object key (or path, for file://) of a file directly under this location."""
        name = sanitize_segment(filename)
        return f"{self.prefix.rstrip('/')}/{name}" if self.prefix.strip("/") else name


def parse_storage_uri(uri: str) -> StorageLocation:
    """Parse s3://bucket/prefix, oss://bucket/prefix or file:///abs/path; reject '..' and empty buckets."""
    scheme_text, sep, rest = uri.partition("://")
    if not sep:
        raise StorageUriError(f"'{uri}' has no scheme; use s3://, oss:// or file://")
    try:
        scheme = Scheme(scheme_text.lower())
    except ValueError:
        raise StorageUriError(f"scheme '{scheme_text}' is not supported; use s3://, oss:// or file://") from None
    if scheme is Scheme.FILE:
        if not rest.startswith("/"):
            raise StorageUriError(f"'{uri}' must be an absolute path: file:///path")
        path = "/" + "/".join(p for p in rest.split("/") if p)
        if any(p == ".." for p in rest.split("/")):
            raise StorageUriError(f"'{uri}' must not contain '..'")
        return StorageLocation(scheme, "", path)
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise StorageUriError(f"'{uri}' has no bucket")
    segments = [p for p in prefix.split("/") if p]
    if any(p in (".", "..") for p in segments):
        raise StorageUriError(f"'{uri}' must not contain '.' or '..' path segments")
    return StorageLocation(scheme, bucket, "/".join(segments))


def sanitize_segment(name: str) -> str:
    """Make one key segment from untrusted text (pod, namespace, session names).

    Only [A-Za-z0-9._-] survive, '.'/'..' and leading dots are neutralised, and long names are cut
    with a hash of the original so that distinct inputs stay distinct.
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    if cleaned == name and 0 < len(name) <= MAX_SEGMENT:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: MAX_SEGMENT - 9]}-{digest}" if cleaned else f"_{digest}"


def session_dir_name(name: str, uid: str) -> str:
    """'<session>-<uid8>': the same session name reused later gets a new folder."""
    uid8 = re.sub(r"[^a-z0-9]", "", uid.lower())[:8] or "nouid"
    return f"{sanitize_segment(name)}-{uid8}"


def session_location(base: StorageLocation, namespace: str, name: str, uid: str) -> StorageLocation:
    return base.child(namespace, session_dir_name(name, uid))


def rank_location(session: StorageLocation, rank: int) -> StorageLocation:
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    return session.child("ranks", str(rank))


def report_location(session: StorageLocation) -> StorageLocation:
    return session.child("report")


def summary_key(session: StorageLocation, rank: int) -> str:
    return session.child("summaries").key(f"rank-{rank}.json")


def rank_from_key(session: StorageLocation, key: str) -> int | None:
    """The rank of an object key under <session>/ranks/<rank>/..., or None."""
    prefix = session.child("ranks").prefix.rstrip("/") + "/"
    if not key.startswith(prefix):
        return None
    head = key[len(prefix) :].split("/", 1)[0]
    return int(head) if head.isdigit() else None


def relative_link(from_dir: StorageLocation, target_uri: str) -> str | None:
    """`target_uri` as a relative URL from the folder `from_dir` (a report's folder), or None when the two are not
    in the same bucket (or file system). Links built from the layout functions above, e.g. a rank's trace seen from
    report_location(session), keep working when the session folder is downloaded, whatever the layout."""
    try:
        target = parse_storage_uri(target_uri)
    except StorageUriError:
        return None
    if (target.scheme, target.bucket) != (from_dir.scheme, from_dir.bucket):
        return None
    rel = posixpath.relpath("/" + target.prefix.strip("/"), "/" + from_dir.prefix.strip("/"))
    if rel == ".":
        return None
    link = quote(rel, safe="/")
    return link if link.startswith("../") else "./" + link

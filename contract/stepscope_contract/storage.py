"""Storage locations and the key layout, with name sanitising. Pure: no client, no I/O.

The single source of the layout; everything that writes or reads a session's folder computes keys here.

Layout of a session folder `<prefix>/<namespace>/<session>-<uid8>/` (docs/storage.md):
    traces/rank<R>.pt.trace.json.gz             every rank's Kineto trace, flat in one folder
    traces/rank<R>/{manifest.json, stacks.txt, flight_recorder.json.gz, gpu_metrics.jsonl.gz, summary.json,
                    python_stacks.folded}
                                                 the rank's other files, in a folder named after it beside its trace
                                                 (summary.json: the rank summarised by its sidecar)
    session.json                                 the session as the operator accepted it (analyzer Job input)
    report/{report.html, report.json, outcome.json, python_stacks.speedscope.json}
    report/merged/merged.pt.trace.json.gz        the merged trace of the named ranks and a few peers
    summaries/rank-<R>.json                      (analyzer map step output)

Why this shape: HTA 0.5's `TraceAnalysis(trace_dir=...)` takes every `*.json` and `*.gz` file directly inside the
folder as a trace (a file without `"rank": N` in it becomes rank 0), and TensorBoard's profiler plugin shows the
`*.pt.trace.json[.gz]` files of one folder as the workers of one run. So `traces/` holds only traces, named
`rank<R>.pt.trace.json.gz` (rank as the worker name), and manifests, stacks, Flight Recorder dumps and GPU metrics
lie beside them one level down, where neither tool looks: `TraceAnalysis(trace_dir="<session>/traces")` and
`tensorboard --logdir <session>` open a downloaded session unchanged.

Migration: sessions written before this layout keep `ranks/<R>/{trace.pt.trace.json.gz, manifest.json, stacks.txt,
flight_recorder.json.gz, gpu_metrics.jsonl.gz}`. Readers go through `rank_artifact`, which understands both, so old
sessions are still analysed and fetched (`stepscope fetch --layout hta` renames their traces to
`rank<R>.pt.trace.json.gz`); nothing is rewritten in storage. Writers use only `rank_artifact_key`.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final
from urllib.parse import quote

TRACE_SUFFIX: Final = ".pt.trace.json.gz"
TRACE_FILE: Final = "trace" + TRACE_SUFFIX  # a rank's trace as the hook writes it (and as manifests name it)
GPU_METRICS_FILE: Final = "gpu_metrics.jsonl.gz"
STACKS_FILE: Final = "stacks.txt"
# PyTorch's Flight Recorder dump of a rank (its recent collectives with their call stacks), written by the hook when
# it declares a hang, when the training process exits during a capture, or on demand; JSON, gzip-compressed.
FLIGHT_RECORDER_FILE: Final = "flight_recorder.json.gz"
# the training thread's Python stacks sampled while the steps were recorded (python_stacks.py: format and caps)
PYTHON_STACKS_FILE: Final = "python_stacks.folded"
MANIFEST_FILE: Final = "manifest.json"
RANK_SUMMARY_FILE: Final = "summary.json"  # the rank's summary, made beside its trace (analysis_documents.NodeSummary)
SESSION_FILE: Final = "session.json"  # analysis_documents.SessionDocument, at the session folder's top
OUTCOME_FILE: Final = "outcome.json"  # analysis_documents.AnalysisOutcome, beside the report
REPORT_HTML: Final = "report.html"
REPORT_JSON: Final = "report.json"
RANK_FILES: Final = (
    TRACE_FILE,
    GPU_METRICS_FILE,
    STACKS_FILE,
    FLIGHT_RECORDER_FILE,
    MANIFEST_FILE,
    RANK_SUMMARY_FILE,
    PYTHON_STACKS_FILE,
)
# the analyzer's files beside the report: one Chrome/Perfetto trace of the named ranks and a few peers, clocks aligned
# on collective ends (pid = rank; merged_trace.py), alone in report/merged/ so that HTA's TraceAnalysis(trace_dir=...)
# and TensorBoard open that folder unchanged; and the named rank's Python stacks in speedscope's file format
MERGED_TRACE_DIR: Final = "merged"
MERGED_TRACE_FILE: Final = "merged" + TRACE_SUFFIX
SPEEDSCOPE_FILE: Final = "python_stacks.speedscope.json"
RANKS_TABLE: Final = "ranks.csv.gz"
"""every rank's compact numbers, one CSV row per rank (gzip), beside report.json"""
TRACE_SUFFIXES: Final = (TRACE_SUFFIX.removesuffix(".gz"), TRACE_SUFFIX)  # a Kineto trace file, plain or gzipped


class RankFile(StrEnum):
    """The kinds of file a rank leaves in its session folder, named once: the hook and the sidecar write them, the
    operator and the analyzer recognise them by these names (`rank_file_of`)."""

    TRACE = TRACE_FILE
    GPU_METRICS = GPU_METRICS_FILE
    STACKS = STACKS_FILE
    FLIGHT_RECORDER = FLIGHT_RECORDER_FILE
    MANIFEST = MANIFEST_FILE
    SUMMARY = RANK_SUMMARY_FILE
    PYTHON_STACKS = PYTHON_STACKS_FILE


def rank_file_of(name_or_key: str) -> RankFile | None:
    """The kind of a rank's file from its name, key or URI (a trace by its suffix: `rank<R>.pt.trace.json.gz` in
    the session layout, `trace.pt.trace.json.gz` as the hook writes it); None for anything else."""
    name = posixpath.basename(name_or_key)
    if name.endswith(TRACE_SUFFIXES):
        return RankFile.TRACE
    try:
        return RankFile(name)
    except ValueError:
        return None


TRACES_DIR: Final = "traces"
LEGACY_RANKS_DIR: Final = "ranks"  # the first layout: ranks/<R>/<artifact> (read only)

MAX_SEGMENT = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Scheme(StrEnum):
    S3 = "s3"
    OSS = "oss"
    FILE = "file"


# How an S3 client names a bucket: in the path (MinIO), in the host name (OSS), or as the client decides. (No
# docstring: it would replace the CRD field's description in the generated schema.)
class AddressingStyle(StrEnum):
    AUTO = "auto"
    PATH = "path"
    VIRTUAL = "virtual"


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


def namespace_location(base: StorageLocation, namespace: str) -> StorageLocation:
    """`<base>/<namespace>/`: every session folder of the namespace and its sessions index."""
    return base.child(namespace)


def confinement_error(uri: str, folder: StorageLocation) -> str | None:
    """Why `uri` does not lie inside `folder` (scheme, bucket and whole path segments), or None when it does."""
    try:
        target = parse_storage_uri(uri)
    except StorageUriError as exc:
        return str(exc)
    if target.scheme is not folder.scheme or target.bucket != folder.bucket:
        return f"{uri} is not in the store of {folder.uri}/"
    inside = [p for p in folder.prefix.split("/") if p]
    segments = [p for p in target.prefix.split("/") if p]
    if segments[: len(inside)] != inside or len(segments) == len(inside):
        return f"{uri} is not inside {folder.uri}/"
    return None


def session_location(base: StorageLocation, namespace: str, name: str, uid: str) -> StorageLocation:
    return base.child(namespace, session_dir_name(name, uid))


def _check_rank(rank: int) -> None:
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")


def traces_location(session: StorageLocation) -> StorageLocation:
    """`<session>/traces`: the folder HTA's trace_dir and TensorBoard's run point at."""
    return session.child(TRACES_DIR)


def trace_name(rank: int) -> str:
    """`rank<R>.pt.trace.json.gz`: HTA reads the rank from the trace itself, TensorBoard names the worker `rank<R>`."""
    _check_rank(rank)
    return f"rank{rank}{TRACE_SUFFIX}"


def rank_files_location(session: StorageLocation, rank: int) -> StorageLocation:
    """`<session>/traces/rank<R>`: a rank's files other than its trace."""
    _check_rank(rank)
    return traces_location(session).child(f"rank{rank}")


def rank_artifact_key(session: StorageLocation, rank: int, artifact: str) -> str:
    """The key of one of a rank's files (`artifact`: one of RANK_FILES, or another plain file name)."""
    if artifact == TRACE_FILE:
        return traces_location(session).key(trace_name(rank))
    return rank_files_location(session, rank).key(artifact)


def rank_location(session: StorageLocation, rank: int) -> StorageLocation:
    """The first layout's rank folder `<session>/ranks/<R>` (read only: see the migration note above)."""
    _check_rank(rank)
    return session.child(LEGACY_RANKS_DIR, str(rank))


def report_location(session: StorageLocation) -> StorageLocation:
    return session.child("report")


def merged_trace_location(session: StorageLocation) -> StorageLocation:
    """`<session>/report/merged`: the folder holding the merged trace alone (HTA's trace_dir)."""
    return report_location(session).child(MERGED_TRACE_DIR)


def merged_trace_key(session: StorageLocation) -> str:
    return merged_trace_location(session).key(MERGED_TRACE_FILE)


def summary_key(session: StorageLocation, rank: int) -> str:
    return session.child("summaries").key(f"rank-{rank}.json")


def facts_key(session: StorageLocation, index: int, shards: int) -> str:
    """The compact numbers of map shard `index` of `shards` (its ranks' table, read by the reduce)."""
    return session.child("summaries").key(f"facts-{index}-of-{shards}.json")


_RANK = r"(0|[1-9][0-9]{0,8})"  # one spelling per rank: '007' is no rank
_NEW_TRACE = re.compile(rf"rank{_RANK}{re.escape(TRACE_SUFFIX)}")
_NEW_FILE = re.compile(rf"rank{_RANK}/([^/]+)")
_LEGACY_FILE = re.compile(rf"{_RANK}/([^/]+)")


def _below(session: StorageLocation, folder: str, key: str) -> str | None:
    prefix = session.child(folder).prefix.rstrip("/") + "/"
    return key[len(prefix) :] if key.startswith(prefix) else None


def rank_artifact(session: StorageLocation, key: str) -> tuple[int, str] | None:
    """(rank, artifact name) of an object key of `session`, in the current or the first layout; None for a key
    that is no rank's file (reports, summaries, other folders, unknown names)."""
    rest = _below(session, TRACES_DIR, key)
    if rest is not None:
        trace = _NEW_TRACE.fullmatch(rest)
        if trace:
            return int(trace.group(1)), TRACE_FILE
        found = _NEW_FILE.fullmatch(rest)
    else:
        legacy = _below(session, LEGACY_RANKS_DIR, key)
        found = _LEGACY_FILE.fullmatch(legacy) if legacy is not None else None
    if found is None or found.group(2) not in RANK_FILES:
        return None
    if rest is not None and found.group(2) == TRACE_FILE:
        return None  # traces/rank<R>/trace.pt.trace.json.gz is not where a trace goes
    return int(found.group(1)), found.group(2)


def rank_from_key(session: StorageLocation, key: str) -> int | None:
    """The rank of one of a rank's files (either layout), or None."""
    found = rank_artifact(session, key)
    return found[0] if found else None


class FetchLayout(StrEnum):
    """How `stepscope fetch` lays a session out on disk."""

    SESSION = "session"  # the session folder as stored (report links work; HTA: trace_dir=DIR/traces)
    HTA = "hta"  # only the traces, flat: TraceAnalysis(trace_dir=DIR)
    TENSORBOARD = "tensorboard"  # only the traces, in DIR/<session>/: tensorboard --logdir DIR shows one run
    MERGED = "merged"  # only the merged trace of the ranks that matter, flat: Perfetto, TraceAnalysis(trace_dir=DIR)


def fetch_path(session: StorageLocation, key: str, layout: FetchLayout) -> str | None:
    """Where `key` of `session` goes below the download folder (a relative POSIX path), or None to leave it out.
    Every path is built from sanitised segments or checked ones: none climbs out of the download folder."""
    if layout is FetchLayout.SESSION:
        rest = _below_session(session, key)
        return rest if rest and all(p not in ("", ".", "..") for p in rest.split("/")) else None
    if layout is FetchLayout.MERGED:
        return MERGED_TRACE_FILE if key == merged_trace_key(session) else None
    found = rank_artifact(session, key)
    if found is None or found[1] != TRACE_FILE:
        return None
    name = trace_name(found[0])
    if layout is FetchLayout.HTA:
        return name
    return f"{sanitize_segment(posixpath.basename(session.prefix.rstrip('/')) or 'session')}/{name}"


def _below_session(session: StorageLocation, key: str) -> str | None:
    prefix = session.prefix.rstrip("/") + "/"
    return key[len(prefix) :] if key.startswith(prefix) else None


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

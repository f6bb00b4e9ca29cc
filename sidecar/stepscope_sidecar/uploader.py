"""Uploads one rank's files to their places in the session folder (stepscope_contract.storage layout), manifest
last (the rank's summary, made while the trace uploads and given the manifest to carry, just before it), through
stepscope_storage: multipart above the threshold, botocore's retries per request (a failed part is sent again, not
the whole file), a deadline, and size and SHA-256 checked once stored.

The manifest says what was captured and what went wrong; when an upload fails for good the rank is failed with the
reason and its local copy is kept (the manifest is written beside it), so the capture's final state is the truth.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import MANIFEST_FILE, StorageLocation, rank_artifact_key
from stepscope_contract.wire import UploadedArtifact
from stepscope_storage.store import StorageError, Store, Stored, TransferCounts

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    ".gz": "application/gzip",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".folded": "text/plain; charset=utf-8",
}


class UploadError(RuntimeError):
    """An upload that did not succeed: the message has the file, the attempts and the last error."""


def content_type(name: str) -> str:
    return CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream")


@dataclass
class UploadStats:
    attempts: int = 0  # requests sent, retries included
    retries: int = 0
    bytes: int = 0
    files: int = 0
    errors: list[str] = field(default_factory=list)


def upload_file(store: Store, local: Path, key: str, *, deadline: float, stats: UploadStats) -> Stored:
    """One file to `key`; UploadError (with the attempts and the last error) when it does not get there."""
    before = store.counts
    try:
        stored = store.put_file(local, key, content_type(local.name), deadline=deadline)
    except StorageError as exc:
        sent = _count(store, before, stats)
        raise UploadError(f"upload of {local.name} failed after {sent} attempt(s): {exc}") from exc
    if _count(store, before, stats) > store.counts.calls - before.calls:
        log.warning("%s uploaded after retries (%d so far for this rank)", local.name, stats.retries)
    stats.bytes += stored.size
    stats.files += 1
    return stored


def _count(store: Store, before: TransferCounts, stats: UploadStats) -> int:
    """Fold the requests sent since `before` into `stats`; how many there were."""
    after = store.counts
    stats.retries += after.retries - before.retries
    sent = after.attempts - before.attempts
    stats.attempts += sent
    return sent


def upload_rank(
    store: Store,
    session: StorageLocation,
    manifest: RankManifest,
    files: list[Path],
    rank_dir: Path,
    *,
    deadline: float,
    stats: UploadStats,
    then: Callable[[], Path | None] | None = None,
) -> list[UploadedArtifact]:
    """Every file of the rank, then the file `then` gives once they are up (the rank's summary, given the manifest
    to carry: optional, a failure to upload it is logged, never the rank's), then its manifest (which says how many
    attempts it took); UploadError on failure, after the manifest was written into `rank_dir` beside the kept
    files."""
    uploaded: list[UploadedArtifact] = []
    for path in files:
        stored = upload_file(store, path, rank_artifact_key(session, manifest.rank, path.name), deadline=deadline,
                             stats=stats)  # fmt: skip
        uploaded.append(UploadedArtifact(rank=manifest.rank, uri=stored.uri))
    extra = then() if then is not None else None
    if extra is not None:
        try:
            with_manifest(extra, manifest)
            stored = upload_file(store, extra, rank_artifact_key(session, manifest.rank, extra.name),
                                 deadline=deadline, stats=stats)  # fmt: skip
            uploaded.append(UploadedArtifact(rank=manifest.rank, uri=stored.uri))
        except (UploadError, OSError) as exc:
            log.warning("rank %d: its summary did not go up: %s (the analysis will parse the trace)", manifest.rank,
                        exc)  # fmt: skip
    manifest.upload_attempts = len(files) + 1 + stats.retries  # one per file, the manifest's, and every retry
    manifest.upload_finished_at = datetime.now(UTC)
    manifest_path = write_manifest(manifest, rank_dir)
    stored = upload_file(store, manifest_path, rank_artifact_key(session, manifest.rank, MANIFEST_FILE),
                         deadline=deadline, stats=stats)  # fmt: skip
    uploaded.append(UploadedArtifact(rank=manifest.rank, uri=stored.uri))
    return uploaded


def with_manifest(summary: Path, manifest: RankManifest) -> None:
    """The rank's summary (a NodeSummary document, one JSON object) rewritten to carry its manifest as it is about
    to go up, so the analysis reads one file per rank. The manifest is spliced in before the object's closing brace,
    the summary not parsed here (its tens of kilobytes, once per rank); a summary that is not an object is left as
    it is (the analysis will not use it either)."""
    document = summary.read_bytes().strip()
    if not (document.startswith(b"{") and document.endswith(b"}")):
        return
    carried = b'"manifest":' + manifest.model_dump_json(by_alias=True, exclude_none=True).encode()
    body = document[1:-1].strip()
    summary.write_bytes(b"{" + body + (b"," if body else b"") + carried + b"}")


def write_manifest(manifest: RankManifest, rank_dir: Path) -> Path:
    rank_dir.mkdir(parents=True, exist_ok=True)
    path = rank_dir / MANIFEST_FILE
    path.write_text(manifest.model_dump_json(by_alias=True, indent=1), encoding="utf-8")
    return path

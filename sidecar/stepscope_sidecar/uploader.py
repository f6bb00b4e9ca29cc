"""Uploads one rank's files to their places in the session folder (stepscope_contract.storage layout), manifest
last (the rank's summary, made while the trace uploads and given the manifest to carry, just before it), through
stepscope_storage: multipart above the threshold, botocore's retries per request (a failed part is sent again, not
the whole file), a deadline, and size and SHA-256 checked once stored. A file whose requests ran out of botocore's
attempts (a storage outage longer than their backoff) is sent again after a pause that doubles up to
`MAX_PAUSE_SECONDS`, each round logged, until the upload's deadline: an outage shorter than what is left of the
capture's deadline loses nothing.

The manifest says what was captured and what went wrong; when an upload fails for good the rank is failed with the
reason and its local copy is kept (the manifest is written beside it), so the capture's final state is the truth.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import MANIFEST_FILE, StorageLocation, rank_artifact_key
from stepscope_contract.wire import UploadedArtifact
from stepscope_sidecar.rank_files import held_open
from stepscope_storage.store import StorageError, Store, Stored, TransferCounts

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    ".gz": "application/gzip",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".folded": "text/plain; charset=utf-8",
}


FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 8.0


def pause_before(round_: int) -> float:
    """Seconds to wait before round `round_` (2, 3, ...) of a file's upload: 1, 2, 4, 8, 8, ..."""
    return min(MAX_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * float(2 ** max(0, round_ - 2)))


class UploadError(RuntimeError):
    """An upload that did not succeed: the message has the file, the attempts and the last error."""


def content_type(name: str) -> str:
    return CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream")


@dataclass
class UploadStats:
    attempts: int = 0  # requests sent, retries included
    retries: int = 0
    rounds: int = 0  # files sent again from the start after their requests ran out of attempts
    bytes: int = 0
    files: int = 0
    errors: list[str] = field(default_factory=list)


def upload_file(
    store: Store,
    local: Path,
    key: str,
    *,
    deadline: float,
    stats: UploadStats,
    sleep: Callable[[float], None] = time.sleep,
    source: Path | None = None,
) -> Stored:
    """One file to `key`, read from `source` when given (the open descriptor of `local`, rank_files.py), sent again
    in rounds (`pause_before`) while storage fails and `deadline` (a
    time.monotonic() value) allows; UploadError (with the attempts, the rounds and the last error) when it does not
    get there."""
    before = store.counts
    round_ = 1
    while True:
        try:
            stored = store.put_file(source or local, key, content_type(local.name), deadline=deadline)
            break
        except StorageError as exc:
            round_ += 1
            pause = pause_before(round_)
            left = deadline - time.monotonic()
            if left <= pause:
                sent = _count(store, before, stats)
                raise UploadError(
                    f"upload of {local.name} failed after {sent} attempt(s) in {round_ - 1} round(s), the upload "
                    f"deadline {'passed' if left <= 0 else f'{left:.0f} s away'}: {exc}"
                ) from exc
            stats.rounds += 1
            log.warning(
                "upload of %s failed (%s); round %d in %.0f s (%.0f s left before the upload deadline)",
                local.name,
                exc,
                round_,
                pause,
                left,
            )
            sleep(pause)
    if round_ > 1:
        log.warning("%s uploaded in round %d", local.name, round_)
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
    sources: Mapping[str, Path] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[UploadedArtifact]:
    """Every file of the rank, then the file `then` gives once they are up (the rank's summary, given the manifest
    to carry: optional, a failure to upload it is logged, never the rank's), then its manifest (which says how many
    attempts it took); UploadError on failure, after the manifest was written into `rank_dir` beside the kept
    files. `sources`: what to read for each file's name (its open descriptor), instead of its path."""
    uploaded: list[UploadedArtifact] = []
    for path in files:
        stored = upload_file(store, path, rank_artifact_key(session, manifest.rank, path.name), deadline=deadline,
                             stats=stats, sleep=sleep, source=(sources or {}).get(path.name))  # fmt: skip
        uploaded.append(UploadedArtifact(rank=manifest.rank, uri=stored.uri))
    extra = then() if then is not None else None
    if extra is not None:
        try:
            with_manifest(extra, manifest)
            with held_open(extra) as source:  # what goes up is the file written, never a link put in its place
                stored = upload_file(store, extra, rank_artifact_key(session, manifest.rank, extra.name),
                                     deadline=deadline, stats=stats, sleep=sleep, source=source)  # fmt: skip
            uploaded.append(UploadedArtifact(rank=manifest.rank, uri=stored.uri))
        except (UploadError, OSError) as exc:
            log.warning("rank %d: its summary did not go up: %s (the analysis will parse the trace)", manifest.rank,
                        exc)  # fmt: skip
    manifest.upload_attempts = len(files) + 1 + stats.retries + stats.rounds  # files, manifest, every retry
    manifest.upload_finished_at = datetime.now(UTC)
    manifest_path = write_manifest(manifest, rank_dir)
    with held_open(manifest_path) as source:
        stored = upload_file(store, manifest_path, rank_artifact_key(session, manifest.rank, MANIFEST_FILE),
                             deadline=deadline, stats=stats, sleep=sleep, source=source)  # fmt: skip
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
    """The manifest written into `rank_dir` as a new file (whatever was at its name, a link included, is replaced,
    never written through)."""
    rank_dir.mkdir(parents=True, exist_ok=True)
    path = rank_dir / MANIFEST_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(manifest.model_dump_json(by_alias=True, indent=1))
    return path

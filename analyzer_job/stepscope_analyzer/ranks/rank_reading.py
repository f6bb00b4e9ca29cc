"""Reading one rank's artifacts from storage: manifest, stacks and trace bytes. Every failure is recorded, never
raised, so that one bad rank never stops the others."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from stepscope_analyzer import limits
from stepscope_analyzer.error_text import error_text as shared_error_text
from stepscope_analyzer.ranks.discovery import RankInput, looks_like_kineto
from stepscope_analyzer.ranks.storage_io import StorageError, Store, read_bounded
from stepscope_contract.manifest import RankManifest
from stepscope_contract.report import RankError


def error_text(exc: BaseException) -> str:
    return shared_error_text(exc, (ValueError, StorageError))


@dataclass
class RankRead:
    """What storage holds for one rank, and what could not be read."""

    inp: RankInput
    manifest: RankManifest | None = None
    stacks: str = ""
    trace: bytes | None = None
    trace_error: str | None = None
    not_a_trace: bool = False
    errors: list[RankError] = field(default_factory=list)


def _read_manifest(store: Store, read: RankRead, known: RankManifest | None) -> None:
    """The rank's manifest: `known` (the copy its node summary carries) or manifest.json; none when storage holds
    no manifest.json (the rank's upload did not finish)."""
    inp = read.inp
    if inp.manifest_key is None:
        return
    try:
        manifest = known or RankManifest.model_validate_json(
            read_bounded(store, inp.manifest_key, "max_manifest_bytes")
        )
        if manifest.meta is not None and manifest.meta.world_size > limits.current().max_world_size:
            raise limits.current().exceeded(
                "max_world_size", f"the manifest claims world size {manifest.meta.world_size}"
            )
        read.manifest = manifest
    except (StorageError, ValidationError, ValueError) as exc:
        message = f"manifest.json unreadable: {error_text(exc)}"
        read.errors.append(RankError(rank=inp.rank, source=inp.manifest_key, message=message))


def _read_stacks(store: Store, read: RankRead) -> None:
    inp = read.inp
    if not inp.stacks_key:
        return
    try:
        stacks = read_bounded(store, inp.stacks_key, "max_stacks_bytes", truncate=True)
        read.stacks = stacks.decode("utf-8", "replace")
    except (StorageError, ValueError) as exc:
        read.errors.append(RankError(rank=inp.rank, source=inp.stacks_key, message=error_text(exc)))


def read_rank(
    store: Store, inp: RankInput, *, with_trace: bool = True, manifest: RankManifest | None = None
) -> RankRead:
    """What storage holds for the rank; `manifest`: its manifest as already known (manifest.json is not read)."""
    read = RankRead(inp)
    _read_manifest(store, read, manifest)
    _read_stacks(store, read)
    if not with_trace or inp.trace_key is None:
        return read
    try:
        read.trace = read_bounded(store, inp.trace_key, "max_trace_file_bytes")
    except (StorageError, ValueError) as exc:  # ValueError: beyond the limit
        read.trace_error = error_text(exc)
        return read
    if inp.must_be_kineto and not looks_like_kineto(read.trace):
        read.not_a_trace = True
        read.trace = None
    return read

"""This process's PyTorch Flight Recorder dump, written as gzip-compressed JSON with the recorded call stacks.

torch keeps a ring buffer of the process's recent collectives (TORCH_FR_BUFFER_SIZE entries; gloo and NCCL process
groups record): process group, sequence number, op, sizes, dtypes, state and the Python stack that issued each.
torch's own JSON dumper leaves the stacks out, so the dump is taken in its pickled form -- bytes this very process
has just produced, never read from anywhere else -- and rewritten as JSON. gloo leaves `pg_config` empty, so the
global ranks of every process group are added under "stepscope", with the rank, the reason and the dump time.

Stdlib + torch, Python 3.9 syntax. torch is never imported here: without it there is nothing to dump.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from ._paths import job_roots, portable_path, stdlib_dir

FLIGHT_RECORDER_FILE = "flight_recorder.json.gz"
WRITTEN = "written"
MAX_ENTRIES = 20_000  # whatever the buffer size, the written dump stays bounded
MAX_FRAMES = 32  # innermost frames kept per entry
MAX_TEXT = 1024
MAX_DEPTH = 8


def _dump_function() -> Optional[Callable[..., Any]]:
    c10d = sys.modules.get("torch._C._distributed_c10d")
    if c10d is None:
        return None
    # torch >= 2.6: _dump_fr_trace (every backend that records); 2.2 - 2.5: _dump_nccl_trace (NCCL only)
    return getattr(c10d, "_dump_fr_trace", None) or getattr(c10d, "_dump_nccl_trace", None)


def _raw_dump(dump: Callable[..., Any]) -> Any:
    try:
        raw = dump(includeCollectives=True, includeStackTraces=True, onlyActive=False)
    except TypeError:
        raw = dump()
    # The bytes come from this process's own torch a moment ago: nothing foreign is unpickled here.
    return pickle.loads(raw)  # noqa: S301


def _jsonable(value: Any, depth: int = 0) -> Any:
    """JSON-safe copy: tuples become lists, bytes and unknown objects become (bounded) text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if depth >= MAX_DEPTH:
        return str(value)[:MAX_TEXT]
    if isinstance(value, dict):
        return {str(k)[:MAX_TEXT]: _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")[:MAX_TEXT]
    return str(value)[:MAX_TEXT]


def _frames(frames: List[Any], roots: List[str], stdlib: str) -> List[Any]:
    """The innermost MAX_FRAMES frames, their paths relative to the job's folders or site-packages (`_paths`)."""
    out = []
    for frame in frames[:MAX_FRAMES]:
        if isinstance(frame, dict) and isinstance(frame.get("filename"), str):
            out.append(dict(frame, filename=portable_path(frame["filename"], roots, stdlib)))
        else:
            out.append(frame)
    return out


def _entries(data: Dict[str, Any]) -> List[Any]:
    entries = list(data.get("entries") or [])[-MAX_ENTRIES:]
    roots, stdlib = job_roots(), stdlib_dir()
    out = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("frames"), list):
            out.append(_jsonable(dict(entry, frames=_frames(entry["frames"], roots, stdlib))))
        else:
            out.append(_jsonable(entry))
    return out


def process_groups() -> Dict[str, Dict[str, Any]]:
    """Every process group of this process: name -> description and global ranks."""
    dist = sys.modules.get("torch.distributed")
    c10d = getattr(dist, "distributed_c10d", None)
    world = getattr(c10d, "_world", None)
    out: Dict[str, Dict[str, Any]] = {}
    names = getattr(world, "pg_names", None) or {}
    group_ranks = getattr(world, "pg_group_ranks", None) or {}
    for pg, name in list(names.items()):
        ranks = sorted(int(r) for r in (group_ranks.get(pg) or {}))
        out[str(name)] = {"desc": str(getattr(pg, "group_desc", "") or ""), "ranks": ranks}
    return out


def build_document(rank: int, world_size: int, reason: str) -> Optional[Dict[str, Any]]:
    """The dump as a JSON-ready dict, or None when this process has nothing to dump."""
    dump = _dump_function()
    if dump is None:
        return None
    data = _raw_dump(dump)
    if not isinstance(data, dict):
        return None
    document = {k: _jsonable(v) for k, v in data.items() if k != "entries"}
    document["entries"] = _entries(data)
    torch_mod = sys.modules.get("torch")
    document["stepscope"] = {
        "rank": rank,
        "worldSize": world_size,
        "reason": reason,
        "dumpedAtNs": time.time_ns(),
        "pid": os.getpid(),
        "torchVersion": str(getattr(torch_mod, "__version__", "")),
        "bufferSize": os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"),
        "processGroups": process_groups(),
    }
    return document


def write_flight_recorder(folder: str, rank: int, world_size: int, reason: str) -> str:
    """Write flight_recorder.json.gz into `folder`; 'written' or why there is no dump. Never raises."""
    try:
        document = build_document(rank, world_size, reason)
    except Exception as exc:
        return "the Flight Recorder dump failed: %r" % (exc,)
    if document is None:
        return "no Flight Recorder in this process (torch.distributed not in use)"
    if not document["entries"]:
        return "the Flight Recorder is empty (TORCH_FR_BUFFER_SIZE unset or 0, or no collective yet)"
    try:
        payload = gzip.compress(json.dumps(document, separators=(",", ":")).encode("utf-8"), compresslevel=6)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
            os.replace(tmp, os.path.join(folder, FLIGHT_RECORDER_FILE))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except Exception as exc:
        return "the Flight Recorder dump could not be written: %r" % (exc,)
    return WRITTEN

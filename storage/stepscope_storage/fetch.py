"""`stepscope fetch SESSION_URI DIR [--layout session|hta|tensorboard|merged]`: a session's folder on local disk,
laid out for the tool that opens it (stepscope_contract.storage.fetch_path):

- session (default): the folder as stored; report/report.html's trace links work, and
  `TraceAnalysis(trace_dir="DIR/traces")` / `tensorboard --logdir DIR` open it;
- hta: only the traces, flat in DIR (`rank<R>.pt.trace.json.gz`): `TraceAnalysis(trace_dir="DIR")`;
- tensorboard: only the traces in DIR/<session>/: `tensorboard --logdir DIR` shows the session as one run (fetch
  several sessions into one DIR to compare them);
- merged: only the analyzer's merged trace of the ranks that matter, flat in DIR (`merged.pt.trace.json.gz`):
  Perfetto opens it, and `TraceAnalysis(trace_dir="DIR")`.

Sessions in the first layout (ranks/<R>/trace.pt.trace.json.gz) come out the same for hta and tensorboard.
Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment, else the provider chain.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stepscope_contract.storage import (
    FetchLayout,
    StorageLocation,
    StorageUriError,
    fetch_path,
    parse_storage_uri,
)
from stepscope_storage import open_store
from stepscope_storage.connection import Connection
from stepscope_storage.connection import add_arguments as add_storage_arguments
from stepscope_storage.credentials import Credentials
from stepscope_storage.failure_fix import with_fix
from stepscope_storage.store import StorageError, Store


@dataclass
class Fetched:
    files: list[Path] = field(default_factory=list)
    bytes: int = 0


def local_target(root: Path, session: StorageLocation, key: str, layout: FetchLayout) -> Path | None:
    """Where the stored `key` of `session` is written below the resolved folder `root`, or None when `layout` leaves
    it out; StorageError when it would be `root` itself or leave it (through a link already in it, too), or is no
    local path (a NUL byte, a character no file name holds)."""
    rel = fetch_path(session, key, layout)
    if rel is None:
        return None
    try:
        local = rel.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        local = b"\0"
    if b"\0" in local:
        raise StorageError(f"{key!r}: not a local file name")
    target = (root / rel).resolve()
    if target == root or not target.is_relative_to(root):  # fetch_path never climbs out; a second look
        raise StorageError(f"{key!r}: {rel!r} would leave {root}")
    return target


def fetch_session(
    store: Store,
    session: StorageLocation,
    dest: Path,
    layout: FetchLayout = FetchLayout.SESSION,
    progress: Callable[[str], None] | None = None,
) -> Fetched:
    """Download the files of `session` that `layout` keeps into `dest`; StorageError when one fails."""
    out = Fetched()
    root = dest.resolve()
    for key in store.list_keys(session):
        target = local_target(root, session, key, layout)
        if target is None:
            continue
        stored = store.get_file(key, target)
        out.files.append(target)
        out.bytes += stored.size
        if progress is not None:
            progress(f"{stored.uri} -> {target}")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope fetch",
        description="download a session's folder (traces, manifests, report) for local tools",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("session", help="the session's folder: s3://, oss:// or file:// (status.artifactsUri)")
    p.add_argument("dest", help="local folder to download into")
    p.add_argument(
        "--layout",
        choices=[layout.value for layout in FetchLayout],
        default=FetchLayout.SESSION.value,
        help="session: as stored; hta: traces flat (TraceAnalysis(trace_dir=DEST)); tensorboard: DEST/<session>/",
    )
    add_storage_arguments(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary line")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        session = parse_storage_uri(args.session)
        store = open_store(
            session,
            Connection.from_args(args),
            Credentials.from_env(),
        )
        fetched = fetch_session(
            store, session, Path(args.dest), FetchLayout(args.layout), None if args.quiet else print
        )
    except (StorageUriError, StorageError) as exc:
        print(f"stepscope fetch: {with_fix(exc)}", file=sys.stderr)
        return 2
    if not fetched.files:
        print(f"stepscope fetch: nothing to fetch under {session.uri} (layout {args.layout})", file=sys.stderr)
        return 1
    print(f"{len(fetched.files)} file(s), {fetched.bytes} bytes in {Path(args.dest).resolve()}")
    return 0

"""`stepscope open SESSION` and `stepscope fetch SESSION [DEST]`: a ProfileSession by its name.

The session's folder is computed as the operator computes it (stepscope_contract.session_folder: the accepted
spec's storage URI, the namespace, the name and the uid), never taken from `status.artifactsUri`, which anyone who
may patch the session's status can point at another team's folder or a local path (a status that disagrees is
named on stderr and ignored). A folder on `file://` is never read for a name: the user names such a folder on the
command line (`stepscope fetch file:///... DEST`). The folder is read with the install's storage settings (the
settings ConfigMap: endpoint, region, addressing style) and the credentials Secret they name in the session's
namespace, as the operator and the analyzer reach it, and downloaded as stored (stepscope_storage.fetch, layout
`session`), so that report/report.html's links to each rank's trace, stacks and Flight Recorder dump work. `open`
then shows the local copy of the report in the browser (or prints its path with --print). `fetch --merged` and
`open --trace` download only the merged trace of the ranks that matter (report/merged/, layout `merged`, into
DEST/merged.pt.trace.json.gz); `open --trace` prints its path and opens Perfetto's UI to drop it on. `fetch` with a
storage URI instead of a name downloads that folder without a cluster (its --layout merged does the same as
--merged).
"""

from __future__ import annotations

import argparse
import re
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path

from stepscope_cli.commands.args import fetch_parser, open_parser
from stepscope_cli.commands.check import Cluster, Context, credentials_of, storage_settings
from stepscope_contract.constants import GROUP, PLURAL, VERSION
from stepscope_contract.session import DNS_SUBDOMAIN
from stepscope_contract.session_folder import accepted_spec
from stepscope_contract.session_folder import session_folder as computed_folder
from stepscope_contract.status_wire import read_status
from stepscope_contract.storage import (
    MERGED_TRACE_FILE,
    AddressingStyle,
    FetchLayout,
    Scheme,
    StorageLocation,
    StorageUriError,
)
from stepscope_storage import Connection, open_store
from stepscope_storage.failure_fix import with_fix
from stepscope_storage.fetch import Fetched, fetch_session
from stepscope_storage.fetch import main as fetch_uri_main
from stepscope_storage.store import StorageError, Store


class SessionError(Exception):
    """The session cannot be opened: not found, no artifacts yet, storage unreachable (the message says which)."""


@dataclass
class SessionFolder:
    namespace: str
    name: str
    location: StorageLocation
    store: Store


def session_folder(cluster: Cluster, namespace: str, name: str, install_namespace: str | None) -> SessionFolder:
    """The session's folder in storage, and a store that reads it with the install's settings and credentials."""
    code, obj = cluster.call("GET", f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}")
    if code == 404:
        raise SessionError(f"no ProfileSession {namespace}/{name}")
    if code != 200 or not isinstance(obj, dict):
        raise SessionError(f"cannot read ProfileSession {namespace}/{name} ({code})")
    location = own_folder(obj, namespace, name)
    ctx = Context(cluster, namespace, install_namespace, 30.0, None)
    settings, _ = storage_settings(ctx)
    try:
        credentials, _ = credentials_of(ctx, settings)
    except ValueError as exc:
        raise SessionError(str(exc)) from exc
    connection = Connection(
        settings.endpoint or None, settings.region or None, AddressingStyle(settings.addressing_style or "auto")
    )
    return SessionFolder(namespace, name, location, open_store(location, connection, credentials))


def own_folder(obj: dict[str, object], namespace: str, name: str) -> StorageLocation:
    """The folder of the session `obj` (read as `namespace`/`name`), from its accepted spec and identity as the
    operator computes it; a `status.artifactsUri` elsewhere is named on stderr and ignored. SessionError when the
    session was never accepted, its storage URI is unusable, or the folder is on `file://`."""
    metadata = obj.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    status = read_status(obj.get("status"))
    spec = accepted_spec(meta)
    if spec is None:
        raise SessionError(f"{namespace}/{name} has no artifacts yet (phase {status.phase.value})")
    try:
        location = computed_folder(spec, namespace, name, str(meta.get("uid") or ""))
    except StorageUriError as exc:
        raise SessionError(f"{namespace}/{name}: the accepted storage URI is unusable: {exc}") from exc
    if status.artifacts_uri and status.artifacts_uri != location.uri:
        print(
            f"stepscope: status.artifactsUri {status.artifacts_uri[:300]!r} is not this session's folder; "
            f"reading {location.uri}",
            file=sys.stderr,
        )
    if location.scheme is Scheme.FILE:
        raise SessionError(
            f"{namespace}/{name} keeps its artifacts on the local file system ({location.uri}); name the folder "
            f"yourself: stepscope fetch {location.uri} DEST"
        )
    return location


PERFETTO_UI = "https://ui.perfetto.dev"


def _layout(merged: bool) -> FetchLayout:
    return FetchLayout.MERGED if merged else FetchLayout.SESSION


def _download(args: argparse.Namespace, dest: str | None, prog: str) -> tuple[Path, Fetched] | None:
    if not re.fullmatch(DNS_SUBDOMAIN, args.session):
        print(f"{prog}: '{args.session}' is not a session name", file=sys.stderr)
        return None
    cluster = Cluster(args.kubeconfig)  # no kubeconfig: the CLI's failure line names the cause and the fix
    namespace = args.namespace or cluster.context_namespace
    try:
        folder = session_folder(cluster, namespace, args.session, args.install_namespace)
        target = Path(dest or f"stepscope-{namespace}-{args.session}")
        fetched = fetch_session(folder.store, folder.location, target, _layout(getattr(args, "merged", False)))
    except (SessionError, StorageError, ValueError) as exc:
        print(f"{prog}: {with_fix(exc)}", file=sys.stderr)
        return None
    finally:
        cluster.close()
    return target.resolve(), fetched


def fetch_main(argv: list[str]) -> int:
    """`stepscope fetch NAME [DEST]`; a storage URI goes to stepscope_storage.fetch as it is."""
    if argv and "://" in argv[0]:
        return fetch_uri_main(argv)
    args = fetch_parser().parse_intermixed_args(
        argv
    )  # `fetch NAME --merged DEST` as well as `fetch NAME DEST --merged`
    done = _download(args, args.dest, "stepscope fetch")
    if done is None:
        return 2
    target, fetched = done
    print(f"{len(fetched.files)} file(s), {fetched.bytes} bytes in {target}")
    return 0 if fetched.files else 1


def open_main(argv: list[str]) -> int:
    args = open_parser().parse_args(argv)
    args.merged = args.trace
    done = _download(args, args.dest, "stepscope open")
    if done is None:
        return 2
    target, _ = done
    if args.trace:
        return _open_trace(target / MERGED_TRACE_FILE, args.print_only)
    page = target / "report" / "report.html"
    if not page.is_file():
        print(f"stepscope open: the session has no report yet ({target} holds what it has)", file=sys.stderr)
        return 1
    print(page)
    if not args.print_only and not webbrowser.open(page.as_uri()):
        print("stepscope open: no browser to open it in; open the path above", file=sys.stderr)
    return 0


def _open_trace(trace: Path, print_only: bool) -> int:
    """`open --trace`: the merged trace's path, and Perfetto's UI to drop it on (the file stays on this machine)."""
    if not trace.is_file():
        print(f"stepscope open: the session has no merged trace yet ({trace.parent} holds what it has)",
              file=sys.stderr)  # fmt: skip
        return 1
    print(trace)
    if not print_only and not webbrowser.open(PERFETTO_UI):
        print(f"stepscope open: no browser; open {PERFETTO_UI} and drop the file above on it", file=sys.stderr)
    return 0

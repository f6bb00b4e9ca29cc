"""`stepscope open SESSION` and `stepscope fetch SESSION [DEST]`: a ProfileSession by its name.

The session's folder (status.artifactsUri) is read with the install's storage settings (the settings ConfigMap:
endpoint, region, addressing style) and the credentials Secret they name in the session's namespace, as the
operator and the analyzer reach it, and downloaded as stored (stepscope_storage.fetch, layout `session`), so that
report/report.html's links to each rank's trace, stacks and Flight Recorder dump work. `open` then shows the local
copy of the report in the browser (or prints its path with --print). `fetch` with a storage URI instead of a name
downloads that folder, as before, without a cluster.
"""

from __future__ import annotations

import argparse
import re
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path

from stepscope_cli.commands.check import Cluster, Context, credentials_of, storage_settings
from stepscope_contract.constants import GROUP, PLURAL, VERSION
from stepscope_contract.session import DNS_SUBDOMAIN
from stepscope_contract.status_wire import read_status
from stepscope_contract.storage import AddressingStyle, FetchLayout, StorageLocation, parse_storage_uri
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
    status = read_status(obj.get("status"))
    if not status.artifacts_uri:
        raise SessionError(f"{namespace}/{name} has no artifacts yet (phase {status.phase.value})")
    ctx = Context(cluster, namespace, install_namespace, 30.0, None)
    settings, _ = storage_settings(ctx)
    try:
        credentials, _ = credentials_of(ctx, settings)
    except ValueError as exc:
        raise SessionError(str(exc)) from exc
    location = parse_storage_uri(status.artifacts_uri)
    connection = Connection(
        settings.endpoint or None, settings.region or None, AddressingStyle(settings.addressing_style or "auto")
    )
    return SessionFolder(namespace, name, location, open_store(location, connection, credentials))


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("session", help="the ProfileSession's name")
    p.add_argument("--namespace", "-n", default=None, help="its namespace (unset: the kubeconfig context's)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (unset: $KUBECONFIG, else in-cluster)")
    p.add_argument(
        "--install-namespace",
        default=None,
        help="namespace of the install's storage settings (unset: found by their labels, else stepscope)",
    )
    return p


def open_parser() -> argparse.ArgumentParser:
    p = _parser("stepscope open", "download a session's folder and show its report in the browser")
    p.add_argument("--dest", default=None, help="where to download it (unset: ./stepscope-<namespace>-<name>)")
    p.add_argument("--print", action="store_true", dest="print_only", help="print the report's path, open nothing")
    return p


def fetch_parser() -> argparse.ArgumentParser:
    p = _parser("stepscope fetch", "download a session's folder by its name (or a storage URI: as stored)")
    p.add_argument("dest", nargs="?", default=None, help="local folder (unset: ./stepscope-<namespace>-<name>)")
    return p


def _download(args: argparse.Namespace, dest: str | None, prog: str) -> tuple[Path, Fetched] | None:
    if not re.fullmatch(DNS_SUBDOMAIN, args.session):
        print(f"{prog}: '{args.session}' is not a session name", file=sys.stderr)
        return None
    cluster = Cluster(args.kubeconfig)  # no kubeconfig: the CLI's failure line names the cause and the fix
    namespace = args.namespace or cluster.context_namespace
    try:
        folder = session_folder(cluster, namespace, args.session, args.install_namespace)
        target = Path(dest or f"stepscope-{namespace}-{args.session}")
        fetched = fetch_session(folder.store, folder.location, target, FetchLayout.SESSION)
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
    args = fetch_parser().parse_args(argv)
    done = _download(args, args.dest, "stepscope fetch")
    if done is None:
        return 2
    target, fetched = done
    print(f"{len(fetched.files)} file(s), {fetched.bytes} bytes in {target}")
    return 0 if fetched.files else 1


def open_main(argv: list[str]) -> int:
    args = open_parser().parse_args(argv)
    done = _download(args, args.dest, "stepscope open")
    if done is None:
        return 2
    target, _ = done
    page = target / "report" / "report.html"
    if not page.is_file():
        print(f"stepscope open: the session has no report yet ({target} holds what it has)", file=sys.stderr)
        return 1
    print(page)
    if not args.print_only and not webbrowser.open(page.as_uri()):
        print("stepscope open: no browser to open it in; open the path above", file=sys.stderr)
    return 0

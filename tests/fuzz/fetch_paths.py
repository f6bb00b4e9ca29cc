"""What `stepscope fetch` / `open` may touch, as properties shared by the atheris target (fuzz_fetch.py) and the
hypothesis test (test_fuzz_fetch.py): for any session identity and any stored key,
- the session's folder (stepscope_contract.session_folder, as the operator and the CLI compute it) is
  `<base>/<sanitised namespace>/<one segment>` and reads back as itself;
- a key is written below the download folder or left out (StorageError for one that cannot be): never the folder
  itself, never outside it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.session_folder import session_folder
from stepscope_contract.storage import FetchLayout, StorageUriError, parse_storage_uri, sanitize_segment
from stepscope_storage.fetch import local_target
from stepscope_storage.store import StorageError

BASES = ("s3://bucket/sessions", "s3://b", "oss://bucket/deep/prefix", "file:///data/stepscope")


def check_session(base: str, namespace: str, name: str, uid: str, keys: list[str], layout: FetchLayout,
                  root: Path) -> None:  # fmt: skip
    try:
        spec = ProfileSessionSpec.model_validate(
            {"targets": {"selector": {"matchLabels": {"app": "a"}}}, "storage": {"uri": base}}
        )
        folder = session_folder(spec, namespace, name, uid)
    except (ValidationError, StorageUriError):
        return
    parsed = parse_storage_uri(base)
    assert folder.uri.startswith(f"{parsed.uri.rstrip('/')}/{sanitize_segment(namespace)}/"), folder.uri
    below = folder.uri[len(parsed.uri.rstrip("/")) + 1 :].split("/")
    assert len(below) == 2 and all(s not in ("", ".", "..") for s in below), folder.uri
    assert parse_storage_uri(folder.uri) == folder
    for raw in keys:
        for key in (raw, f"{folder.prefix.rstrip('/')}/{raw}"):
            try:
                target = local_target(root, folder, key, layout)
            except StorageError:
                continue
            assert target is None or (target != root and target.is_relative_to(root)), (key, target)

"""The fetch path's properties (fetch_paths.py) for a few seconds: hypothesis over session identities, storage bases
and stored keys (with `..`, absolute paths, NUL bytes, surrogates and links in the download folder), then the atheris
target (fuzz_fetch.py); `make fuzz` runs both longer. A key that would leave the download folder through a link
planted in it is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_contract.storage import FetchLayout, parse_storage_uri
from stepscope_storage.fetch import local_target
from stepscope_storage.store import StorageError
from stepscope_testing.fuzzing import fuzz_briefly

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_paths import BASES, check_session

pytestmark = [pytest.mark.fuzz]
TARGET = Path(__file__).resolve().parent / "fuzz_fetch.py"

_SEGMENT = st.sampled_from(["..", ".", "", "a", "traces", "report", "/", "\0", "\udcff", "~", "rank0"]) | st.text(
    max_size=12
)
_KEY = st.lists(_SEGMENT, max_size=6).map("/".join) | st.text(max_size=40)


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(BASES) | st.text(max_size=30),
    st.text(max_size=70),
    st.text(max_size=70),
    st.text(max_size=40),
    st.lists(_KEY, max_size=5),
    st.sampled_from(list(FetchLayout)),
)
def test_the_folder_and_every_key_stay_where_they_belong(
    tmp_path_factory: pytest.TempPathFactory,
    base: str,
    namespace: str,
    name: str,
    uid: str,
    keys: list[str],
    layout: FetchLayout,
) -> None:
    root = tmp_path_factory.getbasetemp().resolve()
    check_session(base, namespace, name, uid, keys, layout, root)


@pytest.mark.unit
def test_a_link_in_the_download_folder_is_not_followed_out(tmp_path: Path) -> None:
    root = (tmp_path / "dest").resolve()
    (root / "report").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "traces").symlink_to(tmp_path / "outside")
    session = parse_storage_uri("s3://bucket/base/ns/run-1234abcd")
    assert local_target(root, session, "base/ns/run-1234abcd/report/report.html", FetchLayout.SESSION) == (
        root / "report" / "report.html"
    )
    with pytest.raises(StorageError, match="would leave"):
        local_target(root, session, "base/ns/run-1234abcd/traces/rank0/trace.json", FetchLayout.SESSION)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_fetch_path_survives_a_few_seconds_of_coverage_guided_fuzzing(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    fuzz_briefly(TARGET, tmp_path, max_len=4096, rss_limit_mb=1024)

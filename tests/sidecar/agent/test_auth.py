from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_sidecar.auth import TokenError, authorized, load_token

pytestmark = pytest.mark.unit


def test_token_file_is_read_and_stripped(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("s3cret\n")
    assert load_token(tmp_path / "t") == "s3cret"


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_missing_or_empty_token_file_is_an_error(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "t").write_text(content)
    with pytest.raises(TokenError):
        load_token(tmp_path / "t")


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer s3cret", True),
        ("bearer s3cret", True),
        ("Bearer s3cre", False),
        ("Bearer s3cret2", False),
        ("Basic s3cret", False),
        ("s3cret", False),
        ("", False),
        (None, False),
        ("Bearer ", False),
    ],
)
def test_only_the_exact_bearer_token_passes(header: str | None, ok: bool) -> None:
    assert authorized(header, "s3cret") is ok


@pytest.mark.parametrize("header", ["Bearer \udcff\udcfe", "Bearer \ud800", "\udcc3( s3cret", "Bearer s3cret\udcff"])
def test_a_header_that_was_not_utf8_is_a_wrong_token_not_an_error(header: str) -> None:
    assert authorized(header, "s3cret") is False

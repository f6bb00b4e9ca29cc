"""Inflating a trace block by block: ISA-L's streaming decompressor and zlib's give the same bytes on one gzip
member, on several, with zero padding after them, and fail the same way on a truncated or corrupt stream, on
garbage after it, and past the inflate cap."""

from __future__ import annotations

import gzip
import random

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.parse import TraceError, stream

pytestmark = pytest.mark.unit

WAYS = ["igzip", "zlib"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "zlib":
        monkeypatch.setattr(stream, "_GZIP_STREAMS", None)
    else:
        assert stream._GZIP_STREAMS is not None  # isal is a dependency of the analyzer
    return str(request.param)


def _text(n: int, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    return b"".join(b'{"name": "op %d", "ts": %d},\n' % (rng.randrange(90), i * 7) for i in range(n))


def _blocks(raw: bytes, block: int = 1 << 14) -> list[bytes]:
    return list(stream._inflate(raw, block))


@pytest.mark.usefixtures("way")
@pytest.mark.parametrize("members", [1, 3])
def test_members_inflate_to_their_text_in_bounded_blocks(members: int) -> None:
    parts = [_text(20_000, seed) for seed in range(members)]
    raw = b"".join(gzip.compress(part) for part in parts) + b"\x00" * 512  # padding after the last member
    blocks = _blocks(raw)
    assert b"".join(blocks) == b"".join(parts)
    assert max(len(b) for b in blocks) <= 1 << 14 and len(blocks) > 10


@pytest.mark.usefixtures("way")
@pytest.mark.parametrize("cut", [0.5, -9, -1])
def test_a_truncated_stream_is_an_error(cut: float) -> None:
    raw = gzip.compress(_text(20_000))
    end = int(len(raw) * cut) if cut > 0 else len(raw) + int(cut)
    with pytest.raises(TraceError, match="ends early"):
        _blocks(raw[:end])


def test_a_corrupt_checksum_is_an_error_either_way(way: str) -> None:
    raw = bytearray(gzip.compress(_text(5_000)))
    raw[-8] ^= 1  # the CRC32 of the member
    with pytest.raises(stream.INFLATE_ERRORS):
        _blocks(bytes(raw))


@pytest.mark.usefixtures("way")
def test_garbage_after_the_stream_is_an_error() -> None:
    with pytest.raises(TraceError, match="trailing garbage"):
        _blocks(gzip.compress(_text(100)) + b"garbage!")


@pytest.mark.usefixtures("way")
def test_the_inflate_cap_stops_a_bomb_early() -> None:
    raw = gzip.compress(b" " * (16 << 20))  # a ratio of ~1000
    seen = 0
    with limits.override(min_ratio_checked_bytes=1 << 20) as table:
        allowed, name = table.inflate_cap(len(raw))
        assert name == "max_inflate_ratio"
        with pytest.raises(limits.LimitExceededError, match="max_inflate_ratio"):
            for block in stream._inflate(raw, 1 << 16):
                seen += len(block)
    assert allowed - (1 << 16) < seen <= allowed

"""Bearer-token check for the control API: the token comes from a mounted Secret file."""

from __future__ import annotations

import hmac
from pathlib import Path

from stepscope_contract.constants import AUTH_SCHEME


class TokenError(RuntimeError):
    """The token file is missing or empty: the sidecar refuses to start without one."""


def load_token(path: str | Path) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenError(f"cannot read token file {path}: {exc.strerror or exc}") from exc
    if not token:
        raise TokenError(f"token file {path} is empty")
    return token


def authorized(header: str | None, token: str) -> bool:
    """True when `header` is 'Bearer <token>'; the comparison takes constant time.

    A header that is not valid UTF-8 reaches us with surrogate escapes (aiohttp decodes header bytes that way); it
    is encoded with those surrogates kept (never the bytes of a valid token), so it is a wrong token, never an error."""
    if not header:
        return False
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != AUTH_SCHEME.lower():
        return False
    sent = presented.strip().encode("utf-8", "surrogatepass")
    return hmac.compare_digest(sent, token.encode("utf-8"))

"""One failure as the text a rank's error carries: bounded, and without a type name where the message says it all.
Pure, and light enough for the worker processes (no storage or session models imported)."""

from __future__ import annotations

MAX_ERROR_CHARS = 2000


def error_text(exc: BaseException, plain: tuple[type[BaseException], ...] = (ValueError,)) -> str:
    """`plain`: the exception types whose message is shown alone (a parse error's text names what is wrong)."""
    text = str(exc) if isinstance(exc, plain) else f"{type(exc).__name__}: {exc}"
    return text[:MAX_ERROR_CHARS]

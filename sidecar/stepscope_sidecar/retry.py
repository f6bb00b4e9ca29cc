"""Which storage errors are worth another try, and how long to wait before it. Pure."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeTooSkewed",
    }
)
# botocore exception class names for network trouble (matched by name: no botocore import needed here)
RETRYABLE_EXCEPTIONS = frozenset(
    {
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "TimeoutError",
        "BrokenPipeError",
    }
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx, timeouts and connection errors anywhere in the exception chain."""
    for err in _chain(exc):
        if type(err).__name__ in RETRYABLE_EXCEPTIONS or any(
            c.__name__ in RETRYABLE_EXCEPTIONS for c in type(err).__mro__
        ):
            return True
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in RETRYABLE_CODES or (isinstance(status, int) and (status >= 500 or status == 429)):
                return True
            if code.isdigit() and (int(code) >= 500 or int(code) == 429):
                return True
    return False


def describe(exc: BaseException) -> str:
    """One line for a status message: the innermost useful error."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 400 else text[:397] + "..."


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: attempt n waits up to min(cap, base * factor**n)."""

    base: float = 0.5
    factor: float = 2.0
    cap: float = 8.0
    max_attempts: int = 12

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.cap, self.base * self.factor**attempt)
        r = (rng or random).random()
        return ceiling / 2 + r * ceiling / 2

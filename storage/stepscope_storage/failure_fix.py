"""What a storage failure means to its user: the cause in words and the fix, from the exception and its causes.
Pure; matched by class names, so this module imports no client (botocore).

One place for every command that touches storage (`stepscope analyze`, `stepscope fetch`, and the CLI's own
failure rules): an endpoint that cannot be reached, no credentials, credentials refused, a bucket or key that does
not exist.
"""

from __future__ import annotations

from collections.abc import Iterator

S3_AUTH = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "403"}
)
S3_MISSING = frozenset({"NoSuchBucket", "NoSuchKey", "404", "NotFound"})
ENDPOINT_FIX = "check the endpoint (--endpoint, STEPSCOPE_STORAGE_ENDPOINT or AWS_ENDPOINT_URL) and that it is running"
CREDENTIALS_FIX = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile), or name the credentials Secret"


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and its causes (`raise ... from`, and the exception being handled when it was raised), at most 20."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 20:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def class_names(exc: BaseException) -> set[str]:
    """The names of `exc`'s class and its bases (clients' errors are matched by name, their modules not imported)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def storage_failure(exc: BaseException) -> tuple[str, str] | None:
    """(cause, fix) of a storage failure raised by botocore, or None when `exc` is not one (this one exception; the
    caller walks causes, or uses `storage_fix`)."""
    names = class_names(exc)
    if type(exc).__module__.startswith("botocore") and names & {"EndpointConnectionError", "ConnectTimeoutError"}:
        return f"cannot reach the storage endpoint ({exc})", ENDPOINT_FIX
    if names & {"NoCredentialsError", "PartialCredentialsError"}:
        return "no storage credentials found", CREDENTIALS_FIX
    if "ClientError" not in names:
        return None
    error = (getattr(exc, "response", None) or {}).get("Error", {})
    code = str(error.get("Code", ""))
    if code in S3_AUTH:
        return (
            f"the storage refused the credentials ({code}: {error.get('Message', '')})".replace(": )", ")"),
            "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the credentials Secret) and the bucket's policy",
        )
    if code in S3_MISSING:
        bucket = error.get("BucketName") or ""
        what = f"bucket {bucket}" if code == "NoSuchBucket" and bucket else "the object or bucket"
        return f"{what} does not exist in storage ({code})", "check the storage URI and the endpoint (--endpoint)"
    return None


def storage_fix(exc: BaseException) -> str | None:
    """The fix for the first storage failure in `exc`'s chain of causes, or None."""
    for e in chain(exc):
        found = storage_failure(e)
        if found is not None:
            return found[1]
    return None


def with_fix(exc: BaseException) -> str:
    """`exc`'s message and, when it is a storage failure a user can fix, how: one line."""
    fix = storage_fix(exc)
    return f"{exc}; {fix}" if fix else str(exc)

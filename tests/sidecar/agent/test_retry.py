from __future__ import annotations

import random

import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from stepscope_sidecar.retry import Backoff, describe, is_retryable

pytestmark = pytest.mark.unit


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("SlowDown", 503),
        ("Throttling", 400),
        ("InternalError", 500),
        ("ServiceUnavailable", 503),
        ("Whatever", 502),
        ("TooManyRequestsException", 429),
        ("RequestTimeout", 400),
    ],
)
def test_throttling_and_5xx_are_retried(code: str, status: int) -> None:
    assert is_retryable(client_error(code, status))


@pytest.mark.parametrize(("code", "status"), [("AccessDenied", 403), ("NoSuchBucket", 404), ("InvalidArgument", 400)])
def test_client_mistakes_are_not_retried(code: str, status: int) -> None:
    assert not is_retryable(client_error(code, status))


def test_network_errors_are_retried() -> None:
    assert is_retryable(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert is_retryable(ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"))
    assert is_retryable(ReadTimeoutError(endpoint_url="http://127.0.0.1:1"))
    assert is_retryable(ConnectionResetError())
    assert not is_retryable(ValueError("bad"))


def test_boto3_upload_wrapper_is_classified_by_its_cause() -> None:
    try:
        try:
            raise client_error("SlowDown", 503)
        except ClientError as inner:
            raise S3UploadFailedError(f"Failed to upload: {inner}")  # noqa: B904 - boto3 raises it this way
    except S3UploadFailedError as outer:
        assert is_retryable(outer)


def test_backoff_grows_exponentially_with_jitter_and_a_cap() -> None:
    b = Backoff(base=0.5, factor=2.0, cap=4.0)
    rng = random.Random(1)
    delays = [b.delay(n, rng) for n in range(8)]
    for n, d in enumerate(delays):
        ceiling = min(4.0, 0.5 * 2**n)
        assert ceiling / 2 <= d <= ceiling
    assert max(delays) <= 4.0 and delays[3] > delays[0]


def test_describe_is_one_bounded_line() -> None:
    assert (
        describe(ValueError("x" * 1000)).startswith("ValueError: xxx") and len(describe(ValueError("x" * 1000))) == 400
    )

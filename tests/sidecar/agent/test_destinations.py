"""The sidecar's destination policy, as a pure function: only the session's own folder under a configured base, of
the sidecar's own namespace, through a configured endpoint."""

from __future__ import annotations

import pytest

from stepscope_contract.wire import CaptureRequest
from stepscope_sidecar.destinations import DestinationError, DestinationPolicy
from stepscope_storage.endpoints import ENV_OSS_ENDPOINT_TEMPLATE

pytestmark = pytest.mark.unit


def _request(uri: str, endpoint: str | None = None, namespace: str = "ns", region: str | None = None) -> CaptureRequest:
    dest: dict[str, object] = {"sessionUri": uri}
    if endpoint is not None:
        dest["endpoint"] = endpoint
    if region is not None:
        dest["region"] = region
    return CaptureRequest.model_validate(
        {
            "captureId": "c",
            "session": {"namespace": namespace, "name": "sess", "uid": "abcdef0123"},
            "options": {"steps": 1},
            "destination": dest,
        }
    )


def test_the_sessions_folder_under_any_configured_base_is_accepted() -> None:
    policy = DestinationPolicy.from_settings("s3://b/p, oss://o/q", "https://MinIO:9000/", "ns")
    assert policy.check(_request("s3://b/p/ns/sess-abcdef01", "https://minio:9000")).uri == "s3://b/p/ns/sess-abcdef01"
    assert policy.check(_request("oss://o/q/ns/sess-abcdef01", "minio:9000")).bucket == "o"


@pytest.mark.parametrize(
    ("uri", "endpoint", "namespace"),
    [
        ("s3://b/p/ns/sess-abcdef01", "https://evil:9000", "ns"),
        ("s3://b/p/ns/sess-abcdef01", None, "ns"),
        ("s3://b/p/other/sess-abcdef01", "https://minio:9000", "ns"),
        ("s3://b/p/other/sess-abcdef01", "https://minio:9000", "other"),
        ("s3://b/p/ns/sess-abcdef01/ranks", "https://minio:9000", "ns"),
        ("s3://b/p/ns", "https://minio:9000", "ns"),
        ("s3://b/pp/ns/sess-abcdef01", "https://minio:9000", "ns"),
        ("s3://c/p/ns/sess-abcdef01", "https://minio:9000", "ns"),
        ("file:///p/ns/sess-abcdef01", None, "ns"),
        ("gs://b/p/ns/sess-abcdef01", "https://minio:9000", "ns"),
    ],
)
def test_anything_else_is_refused(uri: str, endpoint: str | None, namespace: str) -> None:
    policy = DestinationPolicy.from_settings("s3://b/p", "https://minio:9000", "ns")
    with pytest.raises(DestinationError):
        policy.check(_request(uri, endpoint, namespace))


def test_without_a_base_or_a_namespace_nothing_is_accepted() -> None:
    for policy in (DestinationPolicy.from_settings("", "", "ns"), DestinationPolicy.from_settings("s3://b/p", "", "")):
        with pytest.raises(DestinationError, match="STEPSCOPE_"):
            policy.check(_request("s3://b/p/ns/sess-abcdef01"))


def test_provider_default_endpoints_when_none_is_configured() -> None:
    policy = DestinationPolicy.from_settings("s3://b/p,oss://o/p", "", "ns")
    assert policy.check(_request("s3://b/p/ns/sess-abcdef01")).bucket == "b"
    assert policy.check(_request("oss://o/p/ns/sess-abcdef01", region="cn-hangzhou")).bucket == "o"
    with pytest.raises(DestinationError, match="endpoint"):
        policy.check(_request("s3://b/p/ns/sess-abcdef01", "https://elsewhere"))


def test_file_bases_take_no_endpoint() -> None:
    policy = DestinationPolicy.from_settings("file:///data", "", "ns")
    assert policy.check(_request("file:///data/ns/sess-abcdef01")).prefix == "/data/ns/sess-abcdef01"
    with pytest.raises(DestinationError, match="no endpoint"):
        policy.check(_request("file:///data/ns/sess-abcdef01", "https://x"))


def test_an_oss_region_is_checked_as_the_upload_derives_its_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = DestinationPolicy.from_settings("oss://bkt/base", "http://127.0.0.1:9000", "ns")
    with pytest.raises(DestinationError, match="aliyuncs"):
        policy.check(_request("oss://bkt/base/ns/sess-abcdef01", region="cn-hangzhou"))
    monkeypatch.setenv(ENV_OSS_ENDPOINT_TEMPLATE, "http://127.0.0.1:9000")  # where the local cluster sends OSS
    assert policy.check(_request("oss://bkt/base/ns/sess-abcdef01", region="cn-hangzhou")).bucket == "bkt"

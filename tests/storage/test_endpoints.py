"""The endpoint rules every component shares: explicit endpoints, OSS's region -> endpoint, the test template,
addressing styles."""

from __future__ import annotations

import pytest

from stepscope_contract.storage import AddressingStyle, Scheme
from stepscope_storage.endpoints import (
    ENV_OSS_ENDPOINT_TEMPLATE,
    EndpointError,
    addressing_style,
    endpoint_url,
    normalize_endpoint,
    region_of,
)

pytestmark = pytest.mark.unit
NO_ENV: dict[str, str] = {}


def test_an_explicit_endpoint_wins_and_a_bare_host_gets_https() -> None:
    assert endpoint_url(Scheme.S3, "http://127.0.0.1:9000", None, NO_ENV) == "http://127.0.0.1:9000"
    assert endpoint_url(Scheme.S3, "minio.local:9000", None, NO_ENV) == "https://minio.local:9000"
    assert endpoint_url(Scheme.OSS, "https://x.example", "cn-beijing", NO_ENV) == "https://x.example"


def test_s3_without_an_endpoint_is_aws_default() -> None:
    assert endpoint_url(Scheme.S3, None, "eu-west-1", NO_ENV) is None


@pytest.mark.parametrize("region", ["cn-hangzhou", "oss-cn-hangzhou"])
def test_oss_derives_its_regional_endpoint(region: str) -> None:
    assert endpoint_url(Scheme.OSS, None, region, NO_ENV) == "https://oss-cn-hangzhou.aliyuncs.com"


def test_oss_without_endpoint_or_region_is_an_error() -> None:
    with pytest.raises(EndpointError, match="oss://"):
        endpoint_url(Scheme.OSS, None, None, NO_ENV)


def test_the_oss_template_points_regions_elsewhere() -> None:
    env = {ENV_OSS_ENDPOINT_TEMPLATE: "http://127.0.0.1:9000"}
    assert endpoint_url(Scheme.OSS, None, "cn-hangzhou", env) == "http://127.0.0.1:9000"
    env = {ENV_OSS_ENDPOINT_TEMPLATE: "http://{region}.oss.test:80"}
    assert endpoint_url(Scheme.OSS, None, "oss-cn-beijing", env) == "http://cn-beijing.oss.test:80"
    assert endpoint_url(Scheme.S3, None, "cn-beijing", env) is None  # only OSS


def test_oss_is_always_virtual_hosted() -> None:
    assert addressing_style(Scheme.OSS, AddressingStyle.PATH) == "virtual"
    assert addressing_style(Scheme.S3, AddressingStyle.PATH) == "path"
    assert addressing_style(Scheme.S3, AddressingStyle.AUTO) == "auto"


def test_region_from_the_spec_else_the_environment() -> None:
    assert region_of("cn-hangzhou", {"AWS_REGION": "x"}) == "cn-hangzhou"
    assert region_of(None, {"AWS_DEFAULT_REGION": "eu-west-1"}) == "eu-west-1"
    assert region_of(None, {"AWS_REGION": "a", "AWS_DEFAULT_REGION": "b"}) == "a"
    assert region_of(None, NO_ENV) is None


def test_normalized_endpoints_compare_equal() -> None:
    assert normalize_endpoint("MINIO.local:9000/") == "https://minio.local:9000"
    assert normalize_endpoint("HTTP://Host/Path/") == "http://host/Path"

"""Which endpoint and addressing style a bucket is reached through. Pure apart from reading one setting.

The one place for the rules every component must agree on (the sidecar that uploads, the sidecar's destination
check, the analyzer that reads, the cleanup Job that deletes):
- an explicit endpoint wins (a bare host gets https://);
- oss:// without one: Alibaba OSS's regional endpoint `https://oss-<region>.aliyuncs.com` (a region written
  `oss-cn-hangzhou` or `cn-hangzhou` means the same); no region either is an error;
- s3:// without one: AWS's own endpoint for the region (None: botocore decides);
- OSS serves virtual-hosted requests only, whatever the spec says; S3 and MinIO take the spec's style.

STEPSCOPE_OSS_ENDPOINT_TEMPLATE replaces the OSS endpoint template (`{region}` is the region without `oss-`). It is
a setting for tests and the embedded local cluster, which point every OSS region at the local S3 server; it is not
part of a session's spec.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final, Protocol

from stepscope_contract.storage import AddressingStyle, Scheme

ENV_OSS_ENDPOINT_TEMPLATE: Final = "STEPSCOPE_OSS_ENDPOINT_TEMPLATE"
OSS_ENDPOINT_TEMPLATE: Final = "https://oss-{region}.aliyuncs.com"


class EndpointSettings(Protocol):
    """What the contract's StorageSpec and StorageDestination (and the CLI's flags) say about reaching a bucket."""

    @property
    def endpoint(self) -> str | None: ...

    @property
    def region(self) -> str | None: ...

    @property
    def addressing_style(self) -> AddressingStyle: ...


class EndpointError(ValueError):
    """No endpoint can be derived; the message says what is missing."""


def normalize_endpoint(endpoint: str) -> str:
    """`host[:port][/path]` or a URL as a URL: https:// when no scheme, lower-case scheme and host, no trailing /."""
    text = endpoint.strip()
    if "://" not in text:
        text = f"https://{text}"
    scheme, _, rest = text.partition("://")
    host, sep, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{sep}{path}".rstrip("/")


def oss_region(region: str) -> str:
    return region[len("oss-") :] if region.startswith("oss-") else region


def endpoint_url(
    scheme: Scheme, endpoint: str | None, region: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """The endpoint URL requests go to; None: the provider's default (AWS)."""
    if endpoint:
        return endpoint if "://" in endpoint else f"https://{endpoint}"
    if scheme is Scheme.OSS:
        if not region:
            raise EndpointError("oss:// needs an endpoint or a region (e.g. cn-hangzhou)")
        template = (os.environ if env is None else env).get(ENV_OSS_ENDPOINT_TEMPLATE) or OSS_ENDPOINT_TEMPLATE
        return template.replace("{region}", oss_region(region))
    return None


def addressing_style(scheme: Scheme, style: AddressingStyle) -> str:
    """botocore's addressing_style: OSS only serves virtual-hosted requests; S3 and MinIO take what is asked."""
    if scheme is Scheme.OSS:
        return AddressingStyle.VIRTUAL.value
    return style.value


def region_of(region: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The region requests are signed for: the spec's as written, else the environment's."""
    from stepscope_storage.credentials import ENV_DEFAULT_REGION, ENV_REGION

    if region:
        return region
    e = os.environ if env is None else env
    return e.get(ENV_REGION) or e.get(ENV_DEFAULT_REGION) or None

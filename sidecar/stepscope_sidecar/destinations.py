"""Which destinations this sidecar uploads to: only its own namespace's session folders under the storage base it was
configured with, through the endpoint it was configured with. Pure.

A capture request names its destination (session URI, endpoint). Without this check, anyone holding a sidecar token
could send the pod's traces, signed with the namespace's storage keys, to any bucket or endpoint. The policy comes
from the sidecar's own environment (injected: STEPSCOPE_STORAGE_BASE, STEPSCOPE_STORAGE_ENDPOINT,
STEPSCOPE_POD_NAMESPACE), never from the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_contract.storage import StorageLocation, StorageUriError, parse_storage_uri, session_location
from stepscope_contract.wire import CaptureRequest
from stepscope_storage.endpoints import endpoint_url, normalize_endpoint


class DestinationError(ValueError):
    """The request's destination is not one this sidecar may write to; the message says why."""


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@dataclass(frozen=True)
class DestinationPolicy:
    bases: tuple[StorageLocation, ...]
    endpoints: tuple[str, ...]  # normalised; empty: only the provider's default endpoint
    namespace: str | None

    @classmethod
    def from_settings(cls, bases: str | None, endpoints: str | None, namespace: str | None) -> DestinationPolicy:
        """From comma-separated bases and endpoints (the sidecar's flags or environment); raises StorageUriError."""
        return cls(
            bases=tuple(parse_storage_uri(b) for b in _split(bases)),
            endpoints=tuple(normalize_endpoint(e) for e in _split(endpoints)),
            namespace=namespace or None,
        )

    def describe(self) -> str:
        bases = ", ".join(b.uri for b in self.bases) or "none"
        endpoints = ", ".join(self.endpoints) or "the provider's default"
        return f"namespace {self.namespace or '?'}, storage base(s) {bases}, endpoint(s) {endpoints}"

    def check(self, request: CaptureRequest) -> StorageLocation:
        """The session folder to upload to, or DestinationError."""
        if not self.bases:
            raise DestinationError("this sidecar has no storage base configured (STEPSCOPE_STORAGE_BASE)")
        if not self.namespace:
            raise DestinationError("this sidecar does not know its namespace (STEPSCOPE_POD_NAMESPACE)")
        session = request.session
        if session.namespace != self.namespace:
            raise DestinationError(
                f"the session's namespace {session.namespace!r} is not this sidecar's namespace {self.namespace!r}"
            )
        dest = request.destination
        try:
            location = parse_storage_uri(dest.session_uri)
        except StorageUriError as exc:
            raise DestinationError(str(exc)) from exc
        allowed = [session_location(b, session.namespace, session.name, session.uid) for b in self.bases]
        if location not in allowed:
            raise DestinationError(
                f"{location.uri} is not this session's folder under the storage base "
                f"({' or '.join(a.uri for a in allowed)})"
            )
        self._check_endpoint(location, dest.endpoint, dest.region)
        return location

    def _check_endpoint(self, location: StorageLocation, endpoint: str | None, region: str | None) -> None:
        if location.bucket == "":  # file:// has no endpoint
            if endpoint:
                raise DestinationError("a file:// destination takes no endpoint")
            return
        try:  # the endpoint the upload will use, derived as stepscope_storage derives it for the upload itself
            effective = endpoint_url(location.scheme, endpoint, region)
        except ValueError as exc:
            raise DestinationError(str(exc)) from exc
        if effective is None:
            if self.endpoints:
                raise DestinationError(
                    f"no endpoint given, but this sidecar uploads only through {', '.join(self.endpoints)}"
                )
            return
        if endpoint is None and not self.endpoints:
            return  # the provider's regional default (oss:// with a region)
        if normalize_endpoint(effective) not in self.endpoints:
            allowed = ", ".join(self.endpoints) or "the provider's default endpoint"
            raise DestinationError(f"endpoint {effective} is not this sidecar's storage endpoint ({allowed})")

"""The install's storage settings: what a session's `spec.storage` leaves out, the operator fills in at acceptance.

A platform team configures the object store once (Helm values `storage.*`, rendered into the ConfigMap
`<release>-storage` and given to the operator as `STEPSCOPE_STORAGE_*` variables; `stepscope local-cluster` writes the
same for its S3). A session then needs only `storage.uri`: a missing endpoint, region, addressing style (`auto`) or
credentials Secret comes from here. What the session sets always wins; `file://` URIs take nothing, and an `oss://`
session with its own region keeps the endpoint derived from that region. The result is frozen in the accepted-spec
annotation, so a later change of the settings never moves a running session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stepscope_contract.constants import ENV_STORAGE_BASE, ENV_STORAGE_ENDPOINT
from stepscope_contract.session import SecretRef, StorageSpec
from stepscope_contract.storage import AddressingStyle


@dataclass(frozen=True)
class StorageDefaults:
    base: str = ""  # where sessions of this install store (the sidecars' allowed base; `stepscope check` probes it)
    endpoint: str = ""
    region: str = ""
    addressing_style: str = ""
    credentials_secret: str = ""
    url_base: str = ""  # where people open what storage.uri holds (https://), for the links of reports and diffs
    access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 - a key name

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StorageDefaults:
        def get(name: str, default: str = "") -> str:
            return env.get(name, "").strip() or default

        style = get("STEPSCOPE_STORAGE_ADDRESSING_STYLE").lower()
        if style and style not in {s.value for s in AddressingStyle}:
            raise ValueError(f"STEPSCOPE_STORAGE_ADDRESSING_STYLE must be auto, path or virtual, not {style!r}")
        return cls(
            base=get(ENV_STORAGE_BASE).split(",")[0].strip(),  # the sidecars read a list; the first is the main one
            endpoint=get(ENV_STORAGE_ENDPOINT).split(",")[0].strip(),
            region=get("STEPSCOPE_STORAGE_REGION"),
            addressing_style="" if style == AddressingStyle.AUTO.value else style,
            credentials_secret=get("STEPSCOPE_STORAGE_CREDENTIALS_SECRET"),
            url_base=get("STEPSCOPE_STORAGE_URL_BASE"),
            access_key_id_key=get("STEPSCOPE_STORAGE_CREDENTIALS_ACCESS_KEY_ID_KEY", cls.access_key_id_key),
            secret_access_key_key=get("STEPSCOPE_STORAGE_CREDENTIALS_SECRET_ACCESS_KEY_KEY", cls.secret_access_key_key),
        )

    def apply(self, storage: StorageSpec) -> StorageSpec:
        """The session's storage with the gaps filled from these settings."""
        if storage.uri.startswith("file://"):
            return storage
        update: dict[str, object] = {}
        # an oss:// session that names its region reaches OSS's endpoint for that region (stepscope_storage derives
        # it the same way in every component): the install's endpoint would send it elsewhere
        derives_endpoint = storage.uri.startswith("oss://") and storage.region is not None
        if storage.endpoint is None and self.endpoint and not derives_endpoint:
            update["endpoint"] = self.endpoint
        if storage.region is None and self.region:
            update["region"] = self.region
        if storage.addressing_style is AddressingStyle.AUTO and self.addressing_style:
            update["addressing_style"] = AddressingStyle(self.addressing_style)
        if storage.url_base is None and self.url_base:
            update["url_base"] = self.url_base
        if storage.credentials_secret is None and self.credentials_secret:
            update["credentials_secret"] = SecretRef(
                name=self.credentials_secret,
                access_key_id_key=self.access_key_id_key,
                secret_access_key_key=self.secret_access_key_key,
            )
        return StorageSpec.model_validate({**storage.model_dump(), **update}) if update else storage

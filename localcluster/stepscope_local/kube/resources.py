"""Resource types served by the emulator: built-ins and those registered by CustomResourceDefinitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "log"
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def qualified(self) -> str:
        """`Kind.group` as the apiserver names it in messages (`pods` for core)."""
        return f"{self.kind}.{self.group}" if self.group else self.plural


def _core(
    plural: str, kind: str, *, namespaced: bool = True, short: tuple[str, ...] = (), sub: tuple[str, ...] = ()
) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, kind.lower(), short, (), sub)


BUILTINS: tuple[ResourceType, ...] = (
    _core("pods", "Pod", short=("po",), sub=("status", "log")),
    _core("secrets", "Secret"),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("events", "Event", short=("ev",)),
    _core("namespaces", "Namespace", namespaced=False, short=("ns",), sub=("status",)),
    _core("services", "Service", short=("svc",), sub=("status",)),
    _core("serviceaccounts", "ServiceAccount", short=("sa",)),
    _core("nodes", "Node", namespaced=False, short=("no",), sub=("status",)),
    ResourceType("batch", "v1", "jobs", "Job", True, "job", (), (), ("status",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "rolebinding"),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, "event", ("ev",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        "customresourcedefinition",
        ("crd", "crds"),
        (),
        ("status",),
    ),
)

CRD_TYPE = BUILTINS[-1]


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of a CRD as resource types (schema and printer columns kept per version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    result = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        result.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(sorted((version.get("subresources") or {}).keys())),
                schema=schema,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return result

"""ProfileSessionStatus to and from its wire form, for the two writers of a session's status (the operator and the
analyzer Job). Pure.

Both read the status typed (a field that does not validate is dropped, never the whole status) and write only the
merge patch of the fields they changed, built from the model: a key can only be one the CRD knows, so nothing is
silently pruned by the API server, and neither writer overwrites a field the other owns without changing it. A patch
never carries NaN or Infinity (stepscope_contract.finite).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stepscope_contract.finite import finite_wire
from stepscope_contract.session import ProfileSessionStatus


def read_status(raw: Any) -> ProfileSessionStatus:
    """The status as read from the object, typed; fields that do not validate are left out."""
    data = dict(raw) if isinstance(raw, Mapping) else {}
    while True:
        try:
            return ProfileSessionStatus.model_validate(data)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & data.keys()
            if not bad:
                return ProfileSessionStatus()
            for key in bad:
                data.pop(key)


def status_patch(before: ProfileSessionStatus, after: ProfileSessionStatus) -> dict[str, Any]:
    """The merge patch that turns `before` into `after`: the wire form of every field that changed (null: removed;
    unset optional fields inside a value are left out, as the CRD's schema wants)."""
    patch: dict[str, Any] = {}
    for name, info in ProfileSessionStatus.model_fields.items():
        value = getattr(after, name)
        if value == getattr(before, name):
            continue
        key = info.alias or name
        wire = after.model_dump(mode="json", by_alias=True, include={name}, exclude_none=True)
        patch[key] = finite_wire(wire.get(key))
    return patch

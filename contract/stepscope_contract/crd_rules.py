"""The ProfileSession CRD's CEL validation rules (`x-kubernetes-validations`), in one table.

The API server evaluates these before anything is stored, so a mistake is refused with a message a person can act
on instead of a raw schema dump. Each cross-field rule mirrors a pydantic validator in `session.py` (the operator
checks the same again); the tests run the invalid examples through both. Patterns that users get wrong often (rank
lists, storage URIs) are checked here, with a message, instead of as a bare `pattern`. `self == oldSelf` makes the
fields the operator freezes at acceptance immutable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stepscope_contract.ranks import RANK_SET_PATTERN
from stepscope_contract.session import STORAGE_URI_PATTERN


def cel_regex(pattern: str) -> str:
    """A regular expression as a CEL raw string literal (RE2 syntax, as the API server runs it)."""
    if "'" in pattern:
        raise ValueError(f"pattern {pattern!r} cannot hold a single quote")
    return f"r'{pattern}'"


@dataclass(frozen=True)
class CelRule:
    """One `x-kubernetes-validations` entry placed at `path` (property names below `spec`)."""

    path: tuple[str, ...]
    rule: str
    message: str = ""
    message_expression: str = ""
    replaces: tuple[str, ...] = ()  # schema keywords at `path` this rule takes over (their message is unreadable)

    @property
    def transition(self) -> bool:
        """A transition rule (uses oldSelf): evaluated on updates only."""
        return "oldSelf" in self.rule

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule}
        if self.message:
            out["message"] = self.message
        if self.message_expression:
            out["messageExpression"] = self.message_expression
        return out


IMMUTABLE_FIELDS = ("targets", "capture", "storage", "analysis", "baseline", "gate")
"""Spec fields the operator freezes when it accepts a session; `ttlSecondsAfterFinished` may still change."""

RULES: tuple[CelRule, ...] = (
    CelRule(
        ("targets",),
        "has(self.selector) != has(self.jobRef)",
        message_expression=(
            "has(self.selector) ? 'set targets.selector or targets.jobRef, not both' : "
            "'set one of targets.selector (pods by label) or targets.jobRef (the pods of a job)'"
        ),
    ),
    CelRule(
        ("targets", "ranks"),
        f"self.matches({cel_regex(RANK_SET_PATTERN)})",
        message_expression=(
            "'\"' + self + '\" is not a rank list: write ranks and inclusive ranges separated by commas, "
            'such as "0-7,12"\''
        ),
        replaces=("pattern",),
    ),
    CelRule(
        ("storage", "uri"),
        f"self.matches({cel_regex(STORAGE_URI_PATTERN)})",
        message_expression=(
            "'\"' + self + '\" is not a storage URI: use s3://bucket/prefix, oss://bucket/prefix or file:///path "
            "(bucket names: 3-63 lowercase letters, digits, dots or hyphens)'"
        ),
        replaces=("pattern",),
    ),
    CelRule(
        ("storage",),
        "!self.uri.startsWith('file://') || (!has(self.endpoint) && !has(self.credentialsSecret))",
        message_expression=(
            "(has(self.endpoint) ? 'storage.endpoint' : 'storage.credentialsSecret') + "
            "' only applies to s3:// and oss:// URIs, not to ' + self.uri"
        ),
    ),
    CelRule(
        ("baseline",),
        "has(self.session) != has(self.uri)",
        message_expression=(
            "has(self.session) ? 'set baseline.session or baseline.uri, not both' : "
            "'set one of baseline.session (a previous session of this namespace) or baseline.uri (a stored report)'"
        ),
    ),
    CelRule(
        ("baseline", "uri"),
        f"self.matches({cel_regex(STORAGE_URI_PATTERN)})",
        message_expression=(
            "'\"' + self + '\" is not a storage URI: use s3://bucket/prefix, oss://bucket/prefix or file:///path'"
        ),
        replaces=("pattern",),
    ),
    *(
        CelRule(
            (name,),
            "self == oldSelf",
            message=f"spec.{name} cannot change once the session exists; create a new ProfileSession instead",
        )
        for name in IMMUTABLE_FIELDS
    ),
)

"""Label and field selectors (the apiserver's `labelSelector` / `fieldSelector` query syntax)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from stepscope_local.kube.errors import bad_request

Predicate = Callable[[Mapping[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9._/-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


def _split_requirements(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _label_requirement(req: str) -> Callable[[Mapping[str, str]], bool]:
    eq = _EQ_RE.match(req)
    if eq:
        key, op, value = eq.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    st = _SET_RE.match(req)
    if st:
        neg, key, op, values_text = st.groups()
        if op is None:
            if neg:
                return lambda labels: key not in labels
            return lambda labels: key in labels
        if neg:
            raise bad_request(f"unable to parse requirement: {req!r}")
        values = {v.strip() for v in values_text.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    raise bad_request(f"unable to parse requirement: {req!r}")


def parse_label_selector(text: str | None) -> Callable[[Mapping[str, str]], bool]:
    """Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k` into a predicate over a label dict."""
    if not text:
        return lambda labels: True
    reqs = [_label_requirement(r) for r in _split_requirements(text)]
    return lambda labels: all(r(labels) for r in reqs)


def object_labels_match(selector: Callable[[Mapping[str, str]], bool], obj: Mapping[str, Any]) -> bool:
    return selector(obj.get("metadata", {}).get("labels") or {})


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def _field_check(path: str, value: str, negate: bool) -> Predicate:
    def check(obj: Mapping[str, Any]) -> bool:
        return (_field_value(obj, path) == value) != negate

    return check


def parse_field_selector(text: str | None) -> Predicate:
    """Field selectors: `metadata.name=x`, `metadata.namespace!=y`, any dotted path (status.phase, ...)."""
    if not text:
        return lambda obj: True
    checks: list[Predicate] = []
    for req in _split_requirements(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", req)
        if not m:
            raise bad_request(f"invalid field selector: {req!r}")
        path, op, value = m.groups()
        checks.append(_field_check(path, value, negate=op == "!="))
    return lambda obj: all(c(obj) for c in checks)

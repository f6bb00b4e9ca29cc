"""Readable validation messages: which field, and why, in the CR's own (camelCase) field names."""

from __future__ import annotations

from pydantic import ValidationError


def field_path(loc: tuple[int | str, ...], root: str = "") -> str:
    parts: list[str] = [root] if root else []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(item)
    return ".".join(parts)


def describe_validation_error(error: ValidationError, root: str = "spec", limit: int = 5) -> str:
    """'spec.capture.steps: Input should be less than or equal to 1000; ...' (at most `limit` fields)."""
    messages: list[str] = []
    for item in error.errors(include_url=False)[:limit]:
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = item["msg"].removeprefix("Value error, ")
        path = field_path(loc, root)
        messages.append(f"{path}: {message}" if path else message)
    extra = error.error_count() - limit
    if extra > 0:
        messages.append(f"and {extra} more")
    return "; ".join(messages)

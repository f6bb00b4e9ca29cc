"""Default factories for the models' empty collections.

Plain Python functions rather than the builtins `list` and `dict`: pydantic inspects a default factory's signature
when it builds a model class, and a builtin's signature is parsed from its text each time (tens of microseconds per
field, most of a large module's import), while a Python function's is read directly. Unlike a `[]` default, which
pydantic deep-copies for every instance, a factory costs one call per instance.
"""

from __future__ import annotations

from typing import Any


def new_list() -> list[Any]:
    return []


def new_dict() -> dict[Any, Any]:
    return {}


__all__ = ["new_dict", "new_list"]

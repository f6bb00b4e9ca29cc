"""The contract's models build their validators on first use (pydantic's defer_build): a command imports the
models of every document it might write and validates few of them. `build_now` builds them ahead, e.g. before a
process forks workers that all construct the same models (each would build its own otherwise)."""

from __future__ import annotations

import typing

from pydantic import BaseModel


def _models_in(annotation: object) -> typing.Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def build_now(*models: type[BaseModel]) -> None:
    """Build the validators of `models` and of every model their fields hold, at any depth."""
    seen: set[type[BaseModel]] = set()
    todo = list(models)
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        if not model.__pydantic_complete__:
            model.model_rebuild()
        for field in model.model_fields.values():
            todo.extend(_models_in(field.annotation))


__all__ = ["build_now"]

"""Every rank's summary held in less memory while the job's ranks are reduced together, its values unchanged.

The reduce holds every rank's RankReport at once (the diagnosis compares them all), and a rank's summary is mostly
small models (its top kernels and functions, its collectives, its steps' phases and spans) whose names are the same
on every rank of a job. Two things cost most of that memory and neither is a value: the same name held once per rank
(a kernel name runs to kilobytes), and pydantic's per-instance record of which fields were set (a set of the field
names, ~700 bytes on each small model). A Compactor, one per analysis, walks each summary as it arrives: equal
strings become one string, and a model whose every field was set shares one such set with the other models of its
class (adding a field name to a set that holds them all changes nothing, so the sharing cannot leak). The summary
serialises byte for byte as before, in well under half the memory (bench/reduce_memory.py).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

_SET_ATTR = "__pydantic_fields_set__"
M = TypeVar("M", bound=BaseModel)


class Compactor:
    """Equal strings and full field sets shared across the summaries it has seen (one per analysis: what it holds
    lives as long as it)."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._full_sets: dict[type[BaseModel], set[str]] = {}

    def compact(self, model: M) -> M:
        """`model`, changed in place: its strings (and those of the models and lists inside it) shared."""
        self._model(model)
        return model

    def _string(self, value: str) -> str:
        return self._strings.setdefault(value, value)

    def _model(self, model: BaseModel) -> None:
        fields_set: set[str] = getattr(model, _SET_ATTR)
        cls = type(model)
        if len(fields_set) == len(cls.model_fields):
            shared = self._full_sets.setdefault(cls, fields_set)
            if shared is not fields_set:
                object.__setattr__(model, _SET_ATTR, shared)
        values = model.__dict__
        for name, value in values.items():
            if isinstance(value, str):
                values[name] = self._string(value)
            elif isinstance(value, BaseModel):
                self._model(value)
            elif isinstance(value, list):
                self._list(value)

    def _list(self, items: list[Any]) -> None:
        for i, item in enumerate(items):
            if isinstance(item, str):
                items[i] = self._string(item)
            elif isinstance(item, BaseModel):
                self._model(item)
            elif isinstance(item, list):
                self._list(item)
            else:
                return  # a list of numbers: nothing to share

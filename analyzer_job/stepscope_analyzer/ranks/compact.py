"""Every rank's summary held in less memory while the job's ranks are reduced together, its values unchanged.

Where every rank's RankReport is held at once (a plain folder's traces until their ranks are numbered,
summarize_all's callers), and a rank's summary is mostly
small models (its top kernels and functions, its collectives, its steps' phases and spans) whose names are the same
on every rank of a job. Two things cost most of that memory and neither is a value: the same name held once per rank
(a kernel name runs to kilobytes), and pydantic's per-instance record of which fields were set (a set of the field
names, ~700 bytes on each small model). A Compactor, one per analysis, walks each summary as it arrives: equal
strings become one string, and a model whose every field was set shares one such set with the other models of its
class (adding a field name to a set that holds them all changes nothing, so the sharing cannot leak). The summary
serialises byte for byte as before, in well under half the memory (tests/analyzer_job/ranks/test_compact.py).
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
        self._field_counts: dict[type[BaseModel], int] = {}

    def compact(self, model: M) -> M:
        """`model`, changed in place: its strings (and those of the models and lists inside it) shared."""
        self._model(model)
        return model

    def _full_set(self, cls: type[BaseModel], fields_set: set[str]) -> set[str] | None:
        """The set shared by the models of `cls` with every field set (None: this one has not every field set)."""
        count = self._field_counts.get(cls)
        if count is None:
            count = self._field_counts[cls] = len(cls.model_fields)
        if len(fields_set) != count:
            return None
        return self._full_sets.setdefault(cls, fields_set)

    def _model(self, model: BaseModel) -> None:
        fields_set: set[str] = getattr(model, _SET_ATTR)
        shared = self._full_set(type(model), fields_set)
        if shared is not None and shared is not fields_set:
            object.__setattr__(model, _SET_ATTR, shared)
        strings = self._strings
        values = model.__dict__
        for name, value in values.items():
            kind = type(value)
            if kind is float or kind is int or kind is bool or value is None:
                continue
            if kind is str:
                values[name] = strings.setdefault(value, value)
            elif kind is list:
                self._list(value)
            elif isinstance(value, BaseModel):
                self._model(value)

    def _list(self, items: list[Any]) -> None:
        if not items:
            return
        kind = type(items[0])
        if kind is float or kind is int:
            return  # a list of numbers: nothing to share
        strings = self._strings
        for i, item in enumerate(items):
            if type(item) is str:
                items[i] = strings.setdefault(item, item)
            elif isinstance(item, BaseModel):
                self._model(item)
            elif isinstance(item, list):
                self._list(item)

"""The contract's models make their empty collections with Python functions (stepscope_contract.empty), never with
the builtins `list` or `dict`: pydantic parses a builtin factory's signature from its text for every field when a
class is made, which was most of the import of the report's models that every analysis pays before its workers
start. A `[]` default is no better: pydantic deep-copies it for every instance."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from pydantic import BaseModel

import stepscope_contract
from stepscope_contract.empty import new_dict, new_list

pytestmark = pytest.mark.unit


def _models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.iter_modules(stepscope_contract.__path__):
        module = importlib.import_module(f"stepscope_contract.{info.name}")
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return list(found.values())


def test_no_field_of_a_contract_model_has_a_builtin_factory_or_a_mutable_default() -> None:
    models = _models()
    assert len(models) > 50  # the report's, the session's, the wire's, the trigger's ...
    wrong = [
        f"{model.__name__}.{name}"
        for model in models
        for name, field in model.model_fields.items()
        if inspect.isbuiltin(field.default_factory)
        or (isinstance(field.default_factory, type) and field.default_factory in (list, dict, set))
        or isinstance(field.default, (list, dict, set))
    ]
    assert not wrong, wrong


def test_each_instance_gets_its_own_empty_collection() -> None:
    first, second = new_list(), new_list()
    first.append(1)
    assert second == [] and first is not second
    assert new_dict() == {} and new_dict() is not new_dict()

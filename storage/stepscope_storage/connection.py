"""Endpoint settings given on a command line (`stepscope analyze --endpoint ...`, `stepscope fetch ...`): the same
three fields a session's storage spec has."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_contract.storage import AddressingStyle


@dataclass(frozen=True)
class Connection:
    endpoint: str | None = None
    region: str | None = None
    addressing_style: AddressingStyle = AddressingStyle.AUTO

"""Kubernetes API emulator: kmock's KubernetesEmulator with the fidelity kopf and kubectl need."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"ApiError": "errors", "EmulatorServer": "server", "write_kubeconfig": "server", "Store": "store"}
__all__ = ["ApiError", "EmulatorServer", "Store", "write_kubeconfig"]


def __getattr__(name: str) -> Any:
    """The names above, imported from their module when first asked for: the emulator's server (kmock, aiohttp) is
    loaded by what runs it, not by every module of the package (the runner, the identities)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)

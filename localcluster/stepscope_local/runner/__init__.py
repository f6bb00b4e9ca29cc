"""Runs the emulator's Pods and Jobs as local processes, from their manifests."""

from __future__ import annotations

from typing import Any

__all__ = ["Runner"]


def __getattr__(name: str) -> Any:
    """`Runner`, imported from the controller when first asked for (the controller loads the emulator's store)."""
    if name != "Runner":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from stepscope_local.runner.controller import Runner

    return Runner

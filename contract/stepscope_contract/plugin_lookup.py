"""pydantic's plugin lookup, skipped where plugins are off.

pydantic builds each validator through `pydantic.plugin._loader.get_plugins`, whose module imports
importlib.metadata (email, zipfile, csv and friends: 15-20 ms) even when PYDANTIC_DISABLE_PLUGINS turns the lookup
off. Where the variable turns it off, `skip_when_disabled` puts a module in its place that answers as pydantic's does
then (no plugins), so the first model a command builds costs its schema only. tests/contract/test_plugin_lookup.py holds
the stand-in to pydantic's own answer."""

from __future__ import annotations

import os
import sys
import types

LOADER = "pydantic.plugin._loader"
DISABLED = ("__all__", "1", "true")
"""the values of PYDANTIC_DISABLE_PLUGINS with which pydantic's get_plugins returns no plugin at all"""


def _no_plugins() -> tuple[()]:
    return ()


def skip_when_disabled() -> bool:
    """Stand in for pydantic's plugin loader when PYDANTIC_DISABLE_PLUGINS disables every plugin and the loader is not
    imported yet; whether the stand-in is in place."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in DISABLED:
        return False
    if LOADER not in sys.modules:
        stand_in = types.ModuleType(LOADER, "pydantic's plugin loader with every plugin disabled: no plugins")
        stand_in.get_plugins = _no_plugins  # type: ignore[attr-defined]
        sys.modules[LOADER] = stand_in
    return getattr(sys.modules[LOADER], "get_plugins", None) is _no_plugins


__all__ = ["DISABLED", "LOADER", "skip_when_disabled"]

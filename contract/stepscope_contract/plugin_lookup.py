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
VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
DISABLED = ("__all__", "1", "true")
"""the values of PYDANTIC_DISABLE_PLUGINS with which pydantic's get_plugins returns no plugin at all"""


def _no_plugins() -> tuple[()]:
    return ()


def skip_when_disabled() -> bool:
    """Stand in for pydantic's plugin loader when PYDANTIC_DISABLE_PLUGINS disables every plugin and the loader is not
    imported yet; whether the stand-in is in place."""
    if os.environ.get(VARIABLE) not in DISABLED:
        return False
    if LOADER not in sys.modules:
        stand_in = types.ModuleType(LOADER, "pydantic's plugin loader with every plugin disabled: no plugins")
        stand_in.get_plugins = _no_plugins  # type: ignore[attr-defined]
        sys.modules[LOADER] = stand_in
    return getattr(sys.modules[LOADER], "get_plugins", None) is _no_plugins


def plugins_off_by_default() -> bool:
    """stepscope's models use no pydantic plugin: PYDANTIC_DISABLE_PLUGINS is set to "__all__" unless already set
    (an empty value keeps plugins on), and the loader stood in for where they are off (skip_when_disabled). Looking
    for plugins reads every installed package's entry points when the first model is built. Whether the stand-in
    is in place."""
    os.environ.setdefault(VARIABLE, "__all__")
    return skip_when_disabled()


__all__ = ["DISABLED", "LOADER", "VARIABLE", "plugins_off_by_default", "skip_when_disabled"]

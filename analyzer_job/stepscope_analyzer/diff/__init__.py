"""The regression gate: compare a candidate run with a baseline (`stepscope diff`).

diff_reports (compare.py) is pure: two contract Reports in, a contract DiffResult out; sides.py turns a source
into a Report, page.py draws diff.html, command.py is the command line.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DiffConfig": "compare",
    "diff_reports": "compare",
    "diff_html_bytes": "page",
    "render_diff_html": "page",
    "SideError": "sides",
    "load_side": "sides",
}
__all__ = ["DiffConfig", "SideError", "diff_html_bytes", "diff_reports", "load_side", "render_diff_html"]


def __getattr__(name: str) -> Any:
    """The names above, imported from their module when first asked for: `stepscope diff --help` (diff.command)
    loads none of the comparison, the page or the trace analysis."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)

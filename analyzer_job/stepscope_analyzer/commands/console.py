"""What `stepscope analyze` tells its user: its exit statuses and its progress lines (on stderr)."""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_NO_TRACES = 1
EXIT_BAD_SOURCE = 2
EXIT_PARTIAL = 3
"""the report was written, but at least one rank could not be analysed (error or missing); see its errors"""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)

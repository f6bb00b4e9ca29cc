"""The cyclic garbage collector paused while a command imports its modules.

An import creates objects that live as long as the process (classes, functions, pydantic's schemas), and each
700 of them start a collection that walks the young ones, and now and then every one: on `stepscope analyze`'s
imports that is time spent finding no garbage (bench/ranks_vs_hta.py prints the command's import time). Between
those imports the collector runs as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside the block; the collector's state before it is restored after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["paused"]

"""Every thread's Python stack, as text: the evidence a hang diagnosis needs.

The main thread comes first (that is where a training loop is stuck); the thread that writes the dump -- the
hook's own watchdog -- is left out. faulthandler's dump is added only when the Python stacks could not be taken.
Source paths are written relative to the job's folders or site-packages (`_paths`).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import traceback
from types import TracebackType
from typing import List, Optional

from ._paths import portable_lines

WATCHDOG_THREAD = "stepscope-watchdog"


def format_all_stacks(seconds_since_last_step: float, header: str = "") -> str:
    """Stacks of the threads of this process (sys._current_frames), main thread first, the caller's left out."""
    lines = _preamble(seconds_since_last_step, header)
    try:
        lines.extend(_thread_stacks())
    except Exception as exc:  # never fails the dump: faulthandler has the same frames
        lines.append("python stacks unavailable: %r" % (exc,))
        lines.append("--- faulthandler ---")
        lines.append(_faulthandler_dump())
    return portable_lines("\n".join(lines) + "\n")


def format_exit_stacks(exc: Optional[BaseException], tb: Optional[TracebackType], header: str = "") -> str:
    """At interpreter exit: the exception that ended the training (if any) and the threads still alive."""
    lines = _preamble(None, header)
    if exc is not None:
        lines.append("Exception that ended the training process:")
        lines.extend(line.rstrip("\n") for line in traceback.format_exception(type(exc), exc, tb))
        lines.append("")
    try:
        lines.extend(_thread_stacks())
    except Exception as err:
        lines.append("python stacks unavailable: %r" % (err,))
    return portable_lines("\n".join(lines) + "\n")


def _preamble(seconds_since_last_step: Optional[float], header: str) -> List[str]:
    lines = [header] if header else []
    lines.append("pid: %d" % os.getpid())
    if seconds_since_last_step is not None:
        lines.append("seconds_since_last_step: %.3f" % seconds_since_last_step)
    lines.append("")
    return lines


def _thread_stacks() -> List[str]:
    names = {t.ident: t.name for t in threading.enumerate()}
    own = threading.get_ident()
    main = threading.main_thread().ident
    frames = sys._current_frames()
    lines: List[str] = []
    for ident in sorted(frames, key=lambda i: (i != main, i)):
        if ident == own or names.get(ident) == WATCHDOG_THREAD:
            continue
        lines.append("Thread %s (%s):" % (ident, names.get(ident, "?")))
        lines.extend(line.rstrip("\n") for line in traceback.format_stack(frames[ident]))
        lines.append("")
    return lines


def _faulthandler_dump() -> str:
    try:
        with tempfile.TemporaryFile(mode="w+") as fh:
            faulthandler.dump_traceback(file=fh, all_threads=True)
            fh.seek(0)
            return fh.read()
    except Exception as exc:  # faulthandler needs a real file descriptor; report, never raise
        return "faulthandler unavailable: %r" % (exc,)

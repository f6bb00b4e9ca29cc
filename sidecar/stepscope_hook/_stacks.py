"""Every thread's Python stack, as text: the evidence a hang diagnosis needs."""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import traceback


def format_all_stacks(seconds_since_last_step: float, header: str = "") -> str:
    """Stacks of all threads of this process (sys._current_frames), then faulthandler's own dump."""
    names = {t.ident: t.name for t in threading.enumerate()}
    lines = []
    if header:
        lines.append(header)
    lines.append("pid: %d" % os.getpid())
    lines.append("seconds_since_last_step: %.3f" % seconds_since_last_step)
    lines.append("")
    for ident, frame in sorted(sys._current_frames().items()):
        lines.append("Thread %s (%s):" % (ident, names.get(ident, "?")))
        lines.extend(line.rstrip("\n") for line in traceback.format_stack(frame))
        lines.append("")
    lines.append("--- faulthandler ---")
    lines.append(_faulthandler_dump())
    return "\n".join(lines) + "\n"


def _faulthandler_dump() -> str:
    try:
        with tempfile.TemporaryFile(mode="w+") as fh:
            faulthandler.dump_traceback(file=fh, all_threads=True)
            fh.seek(0)
            return fh.read()
    except Exception as exc:  # faulthandler needs a real file descriptor; report, never raise
        return "faulthandler unavailable: %r" % (exc,)

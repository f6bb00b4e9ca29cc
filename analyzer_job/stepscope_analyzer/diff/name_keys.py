"""Names that compare across processes: what differs between two runs of the same program and not between two
programs is replaced by a placeholder; what identifies the code (function, file, line, op) is kept. Pure.

Two recordings of the same code name their ops alike except for per-process details: memory addresses
(`<built-in method run_backward of torch._C._EngineBase object at 0x7f2e5c1d2a40>`), object ids, process and
thread ids written into a region's name, and temporary folders a script or an extension was loaded from. Compared
raw, such a name reads as one op removed and another added.
"""

from __future__ import annotations

import re
from functools import lru_cache

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # temporary folders: /tmp/tmpab12cd/x.py -> <tmp>/x.py (the file name and line stay)
    (re.compile(r"(?:/private)?(?:/var)?/tmp/[^/\s()<>:]+/"), "<tmp>/"),
    (re.compile(r"/var/folders/[^/\s]+/[^/\s]+/T/[^/\s()<>:]+/"), "<tmp>/"),
    (re.compile(r"[A-Za-z]:\\[^\s]*?\\Temp\\[^\\\s]+\\", re.IGNORECASE), "<tmp>\\\\"),
    # memory addresses: at 0x7f2e..., 0x000055d1...
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "0x…"),
    # process and thread ids written into a name: pid 1234, tid=99, pid_1234, [PID:1234], thread 140234...
    (re.compile(r"\b(pid|tid|thread[ _-]?id|thread|process)([ =:#_-]*)\d+", re.IGNORECASE), r"\1\2…"),
    # object ids: id=140234..., id(140234...), and any run of 9+ digits (ids, addresses in decimal)
    (re.compile(r"\b(id)([ =:(#]*)\d+", re.IGNORECASE), r"\1\2…"),
    (re.compile(r"(?<![\w.])\d{9,}(?![\w.])"), "…"),
)


@lru_cache(maxsize=1 << 16)
def name_key(name: str) -> str:
    """`name` with its per-process details replaced (the same for two runs of the same code)."""
    for pattern, placeholder in _RULES:
        name = pattern.sub(placeholder, name)
    return name

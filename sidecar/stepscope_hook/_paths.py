"""Source paths as the recorded files name them: relative to the job's own folder, to site-packages or to the
standard library, never the machine's absolute layout (its virtualenv, checkout or pod folders).

- `/any/venv/lib/python3.12/site-packages/torch/_tensor.py` -> `site-packages/torch/_tensor.py`
- `/usr/lib/python3.12/multiprocessing/spawn.py` -> `lib/python3.12/multiprocessing/spawn.py`
- a file under one of the job's folders (the working directory, the script's folder, the folder the hook was
  loaded from) -> its path below that folder (`train.py`, `stepscope_hook/_telemetry.py`)
- any other absolute path -> its last two parts (`folder/file.py`)

Stdlib only, Python 3.9 syntax: it runs inside the training process.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import sysconfig
from typing import List, Optional, Sequence

_PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")
_FILE_LINE = re.compile(r'File "([^"]+)"')


def job_roots() -> List[str]:
    """This process's own folders, most specific first: the script's, the working directory, the hook's parent."""
    roots: List[str] = []
    if sys.argv and sys.argv[0] and sys.argv[0] not in ("-c", "-m"):
        roots.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    with contextlib.suppress(OSError):  # the working directory may be gone
        roots.append(os.getcwd())
    roots.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return sorted({r.replace("\\", "/").rstrip("/") for r in roots if r}, key=len, reverse=True)


def stdlib_dir() -> str:
    return (sysconfig.get_paths().get("stdlib") or "").replace("\\", "/").rstrip("/")


def portable_path(filename: str, roots: Sequence[str], stdlib: Optional[str] = None) -> str:
    """`filename` without the machine's layout (see the module's rules); relative names pass unchanged."""
    path = filename.replace("\\", "/")
    if not path.startswith("/") and not re.match(r"^[A-Za-z]:/", path):
        return filename
    for marker in _PACKAGE_DIRS:
        at = path.rfind(marker)
        if at >= 0:
            return path[at + 1 :]
    for root in roots:
        if root and root != "/" and path.startswith(root + "/"):
            return path[len(root) + 1 :]
    if stdlib and path.startswith(stdlib + "/"):
        return "lib/" + os.path.basename(stdlib) + path[len(stdlib) :]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:])


def portable_lines(text: str, roots: Optional[Sequence[str]] = None, stdlib: Optional[str] = None) -> str:
    """`text` (tracebacks, faulthandler dumps) with every `File "..."` path made portable."""
    roots = job_roots() if roots is None else roots
    stdlib = stdlib_dir() if stdlib is None else stdlib
    return _FILE_LINE.sub(lambda m: 'File "%s"' % portable_path(m.group(1), roots, stdlib), text)

"""The report templates' compiled code, kept between runs: compiling report.html.j2 is a large part of the serial
tail of `stepscope analyze` after the ranks are done (`STEPSCOPE_PHASES=1` prints it); loading it back is cheap.

jinja2's FileSystemBytecodeCache keeps it in a directory of the user's own (by default `<tmp>/_jinja2-cache-<uid>`,
mode 0700, refused when another user owns it); an entry is used only while its template's source checksum and the
interpreter version match, so an edited template or a new Python compiles afresh. The cache is an optimisation
only: no usable directory, or one that cannot be read or written (a read-only root filesystem), means compiling
every time, never a failed report.
"""

from __future__ import annotations

import contextlib
import os

import jinja2
from jinja2.bccache import Bucket

CACHE_DIR_ENV = "STEPSCOPE_TEMPLATE_CACHE_DIR"
"""a directory for the compiled templates instead of the default; "off" turns the cache off"""


class _Tolerant(jinja2.FileSystemBytecodeCache):
    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # unreadable or damaged (pickle, marshal, OS errors alike): compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):  # not writable: the next run compiles again
            super().dump_bytecode(bucket)


def bytecode_cache() -> jinja2.BytecodeCache | None:
    """The cache for the report's environment, or None where no directory can be used."""
    directory = os.environ.get(CACHE_DIR_ENV) or None
    if directory == "off":
        return None
    try:
        if directory is not None:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        return _Tolerant(directory)
    except (OSError, RuntimeError):  # RuntimeError: jinja2 found no safe default directory
        return None


__all__ = ["CACHE_DIR_ENV", "bytecode_cache"]

"""The operator's log lines: a timestamp, the level, and `[namespace/name]` of the session each line is about.

kopf logs "Timer 'lifecycle' succeeded." on every tick of every session; that line says nothing (a failure is logged
on its own), so it is dropped unless `--verbose`.
"""

from __future__ import annotations

import logging

import kopf

QUIET_MESSAGES = frozenset({"Timer 'lifecycle' succeeded."})


class DropTickNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in QUIET_MESSAGES


def configure(verbose: bool) -> None:
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.FULL, log_prefix=True)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if not verbose:
        for handler in logging.getLogger().handlers:
            handler.addFilter(DropTickNoise())

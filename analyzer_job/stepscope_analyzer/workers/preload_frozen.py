"""Imported last by the rank workers' fork server (fork_server.PRELOAD), for its side effect: every object the
preload created is frozen (gc.freeze), as the gc module's documentation advises before fork() without exec().

The workers forked from the server then never have the garbage collector walk (and so write to, page by page)
those shared objects, and the server's own exit skips collecting them (which a caller reading the command's
output would wait for: the server holds the command's stdout and stderr). Import it nowhere else."""

from __future__ import annotations

import gc

gc.freeze()

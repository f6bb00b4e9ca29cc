"""stepscope in-process hook: loaded through sitecustomize, captures N steps with torch.profiler.

Public API (pure Python, stdlib + torch, Python 3.9+):
    stepscope_hook.step()       mark a step boundary in a loop without a torch optimizer
    stepscope_hook.activate()   what sitecustomize calls when STEPSCOPE_HOOK_DIR is set
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Optional

from ._runtime import Hook

__all__ = ["Hook", "activate", "current", "step"]

ENV_HOOK_DIR = "STEPSCOPE_HOOK_DIR"
ENV_POLL_SECONDS = "STEPSCOPE_HOOK_POLL_SECONDS"


class _Slot:
    hook: Optional[Hook] = None
    tried = False


def current() -> Optional[Hook]:
    return _Slot.hook


def activate(hook_dir: Optional[str] = None) -> Optional[Hook]:
    """Create the process's hook and register it with torch once torch.optim is imported.

    Returns None (and does nothing) without a hook dir. Never raises.
    """
    _Slot.tried = True
    if _Slot.hook is not None:
        return _Slot.hook
    folder = hook_dir or os.environ.get(ENV_HOOK_DIR, "")
    if not folder:
        return None
    try:
        poll = float(os.environ.get(ENV_POLL_SECONDS, "0.2") or 0.2)
        hook = Hook(folder, poll_seconds=max(poll, 0.01))
        _Slot.hook = hook
        from ._loader import OptimizerImportWatcher

        def _register(module: ModuleType) -> None:
            try:
                register = getattr(module, "register_optimizer_step_post_hook", None)
                if register is not None:
                    hook._handle = register(hook.optimizer_hook)
            except Exception as exc:
                hook.disable("could not register the optimizer hook: %r" % (exc,))

        OptimizerImportWatcher(_register).install()
        return hook
    except Exception:
        _Slot.hook = None
        return None


def step() -> None:
    """Mark a step boundary explicitly (loops without a torch optimizer). Never raises."""
    hook = _Slot.hook
    if hook is None:
        if _Slot.tried:
            return
        hook = activate()
        if hook is None:
            return
    with contextlib.suppress(Exception):
        hook.explicit_step()

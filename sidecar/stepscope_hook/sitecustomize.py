"""stepscope's sitecustomize: copied into the hook folder that PYTHONPATH names on the training container.

1. Chain-loads the sitecustomize the image already had (the next one on sys.path), so nothing of the
   image's own start-up is lost.
2. When STEPSCOPE_HOOK_DIR is set, activates the stepscope hook. torch is not imported here: the hook
   registers itself when the training imports torch.optim. Any failure is swallowed.
"""

from __future__ import annotations

import os
import sys


def _chain_previous() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == __file__:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_stepscope_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _activate() -> None:
    if not os.environ.get("STEPSCOPE_HOOK_DIR"):
        return
    import stepscope_hook

    stepscope_hook.activate()


try:
    _chain_previous()
except Exception as _exc:  # the image's own sitecustomize failed: say so, as Python itself would
    sys.stderr.write("stepscope: the image's sitecustomize failed: %r\n" % (_exc,))
try:
    _activate()
except Exception as _exc:
    sys.stderr.write("stepscope: hook not activated: %r\n" % (_exc,))

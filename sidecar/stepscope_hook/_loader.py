"""Installs the optimizer step post-hook when torch.optim.optimizer is imported, without importing torch."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable, Optional, Sequence

TARGET = "torch.optim.optimizer"


class _ChainLoader(importlib.abc.Loader):
    """Delegates to the real loader, then calls `after(module)` once the module has executed."""

    def __init__(self, inner: Any, after: Callable[[ModuleType], None]) -> None:
        self._inner = inner
        self._after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ... for inspect and tracebacks
        return getattr(self._inner, name)


class OptimizerImportWatcher(importlib.abc.MetaPathFinder):
    """A meta-path finder that only wraps the loader of torch.optim.optimizer, then removes itself."""

    def __init__(self, on_import: Callable[[ModuleType], None]) -> None:
        self._on_import = on_import

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != TARGET:
            return None
        self.uninstall()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ChainLoader(spec.loader, self._on_import)
        return spec

    def install(self) -> None:
        module = sys.modules.get(TARGET)
        if module is not None:
            self._on_import(module)
        elif self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

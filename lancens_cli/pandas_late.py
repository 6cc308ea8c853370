"""pandas loaded when a command uses it, not because Lance was imported.

Importing Lance imports `pyarrow.dataset`, whose module set-up asks pyarrow whether pandas is
installed, and pyarrow answers by importing it: 0.18 to 0.22 s of every command that touches a
table (a third of a cold `ls`, a twentieth of a cold `prune` over 4,000 tables), for a library
most commands never call. A command that does use it (anything on Spark, which converts through
pandas) still needs pyarrow to know pandas when it comes.

So, from start-up on (`install()`), an import hook:

- while Lance's own import runs in a thread, answers that thread's `import pandas` with a
  module that fails to load; pyarrow takes that as "no pandas" and goes on (Lance itself only
  asks whether pandas could be found, and is told yes);
- when pandas is imported later, loads it as usual and then has pyarrow look again (its
  `_pandas_api.compat`, which imports pandas when an earlier look found none). Until then no
  pandas object can exist, so pyarrow's "no pandas" was never a wrong answer: afterwards a
  pandas Series converts as it always does (a Categorical to a dictionary array);
- does nothing once pandas is loaded (and removes itself when it had refused it).

If pyarrow ever lacks that way to look again, pandas is loaded with Lance as before: slower,
never wrong.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _Refused(importlib.abc.Loader):
    """What a thread importing Lance gets for pandas: a module that does not load."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        raise ImportError("pandas is loaded when a command uses it, not with Lance")

    def exec_module(self, module: ModuleType) -> None:  # never reached: create_module fails
        raise ImportError("pandas is loaded when a command uses it, not with Lance")


class _Around(importlib.abc.Loader):
    """The real loader of a module, with a step before and after its code runs."""

    def __init__(
        self, loader: Any, before: Callable[[], None], after: Callable[[bool], None]
    ) -> None:
        self._loader, self._before, self._after = loader, before, after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._before()
        loaded = False
        try:
            self._loader.exec_module(module)
            loaded = True
        finally:
            module.__loader__ = module.__spec__.loader = self._loader  # as if never wrapped
            self._after(loaded)

    def __getattr__(self, name: str) -> Any:  # resources and the like: the real loader's
        return getattr(self._loader, name)


class PandasWhenUsed(importlib.abc.MetaPathFinder):
    """The import hook (see the module's docstring)."""

    def __init__(self) -> None:
        self._lance = threading.local()  # `loading`: this thread is running Lance's import
        self.refused = False  # pyarrow was told there is no pandas

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "lance" and "lance" not in sys.modules:
            return self._wrapped(name, path, target, self._lance_starts, self._lance_ends)
        if name != "pandas":
            return None
        if getattr(self._lance, "loading", False) and _pyarrow_can_look_again():
            real = self._real_spec(name, path, target)
            if real is None:
                return None  # not installed: the usual "No module named pandas"
            self.refused = True
            return importlib.machinery.ModuleSpec(name, _Refused(), origin=real.origin)
        if not self.refused:
            return None  # the usual import
        return self._wrapped(name, path, target, _nothing, self._pandas_loaded)

    def _pandas_loaded(self, loaded: bool) -> None:
        """pandas, refused while Lance loaded, is loaded now: pyarrow looks again, and the
        hook's work is done (a look-up without an import, `find_spec`, changes nothing)."""
        if loaded:
            _pyarrow_look_again()
            self._remove()

    def _lance_starts(self) -> None:
        self._lance.loading = True

    def _lance_ends(self, _loaded: bool) -> None:
        self._lance.loading = False

    def _wrapped(
        self,
        name: str,
        path: Any,
        target: Any,
        before: Callable[[], None],
        after: Callable[[bool], None],
    ) -> Any:
        spec = self._real_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Around(spec.loader, before, after)
        return spec

    def _real_spec(self, name: str, path: Any, target: Any) -> Any:
        """The spec the finders after this one give."""
        finders = sys.meta_path
        after = finders[finders.index(self) + 1 :] if self in finders else finders
        for finder in after:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None

    def _remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _pyarrow_can_look_again() -> bool:
    shim = getattr(sys.modules.get("pyarrow.lib"), "_pandas_api", None)
    return shim is not None and hasattr(type(shim), "compat")


def _nothing() -> None:
    pass


def _pyarrow_look_again() -> None:
    """pyarrow, told earlier that pandas is absent, imports it now that it is loaded. A pandas
    pyarrow refuses (older than it supports) is a warning, as pyarrow's own first look makes
    it, never a failed `import pandas`."""
    try:
        sys.modules["pyarrow.lib"]._pandas_api.compat  # noqa: B018 - the property imports it
    except ImportError as exc:
        warnings.warn(str(exc), stacklevel=2)


def install() -> PandasWhenUsed | None:
    """The hook, first in the import system; none when Lance or pandas is already loaded."""
    if "lance" in sys.modules or "pandas" in sys.modules:
        return None
    hook = PandasWhenUsed()
    sys.meta_path.insert(0, hook)
    return hook

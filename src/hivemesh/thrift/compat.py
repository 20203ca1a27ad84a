"""Work-arounds for the generated HMS Thrift bindings.

Thrift >= 0.14 generates exception classes whose ``__setattr__`` refuses every attribute, including
the ones Python itself sets while an exception propagates (``__traceback__``, ``__cause__``,
``__context__``): ``raise X from e`` and re-raising through ``contextlib`` then fail with
"can't modify immutable instance". :func:`allow_exception_chaining` lets those dunder attributes
through while keeping the declared fields immutable.
"""

from __future__ import annotations

import inspect
from types import ModuleType

from thrift.Thrift import TException

_PYTHON_ATTRS = frozenset({"__traceback__", "__cause__", "__context__", "__suppress_context__", "__notes__"})


def _setattr(self: object, name: str, value: object) -> None:
    if name in _PYTHON_ATTRS:
        BaseException.__setattr__(self, name, value)  # type: ignore[arg-type]
        return
    raise TypeError("can't modify immutable instance")


def allow_exception_chaining(*modules: ModuleType) -> None:
    """Patch every immutable TException subclass in ``modules`` (idempotent)."""
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, TException)
                and cls.__module__ == module.__name__
                and "__setattr__" in cls.__dict__
            ):
                cls.__setattr__ = _setattr  # type: ignore[assignment]

"""One instance of each expensive test peer per test session, whatever order the tests run in.

pytest keeps a single instance of a parametrized session fixture alive at a time: when the order
of tests alternates between ``sqlite`` and ``postgres`` (or ``derby`` and ``postgres``), it tears
the instance down and builds it again, so a JVM peer could start three times in one run. The
parametrized fixtures therefore take their instances from a :class:`SessionResources` cache, which
builds each ``key`` once on first use and closes them all, newest first, when the session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, ExitStack
from typing import Any


class SessionResources:
    """Context managers entered once per key and kept open until :meth:`close`."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, factory: Callable[[], AbstractContextManager[Any]]) -> Any:
        """The value of ``factory()`` entered for ``key``, entered now if this is the first call.

        An exception from ``factory`` or its ``__enter__`` (``pytest.skip`` included) propagates and
        caches nothing, so a later call tries again.
        """
        if key not in self._values:
            self._values[key] = self._stack.enter_context(factory())
        return self._values[key]

    def close(self) -> None:
        """Exit every entered context manager, the last entered first."""
        self._values.clear()
        self._stack.close()

"""The root of hivemesh's own exceptions.

Every exception class hivemesh defines derives from :class:`HivemeshError` (and, where a caller
expects it, from the built-in it refines: ``ConfigError`` is also a ``ValueError``), so a program
using hivemesh as a library can catch everything hivemesh raises with one clause. The HMS API's
own exceptions (``NoSuchObjectException``, ``MetaException``, ...) are Thrift types and stay as
Hive defines them.
"""

from __future__ import annotations

__all__ = ["HivemeshError"]


class HivemeshError(Exception):
    """Base class of the exceptions hivemesh raises."""

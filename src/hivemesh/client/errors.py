"""The errors of hivemesh's HMS clients, and the one table that turns the HMS API's Thrift exceptions
into them.

Every error here derives from :class:`MetastoreClientError` (a :class:`hivemesh.errors.HivemeshError`).
An HMS exception a :class:`hivemesh.client.hms.HmsCalls` call receives is raised as the hivemesh
error :data:`TRANSLATED` names for its class (the original chained as ``__cause__``). Each such
error *also* derives from the Thrift exception it replaces, so code that catches the Thrift class
(``except NoSuchObjectException``), and code that may be handed an in-process metastore raising the
Thrift classes themselves, behaves as before: ``message`` holds the metastore's text, ``str()`` is
the Thrift form (``NoSuchObjectError(message='...')``), and a translated error equals (and hashes as)
the Thrift exception with the same message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from hive_metastore.ttypes import (
    AlreadyExistsException,
    ConfigValSecurityException,
    InvalidInputException,
    InvalidObjectException,
    InvalidOperationException,
    InvalidPartitionException,
    MetaException,
    NoSuchLockException,
    NoSuchObjectException,
    NoSuchTxnException,
    TxnAbortedException,
    TxnOpenException,
    UnknownDBException,
    UnknownPartitionException,
    UnknownTableException,
)

import hivemesh.hive  # noqa: F401 - the HMS exceptions can be chained (raise ... from)
from hivemesh.errors import HivemeshError

__all__ = [
    "TRANSLATED",
    "AlreadyExistsError",
    "ConfigValSecurityError",
    "HmsError",
    "InvalidInputError",
    "InvalidObjectError",
    "InvalidOperationError",
    "InvalidPartitionError",
    "MetaError",
    "MetastoreClientError",
    "NoSuchLockError",
    "NoSuchObjectError",
    "NoSuchTxnError",
    "TxnAbortedError",
    "TxnOpenError",
    "UnknownDBError",
    "UnknownPartitionError",
    "UnknownTableError",
    "error_name",
    "translate",
]


class MetastoreClientError(HivemeshError, RuntimeError):
    """An error of hivemesh's HMS clients: of the client itself (a lock not acquired, a txn already
    ended), or an HMS exception translated at the client's boundary (:class:`HmsError`)."""


class HmsError(MetastoreClientError):
    """An HMS exception the metastore answered, as a hivemesh error. Each subclass also derives from
    its Thrift exception (:attr:`thrift_class`, listed first so its ``message``, ``__init__`` and
    ``__str__`` are the ones used). ``message``: the metastore's text (may be None)."""

    thrift_class: ClassVar[type[Exception]]
    message: str | None

    if TYPE_CHECKING:  # the Thrift class's, which comes first in every subclass

        def __init__(self, message: str | None = None) -> None: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.thrift_class = next(b for b in cls.__mro__[1:] if b.__module__ == "hive_metastore.ttypes")
        # the generated __eq__ requires the other side to be of this very class: equal to the
        # Thrift exception of the same message both ways instead, and hashed alike
        setattr(cls, "__eq__", _equal_as_thrift)  # noqa: B010 - set per subclass, ahead of the Thrift class
        setattr(cls, "__hash__", _hash_as_thrift)  # noqa: B010


def _equal_as_thrift(self: HmsError, other: object) -> bool:
    return isinstance(other, self.thrift_class) and self.__dict__ == other.__dict__


def _hash_as_thrift(self: HmsError) -> int:
    return hash(self.thrift_class) ^ hash((self.message,))


# The Thrift classes are untyped (generated code, no stubs): each subclassing needs its ignore.
class NoSuchObjectError(NoSuchObjectException, HmsError):  # type: ignore[misc]
    """No such database, table, partition, function, ... (NoSuchObjectException)."""


class AlreadyExistsError(AlreadyExistsException, HmsError):  # type: ignore[misc]
    """The object to create exists already (AlreadyExistsException)."""


class InvalidOperationError(InvalidOperationException, HmsError):  # type: ignore[misc]
    """The metastore refuses the change, e.g. dropping a non-empty database or an incompatible
    column change (InvalidOperationException)."""


class InvalidObjectError(InvalidObjectException, HmsError):  # type: ignore[misc]
    """The object sent is not valid, or one it refers to is missing (InvalidObjectException)."""


class MetaError(MetaException, HmsError):  # type: ignore[misc]
    """The metastore failed or refused the call for another reason (MetaException)."""


class UnknownDBError(UnknownDBException, HmsError):  # type: ignore[misc]
    """No such database (UnknownDBException)."""


class UnknownTableError(UnknownTableException, HmsError):  # type: ignore[misc]
    """No such table (UnknownTableException)."""


class UnknownPartitionError(UnknownPartitionException, HmsError):  # type: ignore[misc]
    """No such partition (UnknownPartitionException)."""


class InvalidPartitionError(InvalidPartitionException, HmsError):  # type: ignore[misc]
    """The partition named is not valid (InvalidPartitionException)."""


class InvalidInputError(InvalidInputException, HmsError):  # type: ignore[misc]
    """An argument is not valid (InvalidInputException)."""


class ConfigValSecurityError(ConfigValSecurityException, HmsError):  # type: ignore[misc]
    """The configuration key may not be read or set (ConfigValSecurityException)."""


class NoSuchTxnError(NoSuchTxnException, HmsError):  # type: ignore[misc]
    """No such (open) txn (NoSuchTxnException)."""


class TxnAbortedError(TxnAbortedException, HmsError):  # type: ignore[misc]
    """The txn was aborted, e.g. after its timeout (TxnAbortedException)."""


class TxnOpenError(TxnOpenException, HmsError):  # type: ignore[misc]
    """The lock belongs to a txn still open (TxnOpenException)."""


class NoSuchLockError(NoSuchLockException, HmsError):  # type: ignore[misc]
    """No such lock (NoSuchLockException)."""


TRANSLATED: Mapping[type[BaseException], type[HmsError]] = {
    NoSuchObjectException: NoSuchObjectError,
    AlreadyExistsException: AlreadyExistsError,
    InvalidOperationException: InvalidOperationError,
    InvalidObjectException: InvalidObjectError,
    MetaException: MetaError,
    UnknownDBException: UnknownDBError,
    UnknownTableException: UnknownTableError,
    UnknownPartitionException: UnknownPartitionError,
    InvalidPartitionException: InvalidPartitionError,
    InvalidInputException: InvalidInputError,
    ConfigValSecurityException: ConfigValSecurityError,
    NoSuchTxnException: NoSuchTxnError,
    TxnAbortedException: TxnAbortedError,
    TxnOpenException: TxnOpenError,
    NoSuchLockException: NoSuchLockError,
}
"""HMS (Thrift) exception class -> the hivemesh error it is raised as: every exception of the HMS API."""


def translate(error: BaseException) -> BaseException:
    """The hivemesh error for ``error`` when it is one of the HMS exceptions (:data:`TRANSLATED`; a
    translated error is returned as is), else ``error`` itself. Never raises."""
    cls = TRANSLATED.get(type(error))
    if cls is None:
        return error
    return cls(message=getattr(error, "message", None))


def error_name(error: BaseException) -> str:
    """The name to show for ``error``'s class: the HMS exception's (``NoSuchObjectException``) for a
    translated one, so messages and metric labels read as they did before translation; else the
    class's own name. Never raises."""
    cls = getattr(type(error), "thrift_class", None) if isinstance(error, HmsError) else None
    return (cls or type(error)).__name__

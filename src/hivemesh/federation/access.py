"""Access control of members, enforced before a call is forwarded (Waggle Dance's
``access-control-type`` and ``writable-database-white-list``)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from hive_metastore.ttypes import LockType, MetaException

from hivemesh.errors import HivemeshError
from hivemesh.federation.config import AccessControl
from hivemesh.federation.routes import ROUTES

_READ_PREFIXES = ("get_", "list_", "show_", "check_", "fetch_", "find_", "partition_name_")
_CREATE = frozenset({"create_database", "create_catalog"})
_WRITE_LOCKS = frozenset({LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE})


def is_read(method: str) -> bool:
    """True for calls that only read: safe to retry after a transport error, sent to a primary's
    read-only endpoint, relayable."""
    return method.startswith((*_READ_PREFIXES, "getStatus")) or method == "isPartitionMarkedForEvent"


def is_write(method: str) -> bool:
    """True for calls that change metadata (refused on read-only members): the ``writes`` column
    of :data:`~hivemesh.federation.routes.ROUTES`; a name that is no HMS method, by its prefix."""
    route = ROUTES.get(method)
    if route is not None:
        return route.writes
    return not method.startswith(_READ_PREFIXES)


class AccessDeniedError(HivemeshError):
    """A call a member's access control refuses; ``str()`` is the client's MetaException text."""


class AccessRules:
    """What clients may do on one member.

    - READ_ONLY: reads only (and read txns/locks);
    - READ_AND_WRITE_AND_CREATE: everything;
    - READ_AND_WRITE_ON_DATABASE_WHITELIST: writes in databases matching the white list;
    - READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST: the same, and databases may be created;
      a database created through the proxy becomes writable (for this proxy process).
    Database names are the member's real names.
    """

    def __init__(
        self, member: str, mode: AccessControl, white_list: Iterable[str] = (), what: str = "metastore"
    ):
        self.member = member
        self.mode = mode
        self.what = what
        self._white = [re.compile(p, re.I) for p in white_list]
        self._created: set[str] = set()
        self._lock = threading.Lock()

    @property
    def read_only(self) -> bool:
        """True for READ_ONLY members."""
        return self.mode is AccessControl.READ_ONLY

    def writable(self, db: str | None) -> bool:
        """True if writes to ``db`` are allowed."""
        if self.mode is AccessControl.READ_AND_WRITE_AND_CREATE:
            return True
        if self.mode is AccessControl.READ_ONLY or db is None:
            return False
        name = db.lower()
        return name in self._created or any(p.fullmatch(name) for p in self._white)

    def check(self, method: str, db: str | None, client_db: str | None = None) -> None:
        """Raise AccessDeniedError if ``method`` on ``db`` is not allowed."""
        if not is_write(method):
            return
        shown = client_db or db
        if method in _CREATE:
            if self.mode in (
                AccessControl.READ_AND_WRITE_AND_CREATE,
                AccessControl.READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST,
            ):
                return
            raise AccessDeniedError(
                f"hivemesh proxy: {method} of database '{shown}' refused: {self.what} '{self.member}' "
                f"is {self.mode.value} (databases cannot be created there)"
            )
        if self.writable(db):
            return
        if self.mode is AccessControl.READ_ONLY:
            reason = f"is {self.mode.value}"
        else:
            reason = f"allows writes only to databases matching its writable_database_white_list ({self.mode.value})"
        raise AccessDeniedError(
            f"hivemesh proxy: {method} on database '{shown}' refused: {self.what} '{self.member}' {reason}"
        )

    def check_lock(self, lock_types: Iterable[int], db: str | None, client_db: str | None = None) -> None:
        """Write locks (SHARED_WRITE, EXCL_WRITE, EXCLUSIVE) need write access to ``db``."""
        if any(t in _WRITE_LOCKS for t in lock_types) and not self.writable(db):
            raise AccessDeniedError(
                f"hivemesh proxy: a write lock on database '{client_db or db}' refused: {self.what} "
                f"'{self.member}' is {self.mode.value}"
            )

    def created(self, db: str) -> None:
        """Record a database created through the proxy (writable under *_and_create_on_database_whitelist)."""
        if self.mode is AccessControl.READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST:
            with self._lock:
                self._created.add(db.lower())


def denied(e: AccessDeniedError) -> MetaException:
    """The MetaException a client gets for a refused call."""
    return MetaException(str(e))

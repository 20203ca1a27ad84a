"""Remotes at run time: the links users created, as members the proxy can send calls to.

Links are read from the proxy's store (:class:`~hivemesh.federation.remotes.store.RemoteStore`)
at start and every ``remote_refresh_ms`` (so links added with ``hivemesh remote add`` or by
another proxy on the same PostgreSQL store appear without a restart); links created through this
proxy appear at once. Remotes with the same connection settings share one connector.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
)

from hivemesh.federation.access import AccessRules
from hivemesh.federation.config import AccessControl
from hivemesh.federation.connectors.base import Connector
from hivemesh.federation.factory import glue_catalog, thrift_catalog
from hivemesh.federation.members import Member, MemberIndexes, MemberUnavailableError, Session
from hivemesh.federation.naming import LinkNameMap
from hivemesh.federation.remotes.spec import (
    RemoteError,
    RemoteExistsError,
    RemoteSpec,
    database_remote,
    table_remote,
)
from hivemesh.federation.remotes.store import RemoteStore

log = logging.getLogger(__name__)


def link_connector(spec: RemoteSpec) -> Connector:
    """The connector of a remote: Thrift, SSH-tunnelled Thrift or Glue. Raises RemoteError for
    invalid connector properties."""
    glue = spec.glue_config()
    if glue is not None:
        return glue_catalog(glue)
    return thrift_catalog(spec.uris, spec.ssh_tunnel_config())


def link_member(spec: RemoteSpec, connector: Connector, indexes: MemberIndexes) -> Member:
    """A read-only member for a remote over a (shared) ``connector``, numbered by ``indexes``."""
    name = f"remote:{spec.local_name}"
    names = LinkNameMap(spec.local_db, spec.remote_db, spec.local_table, spec.remote_table)
    access = AccessRules(name, AccessControl.READ_ONLY, what="remote")
    return Member(name, "remote", connector, names, access, index=indexes.of(name), remote_spec=spec)


def check_member(spec: RemoteSpec, member: Member) -> None:
    """Ask the remote's metastore for the linked database or table through ``member``. Raises
    MetaException (unreachable, naming the connector), NoSuchObjectException (no such remote
    object)."""
    session = Session()
    try:
        if spec.remote_table is None:
            member.call(session, "get_database", [spec.remote_db])
        else:
            member.call(session, "get_table", [spec.remote_db, spec.remote_table])
    except MemberUnavailableError as e:
        member.mark_up()  # one failed check is not a verdict on a shared connector
        raise MetaException(f"hivemesh proxy: cannot create {spec.kind} link {spec.local_name}: {e}") from e
    except NoSuchObjectException as e:
        raise NoSuchObjectException(
            f"hivemesh proxy: remote {spec.kind} {spec.remote_name} not found at "
            f"{member.connector.describe()}: {e.message}"
        ) from e
    finally:
        session.close()


def check_remote(spec: RemoteSpec) -> None:
    """:func:`check_member` over a connector of its own, closed afterwards (for a link created
    outside a proxy: ``hivemesh remote add``). Raises RemoteError for invalid connector
    properties, MetaException, NoSuchObjectException."""
    connector = link_connector(spec)
    try:
        check_member(spec, link_member(spec, connector, MemberIndexes()))
    finally:
        connector.close()


class LinkRegistry:
    """Database and table links by local name, as members numbered by ``indexes``. Thread-safe."""

    def __init__(self, store: RemoteStore, indexes: MemberIndexes, refresh_s: float = 5.0):
        self.store = store
        self.indexes = indexes
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._dbs: dict[str, Member] = {}
        self._tables: dict[tuple[str, str], Member] = {}
        self._by_spec: dict[RemoteSpec, Member] = {}
        self._connectors: dict[Any, Connector] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refresh()

    # ------------------------------------------------------------------ lookups
    def database(self, db: str) -> Member | None:
        """The link member of local database ``db`` (lower case), if it is a remote database."""
        return self._dbs.get(db)

    def table(self, db: str, table: str) -> Member | None:
        """The link member of local table ``db.table`` (lower case), if it is a remote table."""
        return self._tables.get((db, table))

    def tables_in(self, db: str) -> list[str]:
        """Local names of the table links in database ``db``."""
        return sorted(t for (d, t) in list(self._tables) if d == db)

    def members(self, tables: bool = False) -> list[Member]:
        """Database link members (and table link members with ``tables``)."""
        out = list(self._dbs.values())
        if tables:
            out += list(self._tables.values())
        return out

    def specs(self) -> list[RemoteSpec]:
        """Every link, ordered by local name."""
        return sorted(self._by_spec, key=lambda s: s.local_name)

    # ------------------------------------------------------------------ parsing
    @staticmethod
    def database_spec(name: str, params: dict[str, str] | None) -> RemoteSpec | None:
        """The remote a CREATE DATABASE asks for (None: an ordinary database).
        Raises InvalidObjectException with the property at fault."""
        try:
            return database_remote(name, params)
        except RemoteError as e:
            raise InvalidObjectException(f"hivemesh proxy: {e}") from e

    @staticmethod
    def table_spec(db: str, table: str, params: dict[str, str] | None) -> RemoteSpec | None:
        """The remote a CREATE TABLE asks for (None: an ordinary table). InvalidObjectException."""
        try:
            return table_remote(db, table, params)
        except RemoteError as e:
            raise InvalidObjectException(f"hivemesh proxy: {e}") from e

    # ------------------------------------------------------------------ changes
    def create(self, spec: RemoteSpec, owner_name: str | None = None) -> Member:
        """Check that the remote object exists (its metastore answers), then store the link.
        Raises MetaException (unreachable), NoSuchObjectException (no such remote object),
        AlreadyExistsException (the local name is taken)."""
        if owner_name and spec.owner is None:
            spec = RemoteSpec(**{**spec.__dict__, "owner": owner_name})
        member = self._member_for(spec)
        check_member(spec, member)
        try:
            stored = self.store.add(spec)
        except RemoteExistsError as e:
            raise AlreadyExistsException(f"hivemesh proxy: {e}") from e
        except RemoteError as e:
            raise InvalidObjectException(f"hivemesh proxy: {e}") from e
        log.info(
            "link %s -> %s (%s) created", stored.local_name, stored.remote_name, member.connector.describe()
        )
        self.refresh()
        return member

    def drop(self, db: str, table: str | None = None) -> bool:
        """Remove a link (the remote object is untouched)."""
        ok = self.store.drop(db, table)
        if ok:
            log.info("link %s removed", db if table is None else f"{db}.{table}")
        self.refresh()
        return ok

    def drop_database_links(self, db: str) -> int:
        """Remove the table links inside local database ``db`` (it was dropped)."""
        n = self.store.drop_database_links(db)
        if n:
            self.refresh()
        return n

    # ------------------------------------------------------------------ refresh
    def _member_for(self, spec: RemoteSpec) -> Member:
        key = spec.connector_key()
        with self._lock:
            connector = self._connectors.get(key)
            if connector is None:
                connector = self._connectors[key] = link_connector(spec)
        return link_member(spec, connector, self.indexes)

    def refresh(self) -> None:
        """Re-read the links from the store (members of unchanged links are kept)."""
        try:
            specs = self.store.list()
        except Exception as e:
            log.warning("cannot read remotes from %s: %s", self.store.display_url, e)
            return
        dbs: dict[str, Member] = {}
        tables: dict[tuple[str, str], Member] = {}
        by_spec: dict[RemoteSpec, Member] = {}
        for spec in specs:
            member = self._by_spec.get(spec)
            if member is None:
                try:
                    member = self._member_for(spec)
                except Exception as e:
                    log.warning("link %s cannot be used: %s", spec.local_name, e)
                    continue
            by_spec[spec] = member
            if spec.local_table is None:
                dbs[spec.local_db] = member
            else:
                tables[(spec.local_db, spec.local_table)] = member
        with self._lock:
            self._dbs, self._tables, self._by_spec = dbs, tables, by_spec
            used = {s.connector_key() for s in by_spec}
            for key in [k for k in self._connectors if k not in used]:
                connector = self._connectors.pop(key)
                try:
                    connector.close()
                except Exception:
                    pass

    def start(self) -> LinkRegistry:
        """Refresh in the background every ``refresh_s``."""

        def run() -> None:
            while not self._stop.wait(self.refresh_s):
                self.refresh()

        self._thread = threading.Thread(target=run, name="remotes-refresh", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop refreshing and close the connectors and the store."""
        self._stop.set()
        with self._lock:
            connectors, self._connectors = list(self._connectors.values()), {}
        for c in connectors:
            try:
                c.close()
            except Exception:
                pass
        self.store.close()

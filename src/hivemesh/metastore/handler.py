"""The local metastore: every implemented HMS method, on a :class:`~hivemesh.metastore.store.Store`.

Methods take and return ``hive_metastore.ttypes`` objects and raise the exceptions Hive's IDL
declares for them (``NoSuchObjectException``, ``AlreadyExistsException``,
``InvalidOperationException``, ``MetaException``, ...), with Hive's messages where clients branch on
them. Methods not defined here are answered by the Thrift layer with
``TApplicationException(UNKNOWN_METHOD)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import cast

import sqlalchemy as sa
from fb303.ttypes import fb_status
from hive_metastore.ttypes import (
    AlreadyExistsException,
    ConfigValSecurityException,
    Database,
    PrincipalType,
)

from hivemesh import __version__
from hivemesh.hive.names import DEFAULT_PARTITION_NAME
from hivemesh.metastore.authorization import AuthorizationMixin
from hivemesh.metastore.catalogs import CatalogMixin
from hivemesh.metastore.conformance import ConformanceMixin, is_meta_conf, meta_conf
from hivemesh.metastore.constraints import ConstraintMixin
from hivemesh.metastore.databases import DEFAULT_DB, DatabaseMixin
from hivemesh.metastore.exchange import ExchangeMixin
from hivemesh.metastore.functions import FunctionMixin
from hivemesh.metastore.locks import LockMixin
from hivemesh.metastore.notifications import NotificationMixin
from hivemesh.metastore.partitions import PartitionMixin
from hivemesh.metastore.requests import RequestFormsMixin
from hivemesh.metastore.schema import CTLGS, DBS
from hivemesh.metastore.statistics import StatisticsMixin
from hivemesh.metastore.store import Store
from hivemesh.metastore.tables import TableMixin
from hivemesh.metastore.truncate import TruncateMixin
from hivemesh.metastore.txns import TxnMixin
from hivemesh.thrift.server import connection

log = logging.getLogger(__name__)

HIVE_VERSION = "4.0.0"  # the Hive IDL this metastore speaks (reported by getVersion)


class LocalMetastore(
    ConformanceMixin,
    CatalogMixin,
    DatabaseMixin,
    TableMixin,
    ExchangeMixin,
    PartitionMixin,
    ConstraintMixin,
    TruncateMixin,
    FunctionMixin,
    StatisticsMixin,
    RequestFormsMixin,
    TxnMixin,
    LockMixin,
    NotificationMixin,
    AuthorizationMixin,
):
    """An HMS-compatible catalog on SQLite or PostgreSQL.

    ``store``: the metadata store. ``warehouse``: root of managed databases and tables (a path or
    URI). ``conf``: extra ``hive.*``/``metastore.*`` values reported by ``get_config_value``.
    Creates the ``hive`` catalog and the ``default`` database when missing. Thread-safe.
    """

    def __init__(
        self,
        store: Store,
        warehouse: str,
        conf: dict[str, str] | None = None,
        txn_timeout_s: float = 300,
        allowed_locations: Sequence[str] = (),
    ):
        super().__init__(store, warehouse, txn_timeout_s, allowed_locations)
        self.started = int(time.time())
        self.conf = {
            "hive.metastore.warehouse.dir": self.warehouse,
            "metastore.warehouse.dir": self.warehouse,
            "hive.txn.timeout": f"{txn_timeout_s:g}s",
            "metastore.txn.timeout": f"{txn_timeout_s:g}s",
            "hive.metastore.uris": "",
            "hive.metastore.client.socket.timeout": "600",
            "hive.exec.default.partition.name": DEFAULT_PARTITION_NAME,
            "metastore.default.partition.name": DEFAULT_PARTITION_NAME,
            **(conf or {}),
        }
        self._bootstrap()

    def _bootstrap(self) -> None:
        """Create the ``hive`` catalog and the ``default`` database when missing (as Hive's
        HMSHandler does at start-up). Servers starting at once on one store may both find the
        catalog missing: the second insert's unique-key violation means the first one made it."""
        try:
            with self.write() as tx:
                if not self._has_default_catalog(tx.conn):
                    tx.conn.execute(
                        CTLGS.insert().values(
                            NAME="hive",
                            DESC="Default catalog for Hive",
                            LOCATION_URI=self.warehouse,
                            CREATE_TIME=self.started,
                        )
                    )
        except sa.exc.IntegrityError:
            with self.read() as conn:
                if not self._has_default_catalog(conn):
                    raise
        if not self._has_default_db():
            self._create_default_db()

    @staticmethod
    def _has_default_catalog(conn: sa.Connection) -> bool:
        return conn.execute(sa.select(CTLGS.c.CTLG_ID).where(CTLGS.c.NAME == "hive")).first() is not None

    def _has_default_db(self) -> bool:
        with self.read() as conn:
            found = conn.execute(
                sa.select(DBS.c.DB_ID).where(DBS.c.CTLG_NAME == "hive", DBS.c.NAME == DEFAULT_DB)
            ).first()
        return found is not None

    def _create_default_db(self) -> None:
        """Create ``default``; another server starting on the same store may create it first
        (AlreadyExistsException, or the unique key's IntegrityError when both passed the check)."""
        default = Database(
            name=DEFAULT_DB,
            description="Default Hive database",
            locationUri=self.warehouse,
            ownerName="public",
            ownerType=PrincipalType.ROLE,
        )
        try:
            self.create_database(default)
        except AlreadyExistsException:
            pass
        except sa.exc.IntegrityError:
            if not self._has_default_db():
                log.exception("creating the %r database failed", DEFAULT_DB)
                raise
        except Exception:
            log.exception("creating the %r database failed", DEFAULT_DB)
            raise

    # ---------------------------------------------------------------- fb303 and session
    def getName(self) -> str:  # noqa: N802 - fb303 names
        """fb303 service name."""
        return "hivemesh"

    def getVersion(self) -> str:  # noqa: N802
        """The Hive version whose API is served (clients pick their calls from the major version)."""
        return HIVE_VERSION

    def getStatus(self) -> int:  # noqa: N802
        """fb303 status: ALIVE."""
        return cast(int, fb_status.ALIVE)  # a generated Thrift enum constant

    def getStatusDetails(self) -> str:  # noqa: N802
        """Human-readable status."""
        return f"hivemesh {__version__} metastore, store {self.store.dialect}"

    def aliveSince(self) -> int:  # noqa: N802
        """Start time, seconds since the epoch."""
        return self.started

    def getCounters(self) -> dict[str, int]:  # noqa: N802
        """fb303 counters (none yet; metrics are on the Prometheus endpoint)."""
        return {}

    def shutdown(self) -> None:
        """fb303 ``shutdown``: Hive clients send it when they close; never stops the server."""
        return None

    def set_ugi(self, user_name: str, group_names: list[str]) -> list[str]:
        """Remember the connection's user and groups; returns the groups (as Hive does). A
        connection authenticated with Kerberos keeps its principal's user (Hive takes the user
        from the SASL identity, not from the client's word), unless it is a proxy user."""
        state = connection()
        if state.principal is None or state.may_impersonate:  # a proxy user names whom it acts for
            state.user = user_name
        state.groups = list(group_names or [])
        return state.groups

    def get_config_value(self, name: str, defaultValue: str) -> str:  # noqa: N803
        """Value of a key known here (the server's settings, then the connection's metaConf
        settings as ``getMetaConf`` answers them), else ``defaultValue`` for ``hive.*``, ``hdfs.*``,
        ``mapred.*`` and ``metastore.*`` keys (Hive's whitelist); ConfigValSecurityException for
        other keys."""
        if name in self.conf:
            return self.conf[name]
        if is_meta_conf(name):
            return meta_conf(name)
        if name.startswith(("hive.", "hdfs.", "mapred.", "metastore.")):
            return defaultValue
        raise ConfigValSecurityException(f"For security reasons, the config key {name} cannot be accessed")

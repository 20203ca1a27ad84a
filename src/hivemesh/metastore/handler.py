"""The local metastore: every implemented HMS method, on a :class:`~hivemesh.metastore.store.Store`.

Methods take and return ``hive_metastore.ttypes`` objects and raise the HMS exceptions clients
branch on (see docs/hms-protocol). Methods not defined here are answered by the Thrift layer with
``TApplicationException(UNKNOWN_METHOD)``.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from fb303.ttypes import fb_status
from hive_metastore.ttypes import (
    Catalog,
    ConfigValSecurityException,
    GetCatalogResponse,
    GetCatalogsResponse,
    NoSuchObjectException,
)

from hivemesh import __version__
from hivemesh.metastore.conformance import ConformanceMixin
from hivemesh.metastore.databases import DEFAULT_DB, DatabaseMixin
from hivemesh.metastore.functions import FunctionMixin
from hivemesh.metastore.locks import LockMixin
from hivemesh.metastore.notifications import NotificationMixin
from hivemesh.metastore.partitions import PartitionMixin
from hivemesh.metastore.requests import RequestFormsMixin
from hivemesh.metastore.schema import CTLGS, DBS
from hivemesh.metastore.statistics import StatisticsMixin
from hivemesh.metastore.store import Store
from hivemesh.metastore.tables import TableMixin
from hivemesh.metastore.txns import TxnMixin
from hivemesh.thrift.server import connection

HIVE_VERSION = "4.0.0"  # the Hive IDL this metastore speaks (reported by getVersion)


class LocalMetastore(
    ConformanceMixin,
    DatabaseMixin,
    TableMixin,
    PartitionMixin,
    FunctionMixin,
    StatisticsMixin,
    RequestFormsMixin,
    TxnMixin,
    LockMixin,
    NotificationMixin,
):
    """An HMS-compatible catalog on SQLite or PostgreSQL.

    ``store``: the metadata store. ``warehouse``: root of managed databases and tables (a path or
    URI). ``conf``: extra ``hive.*``/``metastore.*`` values reported by ``get_config_value``.
    Creates the ``hive`` catalog and the ``default`` database when missing. Thread-safe.
    """

    def __init__(
        self, store: Store, warehouse: str, conf: dict[str, str] | None = None, txn_timeout_s: float = 300
    ):
        super().__init__(store, warehouse, txn_timeout_s)
        self.started = int(time.time())
        self.conf = {
            "hive.metastore.warehouse.dir": self.warehouse,
            "metastore.warehouse.dir": self.warehouse,
            "hive.txn.timeout": f"{txn_timeout_s:g}s",
            "metastore.txn.timeout": f"{txn_timeout_s:g}s",
            "hive.metastore.uris": "",
            "hive.metastore.client.socket.timeout": "600",
            **(conf or {}),
        }
        self._bootstrap()

    def _bootstrap(self) -> None:
        with self.write() as tx:
            if tx.conn.execute(sa.select(CTLGS.c.CTLG_ID).where(CTLGS.c.NAME == "hive")).first() is None:
                tx.conn.execute(
                    CTLGS.insert().values(
                        NAME="hive",
                        DESC="Default catalog for Hive",
                        LOCATION_URI=self.warehouse,
                        CREATE_TIME=self.started,
                    )
                )
            has_default = tx.conn.execute(
                sa.select(DBS.c.DB_ID).where(DBS.c.CTLG_NAME == "hive", DBS.c.NAME == DEFAULT_DB)
            ).first()
        if has_default is None:
            from hive_metastore.ttypes import Database

            try:
                self.create_database(
                    Database(
                        name=DEFAULT_DB,
                        description="Default Hive database",
                        locationUri=self.warehouse,
                        ownerName="public",
                        ownerType=2,
                    )
                )
            except Exception:  # another process created it first
                pass

    # ---------------------------------------------------------------- fb303 and session
    def getName(self) -> str:  # noqa: N802 - fb303 names
        """fb303 service name."""
        return "hivemesh"

    def getVersion(self) -> str:  # noqa: N802
        """The Hive version whose API is served (clients pick their calls from the major version)."""
        return HIVE_VERSION

    def getStatus(self) -> int:  # noqa: N802
        """fb303 status: ALIVE."""
        return fb_status.ALIVE

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
        """Remember the connection's user and groups; returns the groups (as Hive does)."""
        state = connection()
        state.user = user_name
        state.groups = list(group_names or [])
        return state.groups

    def get_config_value(self, name: str, defaultValue: str) -> str:  # noqa: N803
        """Value of a key known here, else ``defaultValue`` for ``hive.*``, ``hdfs.*``, ``mapred.*``
        and ``metastore.*`` keys (Hive's whitelist); ConfigValSecurityException for other keys."""
        if name in self.conf:
            return self.conf[name]
        if name.startswith(("hive.", "hdfs.", "mapred.", "metastore.")):
            return defaultValue
        raise ConfigValSecurityException(f"For security reasons, the config key {name} cannot be accessed")

    # ---------------------------------------------------------------- catalogs
    def get_catalogs(self) -> GetCatalogsResponse:
        """Names of all catalogs (``hive`` at least)."""
        with self.read() as conn:
            return GetCatalogsResponse(
                names=list(conn.execute(sa.select(CTLGS.c.NAME).order_by(CTLGS.c.NAME)).scalars())
            )

    def get_catalog(self, catName: Any) -> GetCatalogResponse:  # noqa: N803
        """GetCatalogRequest -> the catalog; NoSuchObjectException when missing."""
        name = (catName.name if hasattr(catName, "name") else catName or "").lower()
        with self.read() as conn:
            row = conn.execute(sa.select(CTLGS).where(name == CTLGS.c.NAME)).first()
        if row is None:
            raise NoSuchObjectException(f"Catalog {name} not found")
        return GetCatalogResponse(
            catalog=Catalog(
                name=row.NAME, description=row.DESC, locationUri=row.LOCATION_URI, createTime=row.CREATE_TIME
            )
        )

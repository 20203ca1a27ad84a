"""Catalog methods of the HMS interface (Hive 3+): create, get, list, alter, drop.

A catalog groups databases; ``hive`` (the default) is created at start-up. Calls that predate
catalogs name a database of another catalog as ``@cat#db`` (Hive's prependCatalogToDbName; see
:func:`hivemesh.hive.names.parse_db_name`), request structs by their ``catName``. As in Hive 4, a
new catalog gets its ``default`` database at the catalog's location, and a catalog can be dropped
only when that database is all it holds and it is empty.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    Catalog,
    Database,
    GetCatalogResponse,
    GetCatalogsResponse,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
)

from hivemesh import storage
from hivemesh.hive.constants import now_s
from hivemesh.hive.names import DEFAULT_CATALOG, qualify_db_name
from hivemesh.metastore.base import CatalogBase, validate_name
from hivemesh.metastore.schema import CTLGS, DBS, FUNCS, TBLS

DEFAULT_DB = "default"

log = logging.getLogger(__name__)


def _catalog(row: Any) -> Catalog:
    return Catalog(
        name=row.NAME, description=row.DESC, locationUri=row.LOCATION_URI, createTime=row.CREATE_TIME
    )


class CatalogMixin(CatalogBase):
    """HMS catalog calls."""

    @staticmethod
    def catalog_row(conn: sa.Connection, name: str | None) -> sa.Row[Any]:
        """The CTLGS row of catalog ``name`` (any case); NoSuchObjectException ("No catalog x")."""
        cat = (name or "").strip().lower()
        row = conn.execute(sa.select(CTLGS).where(CTLGS.c.NAME == cat)).first()
        if row is None:
            raise NoSuchObjectException(f"No catalog {cat}")
        return row

    def get_catalogs(self) -> GetCatalogsResponse:
        """Names of all catalogs (``hive`` at least), sorted."""
        with self.read() as conn:
            return GetCatalogsResponse(
                names=list(conn.execute(sa.select(CTLGS.c.NAME).order_by(CTLGS.c.NAME)).scalars())
            )

    def get_catalog(self, catName: Any) -> GetCatalogResponse:  # noqa: N803 - Thrift names
        """GetCatalogRequest (or a bare name) -> the catalog; NoSuchObjectException ("No catalog
        x") when missing."""
        name = catName.name if hasattr(catName, "name") else catName
        with self.read() as conn:
            return GetCatalogResponse(catalog=_catalog(self.catalog_row(conn, name)))

    def create_catalog(self, catalog: Any) -> None:
        """CreateCatalogRequest: a new catalog and its ``default`` database (at the catalog's
        location, whose directory is created). AlreadyExistsException ("Catalog x already
        exists"); InvalidObjectException for an invalid name or a catalog without a location."""
        cat: Catalog | None = catalog.catalog if catalog is not None else None
        if cat is None:
            raise InvalidObjectException("CreateCatalogRequest has no catalog")
        name = (cat.name or "").lower()
        with self.read() as conn:
            if conn.execute(sa.select(CTLGS.c.CTLG_ID).where(CTLGS.c.NAME == name)).first() is not None:
                raise self.already_exists(f"Catalog {cat.name} already exists")
        if not validate_name(name):
            raise InvalidObjectException(f"{cat.name} is not a valid catalog name")
        if cat.locationUri is None:
            raise InvalidObjectException("You must specify a path for the catalog")
        location = self.checked_location(cat.locationUri)
        with self.write() as tx:
            tx.conn.execute(
                CTLGS.insert().values(
                    NAME=name, DESC=cat.description, LOCATION_URI=location, CREATE_TIME=now_s()
                )
            )
            self._create_database_tx(
                tx,
                Database(
                    name=DEFAULT_DB,
                    description=f"Default database for catalog {name}",
                    locationUri=location,
                    parameters={},
                    catalogName=name,
                ),
            )

    def alter_catalog(self, rqst: Any) -> None:
        """AlterCatalogRequest: a new description and location (databases stay where they are).
        NoSuchObjectException for a missing catalog; InvalidOperationException when the new
        catalog has another name (renames are not supported, as in Hive)."""
        new: Catalog | None = rqst.newCat
        if new is None:
            raise InvalidOperationException("AlterCatalogRequest has no new catalog")
        with self.write() as tx:
            row = self.catalog_row(tx.conn, rqst.name)
            if new.name is not None and new.name.lower() != row.NAME:
                raise InvalidOperationException("You cannot change a catalog's name")
            values: dict[str, Any] = {}
            if new.description is not None:
                values["DESC"] = new.description
            if new.locationUri:
                values["LOCATION_URI"] = self.checked_location(new.locationUri)
            if values:
                tx.conn.execute(CTLGS.update().where(CTLGS.c.CTLG_ID == row.CTLG_ID).values(**values))

    def drop_catalog(self, catName: Any) -> None:  # noqa: N803 - Thrift names
        """DropCatalogRequest: drop a catalog holding nothing but an empty ``default`` database
        (dropped with it), then delete the catalog's directory, as Hive 4, unless the warehouse or
        another database lies inside it (Hive would delete them too). MetaException for
        ``hive``; NoSuchObjectException ("No catalog x"); InvalidOperationException when it holds
        other databases or its ``default`` database has tables or functions."""
        name = ((catName.name if hasattr(catName, "name") else catName) or "").lower()
        if name == DEFAULT_CATALOG:
            raise MetaException(f"Can not drop {DEFAULT_CATALOG} catalog")
        with self.write() as tx:
            row = self.catalog_row(tx.conn, name)
            dbs = tx.conn.execute(sa.select(DBS.c.DB_ID, DBS.c.NAME).where(DBS.c.CTLG_NAME == row.NAME)).all()
            if any(db.NAME != DEFAULT_DB for db in dbs):
                raise InvalidOperationException(
                    f"There are non-default databases in the catalog {row.NAME} so it cannot be dropped."
                )
            for db in dbs:
                busy = any(
                    tx.conn.execute(sa.select(t.c.DB_ID).where(t.c.DB_ID == db.DB_ID).limit(1)).first()
                    for t in (TBLS, FUNCS)
                )
                if busy:
                    raise InvalidOperationException(
                        f"There are still objects in the default database for catalog {row.NAME}"
                    )
            ids = [db.DB_ID for db in dbs]
            locations = [row.LOCATION_URI] + list(
                tx.conn.execute(sa.select(DBS.c.DB_LOCATION_URI).where(DBS.c.DB_ID.in_(ids))).scalars()
            )
            others = (
                tx.conn.execute(sa.select(DBS.c.DB_LOCATION_URI).where(DBS.c.DB_ID.not_in(ids)))
                .scalars()
                .all()
            )
            # unlike Hive, never delete the warehouse or another database's data with a catalog
            keep = any(
                storage.is_subdir(inner, loc) for loc in locations for inner in [self.warehouse, *others]
            )
            if keep:
                log.warning("catalog %s dropped; its directories hold other data and are kept", row.NAME)
            if dbs:
                self._drop_database_tx(
                    tx, qualify_db_name(row.NAME, DEFAULT_DB), delete_data=not keep, cascade=False
                )
            tx.conn.execute(CTLGS.delete().where(CTLGS.c.CTLG_ID == row.CTLG_ID))
            if not keep:
                location = row.LOCATION_URI
                tx.after_commit.append(lambda: storage.delete_dir(location))

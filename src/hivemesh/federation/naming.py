"""Database and table names between clients and members: prefixes, aliases, mapped databases and
tables, and the database references inside view text."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import overload


def _compile(regexes: Iterable[str] | None) -> list[re.Pattern[str]] | None:
    if regexes is None:
        return None
    return [re.compile(r, re.I) for r in regexes]


class NameMap:
    """How one member's database and table names appear to clients.

    ``prefix``: PREFIXED mode's database prefix ("" for none). ``aliases``: real name -> alias
    (both are accepted from clients; results use the alias). ``mapped_databases``: regexes of the
    exposed real names (None: all). ``mapped_tables``: real database -> regexes of exposed tables.
    """

    def __init__(
        self,
        prefix: str = "",
        aliases: Mapping[str, str] | None = None,
        mapped_databases: Iterable[str] | None = None,
        mapped_tables: Mapping[str, Iterable[str]] | None = None,
    ):
        self.prefix = prefix.lower()
        self.aliases = {k.lower(): v.lower() for k, v in (aliases or {}).items()}
        self.reals = {v: k for k, v in self.aliases.items()}
        self._dbs = _compile(mapped_databases)
        self._tables = {db.lower(): _compile(r) or [] for db, r in (mapped_tables or {}).items()}
        self.renames = bool(self.prefix or self.aliases)
        """False when database names are the same on both sides (results need no rewriting)."""
        self.filters_tables = bool(self._tables)

    def owns(self, client_db: str) -> str | None:
        """The member's real name for ``client_db`` if it carries this member's prefix (or the
        member has none), else None. Aliases are resolved; mapping filters are not applied."""
        name = client_db.lower()
        if self.prefix:
            if not name.startswith(self.prefix):
                return None
            name = name[len(self.prefix) :]
        return self.reals.get(name, name)

    def exposes(self, real_db: str) -> bool:
        """True if ``real_db`` is exposed (matches ``mapped_databases``, by real name or alias)."""
        if self._dbs is None:
            return True
        alias = self.aliases.get(real_db)
        return any(r.fullmatch(real_db) or (alias is not None and r.fullmatch(alias)) for r in self._dbs)

    def db_in(self, client_db: str) -> str:
        """Client name -> real name (prefix stripped, alias resolved)."""
        return self.owns(client_db) or client_db

    def db_out(self, real_db: str) -> str:
        """Real name -> client name (alias, then prefix)."""
        if real_db is None:
            return real_db
        low = real_db.lower()
        return self.prefix + self.aliases.get(low, low)

    def table_visible(self, real_db: str, table: str) -> bool:
        """True unless ``mapped_tables`` lists ``real_db`` and no regex matches ``table``."""
        regexes = self._tables.get(real_db.lower())
        if regexes is None:
            return True
        return any(r.fullmatch(table) for r in regexes)

    def table_in(self, real_db: str, client_table: str) -> str:
        """Client table name -> real table name (a remote table's link renames it)."""
        return client_table

    def table_out(self, real_db: str, real_table: str) -> str:
        """Real table name -> client table name."""
        return real_table


class LinkNameMap(NameMap):
    """Names of a remote (a user-created link): ``local_db`` is ``remote_db`` on the remote side;
    for a table link also ``local_table`` is ``remote_table``."""

    def __init__(
        self, local_db: str, remote_db: str, local_table: str | None = None, remote_table: str | None = None
    ):
        super().__init__()
        self.local_db, self.remote_db = local_db.lower(), remote_db.lower()
        self.local_table = local_table.lower() if local_table else None
        self.remote_table = remote_table.lower() if remote_table else None
        self.renames = True

    def owns(self, client_db: str) -> str | None:
        """The remote database for the link's local database name, else None."""
        return self.remote_db if client_db.lower() == self.local_db else None

    def exposes(self, real_db: str) -> bool:
        """Only the linked remote database is exposed."""
        return real_db.lower() == self.remote_db

    def db_in(self, client_db: str) -> str:
        """Local database name -> remote database name."""
        return self.remote_db if client_db.lower() == self.local_db else client_db

    def db_out(self, real_db: str) -> str:
        """Remote database name -> local database name."""
        if real_db is not None and real_db.lower() == self.remote_db:
            return self.local_db
        return real_db

    def table_visible(self, real_db: str, table: str) -> bool:
        """A table link exposes its remote table only; a database link every table."""
        return self.remote_table is None or table.lower() == self.remote_table

    def table_in(self, real_db: str, client_table: str) -> str:
        """Local table name -> remote table name (table links)."""
        if self.local_table is not None and client_table.lower() == self.local_table:
            return self.remote_table or client_table
        return client_table

    def table_out(self, real_db: str, real_table: str) -> str:
        """Remote table name -> local table name (table links)."""
        if (
            self.remote_table is not None
            and real_table is not None
            and real_table.lower() == self.remote_table
        ):
            return self.local_table or real_table
        return real_table


# a qualifier `name.` or `` `name`. `` in SQL text, not preceded by another name part or a quote
_QUALIFIER = re.compile(r"(?<![\w.`'\"])(`?)([A-Za-z_][A-Za-z0-9_]*)\1(\s*\.)")


@overload
def rewrite_view_text(text: str, rename: Callable[[str], str | None]) -> str: ...
@overload
def rewrite_view_text(text: None, rename: Callable[[str], str | None]) -> None: ...
@overload
def rewrite_view_text(text: str | None, rename: Callable[[str], str | None]) -> str | None: ...
def rewrite_view_text(text: str | None, rename: Callable[[str], str | None]) -> str | None:
    """View SQL with each database qualifier ``db.`` / `` `db`. `` renamed by ``rename(db)``
    (None keeps it). Only names ``rename`` recognises change, so table aliases (``o.id``) and
    column qualifiers stay as written; string literals are not parsed (a literal such as
    ``'sales.x'`` whose first part is a known database name would be renamed too)."""
    if not text:
        return text

    def sub(m: re.Match[str]) -> str:
        new = rename(m.group(2).lower())
        if new is None:
            return m.group(0)
        q = m.group(1)
        return f"{q}{new}{q}{m.group(3)}"

    return _QUALIFIER.sub(sub, text)

"""The quickstart's embedded metastore: hivemesh on SQLite inside the data directory."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: ``hivemesh``: a hivemesh metastore served over Thrift on a free port (the default);
#: ``derby``: no metastore service at all, Spark's own embedded Derby catalog (development fallback).
EmbeddedKind = Literal["hivemesh", "derby"]


@contextmanager
def embedded_metastore(data_dir: Path, kind: EmbeddedKind = "hivemesh") -> Iterator[str | None]:
    """Serve a metastore for the duration of the ``with`` block and yield its ``thrift://`` URI.

    The store is ``data_dir/metastore.db`` (SQLite), the warehouse ``data_dir/warehouse``. With
    ``kind="derby"`` nothing is started and None is yielded (see
    :func:`hivemesh.quickstart.session.quickstart_session`).
    """
    if kind == "derby":
        yield None
        return
    from hivemesh.config import MetastoreConfig
    from hivemesh.metastore.service import MetastoreService

    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    config = MetastoreConfig(
        host="127.0.0.1",
        port=0,
        db=f"sqlite:///{data_dir / 'metastore.db'}",
        warehouse=str(data_dir / "warehouse"),
    )
    service = MetastoreService(config).start()
    log.info("embedded hivemesh metastore at %s (store %s)", service.uri, config.db)
    try:
        yield service.uri
    finally:
        service.stop()
        log.info("embedded hivemesh metastore stopped")

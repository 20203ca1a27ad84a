"""Session fixture for the HDFS mini cluster (:mod:`tests.support.hdfs`): one NameNode and one
DataNode per test session.

Its tests form the ``hdfs`` group (``tests/conftest.py``), so one pytest-xdist worker starts it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.hdfs import HdfsCluster, require_hdfs

__all__ = ["hdfs_cluster"]


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """The session's HDFS (skips without the bundle and a JDK, fails under ``CI=true``)."""
    require_hdfs()
    cluster = HdfsCluster(tmp_path_factory.mktemp("hdfs")).start()
    try:
        yield cluster
    finally:
        cluster.stop()

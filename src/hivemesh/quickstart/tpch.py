"""TPC-H data for the quickstart: the eight tables, their partitioning, and Parquet generation.

The files come from the ``tpchgen-cli`` tool (the ``tpchgen-cli`` wheel ships it as an executable),
one Parquet file per table in ``<data_dir>/tpch/sf<scale>/<table>.parquet``. Generation writes into a
temporary sibling directory and renames it into place, so a directory that exists is complete and a
second run reuses it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from hivemesh.errors import HivemeshError

log = logging.getLogger(__name__)

#: The TPC-H tables, smallest first (the order the quickstart loads them in).
TABLES: tuple[str, ...] = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
    "orders",
    "lineitem",
)

#: Partitioned tables: table -> (partition column, date column whose year it holds).
PARTITIONING: dict[str, tuple[str, str]] = {
    "lineitem": ("l_year", "l_shipdate"),
    "orders": ("o_year", "o_orderdate"),
}


class GenerationError(HivemeshError, RuntimeError):
    """``tpchgen-cli`` is missing, failed, or did not write every table."""


@dataclass(frozen=True)
class GenerateResult:
    """What :func:`generate` did: ``generated`` is False when existing files were reused."""

    directory: Path
    generated: bool
    seconds: float


def scale_dir(data_dir: Path, scale: float) -> Path:
    """Directory of the Parquet files for ``scale``: ``<data_dir>/tpch/sf<scale>`` (e.g. ``sf0.1``)."""
    return Path(data_dir) / "tpch" / f"sf{scale:g}"


def table_file(files_dir: Path, table: str) -> Path:
    """The Parquet file of ``table`` inside a directory written by :func:`generate`."""
    return Path(files_dir) / f"{table}.parquet"


def is_complete(files_dir: Path) -> bool:
    """True when ``files_dir`` holds a Parquet file for every TPC-H table."""
    return all(table_file(files_dir, t).is_file() for t in TABLES)


def row_count(files_dir: Path, table: str) -> int:
    """Number of rows of ``table`` in its Parquet file (read from the footer only)."""
    return pq.ParquetFile(table_file(files_dir, table)).metadata.num_rows


def tpchgen_executable() -> str:
    """Path of ``tpchgen-cli``: next to this Python interpreter (the venv) first, then on ``PATH``."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise GenerationError("tpchgen-cli not found (pip install tpchgen-cli)")
    return found


def generate(scale: float, files_dir: Path, threads: int | None = None) -> GenerateResult:
    """Write the eight TPC-H tables at ``scale`` as Parquet into ``files_dir``, unless already there.

    Returns a :class:`GenerateResult` whose ``generated`` is False when ``files_dir`` was complete
    and nothing ran. Raises :class:`GenerationError` when the generator fails.
    """
    files_dir = Path(files_dir)
    start = time.perf_counter()
    if is_complete(files_dir):
        log.info("TPC-H sf%g: reusing the files in %s", scale, files_dir)
        return GenerateResult(files_dir, False, time.perf_counter() - start)
    if scale <= 0:
        raise GenerationError(f"scale factor must be positive, got {scale}")
    tmp = files_dir.with_name(f"{files_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [
        tpchgen_executable(),
        "parquet",
        "--scale-factor",
        f"{scale:g}",
        "--output-dir",
        str(tmp),
        "--quiet",
    ]
    if threads is not None:
        cmd += ["--num-threads", str(threads)]
    log.info("TPC-H sf%g: running %s", scale, " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise GenerationError(f"tpchgen-cli exited with {proc.returncode}: {proc.stderr.strip()}")
        if not is_complete(tmp):
            missing = [t for t in TABLES if not table_file(tmp, t).is_file()]
            raise GenerationError(f"tpchgen-cli did not write {', '.join(missing)} in {tmp}")
        if files_dir.exists():  # an incomplete earlier attempt
            shutil.rmtree(files_dir)
        tmp.rename(files_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - start
    log.info("TPC-H sf%g: generated %s in %.1f s", scale, files_dir, seconds)
    return GenerateResult(files_dir, True, seconds)

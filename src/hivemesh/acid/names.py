"""File and directory names of Hive ACID tables, and the small binary encodings stored beside them.

Everything here follows Apache Hive (``AcidUtils``, ``BucketCodec``, ``OrcAcidUtils``,
``OrcRecordUpdater``):

* directories inside a table/partition location: ``base_<writeId>[_v<txnId>]``,
  ``delta_<min>_<max>[_<stmtId>][_v<txnId>]`` and ``delete_delta_<min>_<max>[_<stmtId>][_v<txnId>]``
  (write ids and visibility txn ids zero-padded to 7 digits, statement ids to 4; longer numbers are
  written in full);
* data files ``bucket_<NNNNN>`` / ``bucket_<NNNNN>_<attempt>`` inside them, pre-ACID ("original")
  files ``000002_0`` / ``000002_0_copy_1`` outside them;
* the ``bucket`` column value (BucketCodec V1) and the streaming ``_flush_length`` side files;
* partition values as writers put them in partition names (:func:`partition_value_text`).

Pure Python: no Spark, no file system access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from hivemesh.hive.names import DEFAULT_PARTITION_NAME

ACID_VERSION_FILE = "_orc_acid_version"  # in every base/delta dir; text "2" (AcidUtils.OrcAcidVersion)
METADATA_ACID_FILE = "_metadata_acid"  # JSON {"dataFormat":"compacted","thisFileVersion":"0"}
SIDE_FILE_SUFFIX = "_flush_length"  # OrcAcidUtils.DELTA_SIDE_FILE_SUFFIX
ORC_ACID_VERSION = 2  # value of _orc_acid_version and of the ORC user metadata hive.acid.version
ACID_COLUMNS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
INSERT, UPDATE, DELETE = 0, 1, 2  # values of the `operation` column (OrcRecordUpdater)

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
BUCKET_PREFIX = "bucket_"
VISIBILITY_PREFIX = "_v"
COPY_KEYWORD = "_copy_"

BASE, DELTA, DELETE_DELTA = "base", "delta", "delete_delta"  # AcidDir.kind values

# BucketCodec V1 layout of the 32-bit `bucket` column: bits 31-29 version, 27-16 bucket, 11-0 stmt
BUCKET_CODEC_VERSION = 1
MAX_BUCKET_ID = 0xFFF
MAX_STATEMENT_ID = 0xFFF
_CODEC_VERSION_SHIFT = 29
_CODEC_BUCKET_SHIFT = 16

_JAVA_LONG_MAX = 9223372036854775807
_JAVA_LONG_MIN = -9223372036854775808  # base_<Long.MIN_VALUE>: first compaction of a converted table
_JAVA_INT_MAX = 2147483647

_BASE_RE = re.compile(r"base_(-?\d+)(?:_v(\d+))?")
_DELTA_RE = re.compile(r"(delete_delta|delta)_(\d+)_(\d+)(?:_(\d+))?(?:_v(\d+))?")
_BUCKET_RE = re.compile(r"bucket_(\d+)(?:_(\d+))?")
_ORIGINAL_RE = re.compile(r"(\d+)_(\d+)(?:_copy_(\d+))?")


@dataclass(frozen=True)
class AcidDir:
    """A parsed ACID directory name (one child of a table or partition location).

    ``kind``: ``"base"``, ``"delta"`` or ``"delete_delta"``. ``min_write_id``/``max_write_id``: the
    inclusive write-id range (for a base both equal the base write id: the base holds every row
    written at or below it). ``statement_id``: the ``_<stmtId>`` suffix of a delta, None when the
    name has none (minor-compacted or streaming deltas, every base). ``visibility_txn_id``: the
    ``_v<txnId>`` suffix the Hive 4 compactor adds, 0 when absent (``_v0`` means the same).
    ``path``: the directory name (or path) exactly as listed when parsed by :func:`parse_acid_dir`
    (``delta_5_20`` stays ``delta_5_20`` while :attr:`name` is canonical), None when constructed
    directly; it takes no part in equality or hashing.
    """

    kind: str
    min_write_id: int
    max_write_id: int
    statement_id: int | None
    visibility_txn_id: int = 0
    path: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in (BASE, DELTA, DELETE_DELTA):
            raise ValueError(f"unknown ACID directory kind {self.kind!r}")
        if self.kind == BASE and (self.min_write_id != self.max_write_id or self.statement_id is not None):
            raise ValueError("a base has one write id and no statement id")

    @property
    def name(self) -> str:
        """The canonical Hive name (format: Hive ``AcidUtils.baseDir`` / ``deltaSubdir`` /
        ``deleteDeltaSubdir`` plus ``addVisibilitySuffix``): write ids ``%07d``, statement id
        ``%04d`` when not None, ``_v%07d`` only when the visibility txn id is > 0."""
        if self.kind == BASE:
            return base_dir_name(self.max_write_id, self.visibility_txn_id)
        return delta_dir_name(
            self.min_write_id,
            self.max_write_id,
            self.statement_id,
            delete=self.kind == DELETE_DELTA,
            visibility_txn_id=self.visibility_txn_id,
        )

    @property
    def listed_path(self) -> str:
        """:attr:`path` when known, else the canonical :attr:`name`."""
        return self.path if self.path is not None else self.name

    @property
    def has_statement_id(self) -> bool:
        """True when the name carries a statement id (Hive: ``statementId >= 0``)."""
        return self.statement_id is not None

    @property
    def write_id(self) -> int:
        """The base write id (== ``max_write_id``); for a delta its highest write id."""
        return self.max_write_id

    @property
    def is_base(self) -> bool:
        """True for ``base_*``."""
        return self.kind == BASE

    @property
    def is_delta(self) -> bool:
        """True for insert deltas ``delta_*`` (not ``delete_delta_*``)."""
        return self.kind == DELTA

    @property
    def is_delete(self) -> bool:
        """True for ``delete_delta_*``."""
        return self.kind == DELETE_DELTA

    def __str__(self) -> str:
        return self.name


def _long(text: str | None, limit: int = _JAVA_LONG_MAX) -> int | None:
    if text is None:
        return None
    value = int(text)
    return value if _JAVA_LONG_MIN <= value <= limit else None


def parse_acid_dir(name: str) -> AcidDir | None:
    """Parse a directory name such as ``base_0000005_v0000123``, ``delta_0000001_0000001_0000``,
    ``delta_5_20`` or ``delete_delta_10000001_10000001_0000``.

    ``name``: a directory name, or a posix path whose last component is parsed (a trailing ``/``
    is tolerated); it is kept as :attr:`AcidDir.path`. Numbers may be unpadded or longer than the
    usual width. Returns None when the name is not an ACID directory name or a number does not fit
    Hive's type (write/txn ids: Java long; statement id: Java int). The only negative id accepted
    is ``base_-9223372036854775808`` (``Long.MIN_VALUE``, which Hive's first compaction of a
    converted table may write). Source: Hive ``AcidUtils.ParsedBaseLight.parseBase`` / ``ParsedDeltaLight.parse``.
    Never raises.
    """
    path = name.rstrip("/")
    last = path.rsplit("/", 1)[-1]
    m = _BASE_RE.fullmatch(last)
    if m:
        write_id, vis = _long(m.group(1)), _long(m.group(2) or "0")
        if write_id is None or vis is None or (write_id < 0 and write_id != _JAVA_LONG_MIN):
            return None
        return AcidDir(BASE, write_id, write_id, None, vis, path)
    m = _DELTA_RE.fullmatch(last)
    if m:
        lo, hi, vis = _long(m.group(2)), _long(m.group(3)), _long(m.group(5) or "0")
        stmt = _long(m.group(4), _JAVA_INT_MAX)
        if lo is None or hi is None or vis is None or (m.group(4) is not None and stmt is None):
            return None
        return AcidDir(m.group(1), lo, hi, stmt, vis, path)
    return None


def _with_visibility(name: str, visibility_txn_id: int) -> str:
    if visibility_txn_id < 0:
        raise ValueError(f"negative visibility txn id {visibility_txn_id}")
    return f"{name}{VISIBILITY_PREFIX}{visibility_txn_id:07d}" if visibility_txn_id > 0 else name


def base_dir_name(write_id: int, visibility_txn_id: int = 0) -> str:
    """``base_%07d`` plus ``_v%07d`` when ``visibility_txn_id`` > 0, e.g. ``base_0000005_v0000123``
    (format: Hive ``AcidUtils.baseDir`` + ``addVisibilitySuffix``). Raises ValueError for negative
    ids other than ``Long.MIN_VALUE``."""
    if write_id < 0 and write_id != _JAVA_LONG_MIN:
        raise ValueError(f"negative write id {write_id}")
    return _with_visibility(f"{BASE_PREFIX}{write_id:07d}", visibility_txn_id)


def delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = None,
    *,
    delete: bool = False,
    visibility_txn_id: int = 0,
) -> str:
    """``delta_%07d_%07d[_%04d][_v%07d]`` (``delete_delta_...`` with ``delete=True``), e.g.
    ``delta_0000001_0000001_0000`` or ``delta_0000005_0000020_v0000123`` (format: Hive
    ``AcidUtils.deltaSubdir`` / ``deleteDeltaSubdir``; a None or -1 statement id writes no suffix,
    as Hive does for -1). Raises ValueError for negative ids or ``min_write_id > max_write_id``."""
    if min_write_id < 0 or max_write_id < min_write_id:
        raise ValueError(f"bad write id range {min_write_id}..{max_write_id}")
    prefix = DELETE_DELTA_PREFIX if delete else DELTA_PREFIX
    name = f"{prefix}{min_write_id:07d}_{max_write_id:07d}"
    if statement_id is not None and statement_id != -1:
        if statement_id < 0:
            raise ValueError(f"negative statement id {statement_id}")
        name += f"_{statement_id:04d}"
    return _with_visibility(name, visibility_txn_id)


def bucket_file_name(bucket_id: int, attempt: int | None = None) -> str:
    """``bucket_%05d`` or, for a direct-insert task attempt, ``bucket_%05d_<attempt>``
    (``bucket_00000``, ``bucket_00000_3``; format: Hive ``AcidUtils.createBucketFile``).
    Raises ValueError for a negative bucket or attempt."""
    if bucket_id < 0:
        raise ValueError(f"negative bucket id {bucket_id}")
    name = f"{BUCKET_PREFIX}{bucket_id:05d}"
    if attempt is not None:
        if attempt < 0:
            raise ValueError(f"negative attempt {attempt}")
        name += f"_{attempt}"
    return name


def parse_bucket_file(name: str) -> int | None:
    """The bucket id of a data file named ``bucket_N`` or ``bucket_N_<attempt>`` (last path
    component of ``name``); None for side files (``bucket_00000_flush_length``) and any other name.
    Source: Hive ``AcidUtils.BUCKET_PATTERN`` / ``parseBucketId``. Never raises."""
    m = _BUCKET_RE.fullmatch(name.rsplit("/", 1)[-1])
    return _long(m.group(1), _JAVA_INT_MAX) if m else None


def original_file_bucket(name: str) -> int | None:
    """The bucket id of a pre-ACID ("original") file named ``<bucket>_<task attempt>`` or
    ``<bucket>_<attempt>_copy_<n>``: ``000002_0`` and ``000002_0_copy_1`` give 2. None when the last
    path component does not have that form. Source: Hive ``AcidUtils.ORIGINAL_PATTERN`` /
    ``ORIGINAL_PATTERN_COPY`` and ``parseBucketId`` (leading digits). Never raises."""
    m = _ORIGINAL_RE.fullmatch(name.rsplit("/", 1)[-1])
    return _long(m.group(1), _JAVA_INT_MAX) if m else None


def encode_bucket_property(bucket_id: int, statement_id: int = 0) -> int:
    """The ``bucket`` column value (BucketCodec V1): ``1 << 29 | bucket_id << 16 | statement_id``.

    Bucket 0, statement 0 gives 536870912 (0x20000000). ``bucket_id`` and ``statement_id`` are
    12-bit (0..4095); a statement id of -1 ("none" in Hive) is written as 0, as Hive does.
    Raises ValueError for values out of range. Source: Hive ``BucketCodec.V1.encode``.
    """
    if statement_id == -1:
        statement_id = 0
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"bucket id {bucket_id} out of range 0..{MAX_BUCKET_ID}")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id {statement_id} out of range 0..{MAX_STATEMENT_ID}")
    return BUCKET_CODEC_VERSION << _CODEC_VERSION_SHIFT | bucket_id << _CODEC_BUCKET_SHIFT | statement_id


def decode_bucket_property(value: int) -> tuple[int, int]:
    """``(bucket_id, statement_id)`` of a BucketCodec V1 ``bucket`` column value (bits 27-16 and
    11-0; the reserved bits are ignored, as Hive does). Raises ValueError when ``value`` is not a
    non-negative 32-bit int or its version bits (31-29) are not 1 (version-0 values are plain
    bucket numbers of pre-ACID-v2 files). Source: Hive ``BucketCodec.determineVersion`` /
    ``V1.decodeWriterId`` / ``decodeStatementId``."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"bucket property {value} is not a 32-bit value")
    version = (value >> _CODEC_VERSION_SHIFT) & 0b111
    if version != BUCKET_CODEC_VERSION:
        raise ValueError(f"bucket property {value:#x} has codec version {version}, expected 1")
    return (value >> _CODEC_BUCKET_SHIFT) & MAX_BUCKET_ID, value & MAX_STATEMENT_ID


def side_file_name(data_file_name: str) -> str:
    """The streaming side file of a data file: ``bucket_00000`` -> ``bucket_00000_flush_length``
    (works on relative paths too). Source: Hive ``OrcAcidUtils.getSideFile``."""
    return data_file_name + SIDE_FILE_SUFFIX


def is_side_file(name: str) -> bool:
    """True when the last path component ends with ``_flush_length``."""
    return name.rsplit("/", 1)[-1].endswith(SIDE_FILE_SUFFIX)


def encode_flush_length(length: int) -> bytes:
    """One side-file record: ``length`` (bytes of the data file up to a valid ORC footer) as an
    8-byte big-endian signed long (Java ``DataOutputStream.writeLong``). Raises ValueError when
    it does not fit."""
    if not 0 <= length <= _JAVA_LONG_MAX:
        raise ValueError(f"flush length {length} out of range")
    return length.to_bytes(8, "big", signed=True)


def parse_flush_lengths(data: bytes) -> list[int]:
    """Every complete 8-byte big-endian long of a side file, in order; a trailing partial record
    (a flush being written) is ignored. Source: Hive ``OrcAcidUtils.getLastFlushLength``. Never raises."""
    data = bytes(data)
    return [int.from_bytes(data[i : i + 8], "big", signed=True) for i in range(0, len(data) - 7, 8)]


def last_flush_length(data: bytes) -> int | None:
    """The logical length (bytes) of the data file: the last complete record of its side file, or
    None when the side file holds no complete record. A reader reads only that many bytes; with no
    side file at all the whole file is readable. Never raises."""
    lengths = parse_flush_lengths(data)
    return lengths[-1] if lengths else None


def is_hidden(name: str) -> bool:
    """Hive's hidden-file filter (``FileUtils.HIDDEN_FILES_PATH_FILTER``): the last path component
    starts with ``_`` or ``.`` (``_SUCCESS``, ``.bucket_00000.crc``, ``_tmp...``). The ACID markers
    :data:`ACID_VERSION_FILE` and :data:`METADATA_ACID_FILE` are hidden by this rule too: a reader
    looks for them explicitly (see :func:`is_acid_marker`). Side files are not hidden."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    return base.startswith(("_", "."))


def is_acid_marker(name: str) -> bool:
    """True for the ACID marker files :data:`ACID_VERSION_FILE` and :data:`METADATA_ACID_FILE`."""
    return name.rstrip("/").rsplit("/", 1)[-1] in (ACID_VERSION_FILE, METADATA_ACID_FILE)


def partition_value_text(value: Any) -> str:
    """A partition value as Hive stores it: None/"" -> ``__HIVE_DEFAULT_PARTITION__``, booleans
    ``true``/``false``, dates ``yyyy-MM-dd``, timestamps ``yyyy-MM-dd HH:mm:ss[.fff]``, anything
    else ``str()``."""
    if value is None or value == "":
        return DEFAULT_PARTITION_NAME
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return str(value.replace(tzinfo=None))
    if isinstance(value, date):
        return value.isoformat()
    return str(value)

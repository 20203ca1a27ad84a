"""Which files a reader reads for one snapshot of a Hive ACID table or partition.

:func:`select_files` is Hive's ``AcidUtils.getAcidState`` (Hive 3.1 / 4) as one pure function over
a file listing: it chooses the base, the insert and delete deltas and the original (pre-ACID)
files a reader with a given :class:`~hivemesh.hive.txn_lists.ValidWriteIdList` (and optionally a
:class:`~hivemesh.hive.txn_lists.ValidTxnList`) must read, and reports what it left out and why.
The rules, and the places where Hive is subtle, are listed on :func:`select_files`.

Pure Python: no file system access (the caller lists the location recursively), no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hivemesh.acid.names import (
    BASE_PREFIX,
    BUCKET_PREFIX,
    DELETE_DELTA_PREFIX,
    DELTA_PREFIX,
    METADATA_ACID_FILE,
    AcidDir,
    is_side_file,
    original_file_bucket,
    parse_acid_dir,
    parse_bucket_file,
    side_file_name,
)
from hivemesh.errors import HivemeshError
from hivemesh.hive.txn_lists import RangeResponse, ValidTxnList, ValidWriteIdList

JAVA_LONG_MIN = -9223372036854775808  # base_<Long.MIN_VALUE>: first compaction of a converted table


@dataclass(frozen=True)
class ListedFile:
    """One entry of a recursive listing of a table or partition location.

    ``path``: posix path relative to the location, e.g. ``delta_0000001_0000001_0000/bucket_00000``
    or ``000000_0``; a path ending in ``/`` names a directory (use it to report an empty
    directory). ``size``: length in bytes (0 when unknown).
    """

    path: str
    size: int = 0


@dataclass(frozen=True)
class DataFile:
    """A file the reader reads.

    ``path``: relative path as listed. ``size``: bytes, as listed. ``directory``: the base/delta it
    belongs to, None for an original file. ``bucket_id``: from a ``bucket_N[_attempt]`` name or
    an original ``N_M[_copy_K]`` name, None when the name has neither form. ``side_file``:
    relative path of its ``_flush_length`` side file when one is listed (the reader then reads
    only up to the last flushed length, see :func:`hivemesh.acid.names.last_flush_length`).
    ``write_id_filter``: True when the file's directory spans write ids that are not valid in the
    snapshot, so the reader must drop rows (or delete events) whose ``currentTransaction`` is
    not valid (streaming batches with aborted/open transactions).
    """

    path: str
    size: int
    directory: AcidDir | None
    bucket_id: int | None
    side_file: str | None
    write_id_filter: bool = False


@dataclass(frozen=True)
class SnapshotFiles:
    """The result of :func:`select_files`.

    ``base``: the chosen base, or None. ``deltas`` / ``delete_deltas``: the insert and delete
    deltas to read, each in Hive's order (write-id range ascending, wider first, statement id,
    name). ``data_files``: original files (only when there is no base, in row-id order), then the
    base's files, then each delta's files (each directory's files sorted by path).
    ``delete_files``: the delete deltas' files in the same order. ``original_files``: the
    original files read, in row-id order (bucket id, then path; an unknown bucket sorts as -1).
    ``obsolete``: relative paths not read because something read covers them (smaller bases,
    deltas inside a wider delta, original files/top-level directories under a base).
    ``aborted``: directories not read because every write id in them is aborted, an aborted
    INSERT OVERWRITE base, or a directory whose ``_v`` visibility txn is aborted.
    ``ignored``: other ACID directories not read: nothing in them is visible yet (open or above
    the high watermark), their ``_v`` txn is not committed, a base not usable for this snapshot,
    delete deltas of an insert-only table. ``write_id_filtered``: listed paths of the directories
    read whose write-id range holds ids not valid in the snapshot (see
    :attr:`DataFile.write_id_filter`). Every path list is sorted.
    """

    base: AcidDir | None
    deltas: tuple[AcidDir, ...]
    delete_deltas: tuple[AcidDir, ...]
    data_files: tuple[DataFile, ...]
    delete_files: tuple[DataFile, ...]
    original_files: tuple[DataFile, ...]
    obsolete: tuple[str, ...]
    aborted: tuple[str, ...]
    ignored: tuple[str, ...] = ()
    write_id_filtered: tuple[str, ...] = ()

    @property
    def directories(self) -> tuple[AcidDir, ...]:
        """Every directory read: the base (if any), then the insert deltas, then the delete deltas."""
        return ((self.base,) if self.base is not None else ()) + self.deltas + self.delete_deltas

    def needs_write_id_filter(self, directory: AcidDir | None = None) -> bool:
        """True when rows of ``directory`` (default: of any directory read) must be filtered by
        the validity of their ``currentTransaction``; see :attr:`DataFile.write_id_filter`."""
        if directory is None:
            return bool(self.write_id_filtered)
        return directory.listed_path in self.write_id_filtered


class NotEnoughHistoryError(HivemeshError):
    """No base is usable for the snapshot and the oldest base was written by compaction, so the
    history below it is gone (Hive ``ErrorMsg.ACID_NOT_ENOUGH_HISTORY``).

    Message: ``Not enough history available for (<highWatermark>,<minOpen>).  Oldest available
    base: <path>`` (Hive's text, two spaces included), where ``<minOpen>`` is the lowest invalid
    write id of the snapshot or ``x`` when there is none, and ``<path>`` the base's listed path.
    """

    def __init__(self, high_watermark: int, min_open: str, oldest_base: str) -> None:
        self.high_watermark = high_watermark
        self.min_open = min_open
        self.oldest_base = oldest_base
        super().__init__(
            f"Not enough history available for ({high_watermark},{min_open}).  "
            f"Oldest available base: {oldest_base}"
        )


# --- listing -------------------------------------------------------------------------------------


def _split(path: str) -> tuple[tuple[str, ...], bool]:
    """Path components of a relative posix path and whether it names a directory (trailing ``/``)."""
    is_dir = path.endswith("/")
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ValueError(f"listed path leaves the location: {path!r}")
    if not parts:
        raise ValueError(f"empty listed path: {path!r}")
    return parts, is_dir


def _hidden(part: str) -> bool:
    return part.startswith(("_", "."))


@dataclass
class _Dir:
    """Listing of one top-level ACID directory."""

    acid: AcidDir
    files: dict[str, int]  # path relative to the location -> size; non-hidden files at any depth
    has_metadata: bool = False


def _is_acid_dir_name(name: str) -> bool:
    return name.startswith((BASE_PREFIX, DELTA_PREFIX, DELETE_DELTA_PREFIX))


def _group(listing: Iterable[ListedFile | str]) -> tuple[dict[str, _Dir], dict[str, int], set[str]]:
    """Split a listing into top-level ACID directories, original files and top-level non-ACID
    directories. Hidden entries (any component starting with ``_``/``.``) are dropped, except the
    ``_metadata_acid`` marker directly inside an ACID directory, which is recorded."""
    entries: dict[str, tuple[tuple[str, ...], bool, int]] = {}
    for item in listing:
        f = ListedFile(item) if isinstance(item, str) else item
        parts, is_dir = _split(f.path)
        entries["/".join(parts) + ("/" if is_dir else "")] = (parts, is_dir, f.size)

    acid: dict[str, _Dir] = {}
    originals: dict[str, int] = {}
    original_dirs: set[str] = set()
    for parts, is_dir, size in entries.values():
        top = parts[0]
        if _hidden(top):
            continue
        if len(parts) == 1 and not is_dir:
            originals[top] = size  # a top-level file is an original file whatever its name
            continue
        if not _is_acid_dir_name(top):
            original_dirs.add(top)
            if not is_dir and not any(_hidden(p) for p in parts):
                originals["/".join(parts)] = size
            continue
        d = acid.get(top)
        if d is None:
            parsed = parse_acid_dir(top)
            if parsed is None:  # Hive fails on such a directory too (Long.parseLong)
                raise ValueError(f"malformed ACID directory name: {top!r}")
            d = acid[top] = _Dir(parsed, {})
        if is_dir or len(parts) == 1:
            continue
        if len(parts) == 2 and parts[1] == METADATA_ACID_FILE:
            d.has_metadata = True
        elif not any(_hidden(p) for p in parts[1:]):
            d.files["/".join(parts)] = size
    return acid, originals, original_dirs


# --- selection -----------------------------------------------------------------------------------


def _delta_sort_key(d: AcidDir) -> tuple[int, int, int, str]:
    """Hive ``ParsedDeltaLight.compareTo``: min ascending, max descending, statement id (none = -1
    first), then path."""
    stmt = -1 if d.statement_id is None else d.statement_id
    return d.min_write_id, -d.max_write_id, stmt, d.listed_path


def _stmt(d: AcidDir) -> int:
    return -1 if d.statement_id is None else d.statement_id


def select_files(
    listing: Iterable[ListedFile | str],
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None = None,
    *,
    insert_only: bool = False,
    read_metadata: Callable[[str], bytes | str] | None = None,
    skip_empty_originals: bool = False,
) -> SnapshotFiles:
    """Choose the files to read for the snapshot ``write_ids`` (Hive ``AcidUtils.getAcidState``).

    ``listing``: every file under the table/partition location, recursively, as
    :class:`ListedFile` or plain relative paths (``size`` 0). ``write_ids``: the table's
    snapshot. ``txns``: the reader's ValidTxnList, used for ``_v<txnId>`` directory visibility;
    None skips that check (Trino's behaviour; Hive requires it). ``insert_only``: the table is
    insert-only ("MM"): any non-hidden file inside a base/delta (at any depth) is data and delete
    deltas are ignored; otherwise (full ACID) the data files of a directory are its direct
    children named ``bucket_*`` (Hive ``bucketFileFilter``) or ``N_M[_copy_K]`` (raw-format
    directories written by LOAD DATA; the reader tells them apart by their schema).
    ``read_metadata``: called with the relative path of a base's ``_metadata_acid`` to get its
    JSON; the base counts as compacted only when ``dataFormat`` is ``compacted`` (Hive 4 also
    writes ``truncated``). Without it, the file's presence marks a compacted base.
    ``skip_empty_originals``: drop 0-byte original files (Hive's ``ignoreEmptyFiles``; leave it
    off when sizes are unknown).

    Rules, in Hive's order:

    1. A directory with ``_v<txn>`` (txn > 0) not committed in ``txns`` is skipped (``aborted`` if
       that txn is aborted, else ``ignored``).
    2. Bases (processed in name order, like an HDFS listing): a non-compacted (INSERT OVERWRITE)
       base whose write id is aborted goes to ``aborted``. A compacted base (``_v`` > 0 or
       ``_metadata_acid``) is usable when ``writeId < minOpenWriteId and writeId <=
       highWatermark`` (:meth:`ValidWriteIdList.is_valid_base`); an INSERT OVERWRITE base when its
       write id is valid; ``base_<Long.MIN_VALUE>`` always. The highest usable base wins; with two
       bases of the same write id a committed compacted one beats an INSERT OVERWRITE one. Lower
       bases are obsolete. Hive 3.1/4's ``isValidBase`` also accepts any base with ``writeId <=
       minOpenWriteId``, which would expose an in-progress INSERT OVERWRITE at the lowest open
       write id; that shortcut is deliberately not reproduced (same as Trino).
    3. When no base is usable and the oldest non-skipped base is compacted,
       :class:`NotEnoughHistoryError` is raised (an oldest INSERT OVERWRITE base is just ignored).
    4. Deltas and delete deltas whose whole range is aborted go to ``aborted``; those without any
       valid write id are ``ignored``; the rest are sorted (min asc, max desc, statement id with
       none first, name) and walked from the base write id (0 without base): a directory is
       taken when its max exceeds the current write id and ``current+1..max`` holds a valid id
       (current becomes max); when its max equals current and the last taken directory had a
       statement id (per-statement siblings, e.g. ``delta_5_5_0001``); or when it has the same
       range and statement id as the previous one taken (its ``delete_delta`` twin). Everything
       else is obsolete. So a minor-compacted ``delta_5_20`` (no statement id) sorts before and
       covers ``delta_5_5_0000`` .. ``delta_20_20_0000``, and of ``delete_delta_4_4`` and
       ``delete_delta_4_4_0000`` only the first (no statement id) is read.
    5. Original files (outside any ACID directory, including nested non-ACID directories) are
       read only without a base; with a base they and the top-level non-ACID directories are
       obsolete.

    Raises :class:`NotEnoughHistoryError` (rule 3) and ValueError for a malformed listing (a
    ``..`` component, a top-level directory named like an ACID directory that does not parse, or
    a ``_metadata_acid`` with an unknown version).
    """
    acid, originals, original_dirs = _group(listing)
    chooser = _Chooser(acid, write_ids, txns, insert_only, read_metadata)
    base = chooser.best_base()  # rules 1-3
    chosen = chooser.best_deltas(chooser.working_deltas(), base.write_id if base is not None else 0)  # rule 4
    if base is not None:  # rule 5: the top-level original files and non-ACID directories are obsolete
        chooser.obsolete.extend(p for p in originals if "/" not in p)
        chooser.obsolete.extend(original_dirs)
        original_files: tuple[DataFile, ...] = ()
    else:
        original_files = _original_files(originals, skip_empty_originals)
    bases = (base,) if base is not None else ()
    deltas = tuple(d for d in chosen if not d.is_delete)
    delete_deltas = tuple(d for d in chosen if d.is_delete)
    accounted = {d.listed_path for d in (*bases, *chosen)} | set(chooser.obsolete) | set(chooser.aborted)
    return SnapshotFiles(
        base=base,
        deltas=deltas,
        delete_deltas=delete_deltas,
        data_files=original_files + chooser.files_of(*bases, *deltas),
        delete_files=chooser.files_of(*delete_deltas),
        original_files=original_files,
        obsolete=tuple(sorted(set(chooser.obsolete))),
        aborted=tuple(sorted(set(chooser.aborted))),
        ignored=tuple(sorted(n for n in acid if n not in accounted)),
        write_id_filtered=tuple(sorted(d.listed_path for d in chosen if chooser.needs_filter(d))),
    )


class _Chooser:
    """The steps of :func:`select_files` over one grouped listing; directories left out are
    collected in :attr:`obsolete` and :attr:`aborted` as the steps go."""

    def __init__(
        self,
        dirs: dict[str, _Dir],
        write_ids: ValidWriteIdList,
        txns: ValidTxnList | None,
        insert_only: bool,
        read_metadata: Callable[[str], bytes | str] | None,
    ) -> None:
        self.dirs = dirs
        self.write_ids = write_ids
        self.txns = txns
        self.insert_only = insert_only
        self.read_metadata = read_metadata
        self.obsolete: list[str] = []
        self.aborted: list[str] = []

    def visible(self, d: AcidDir) -> bool:
        """Rule 1: the directory's ``_v<txn>`` is committed in the reader's txns (or absent, or
        no txns given); a directory of an aborted txn is recorded as aborted."""
        if self.txns is None or d.visibility_txn_id <= 0:
            return True
        if self.txns.is_txn_valid(d.visibility_txn_id):
            return True
        if self.txns.is_txn_aborted(d.visibility_txn_id):
            self.aborted.append(d.listed_path)
        return False

    def compacted(self, name: str) -> bool:
        """A base written by compaction: it has ``_v<txn>``, or a ``_metadata_acid`` saying so."""
        d = self.dirs[name]
        if d.acid.visibility_txn_id > 0:
            return True
        if not d.has_metadata:
            return False
        if self.read_metadata is None:
            return True
        return _metadata_is_compacted(f"{name}/{METADATA_ACID_FILE}", self.read_metadata)

    def best_base(self) -> AcidDir | None:
        """Rules 2 and 3 (Hive ``processBaseDir``): the highest usable base, lower ones obsolete;
        NotEnoughHistoryError when none is usable and the oldest is compacted."""
        best: AcidDir | None = None
        oldest: AcidDir | None = None
        for name in sorted(n for n, d in self.dirs.items() if d.acid.is_base):
            base = self.dirs[name].acid
            if not self.visible(base):
                continue
            if oldest is None or oldest.write_id > base.write_id:
                oldest = base
            is_compacted = self.compacted(name)
            if self.write_ids.is_write_id_aborted(base.write_id) and not is_compacted:
                self.aborted.append(name)
            elif best is None or best.write_id < base.write_id or self._replaces(best, base, is_compacted):
                if _is_valid_base(base.write_id, is_compacted, self.write_ids):
                    if best is not None:
                        self.obsolete.append(best.listed_path)
                    best = base
            else:
                self.obsolete.append(name)
        if best is None and oldest is not None and self.compacted(oldest.listed_path):
            exceptions = self.write_ids.exceptions
            raise NotEnoughHistoryError(
                self.write_ids.high_watermark, str(exceptions[0]) if exceptions else "x", oldest.listed_path
            )
        return best

    def _replaces(self, best: AcidDir, base: AcidDir, is_compacted: bool) -> bool:
        """Of two bases with one write id, a committed compacted one beats an INSERT OVERWRITE one."""
        return (
            best.write_id == base.write_id
            and is_compacted
            and (self.txns is None or self.txns.is_txn_valid(base.visibility_txn_id))
        )

    def working_deltas(self) -> list[AcidDir]:
        """Rule 4, first half (Hive ``processDeltaDir``): the visible deltas holding a valid write
        id; wholly aborted ones are recorded as aborted (delete deltas of insert-only tables are
        left out)."""
        working = []
        for name in sorted(n for n, d in self.dirs.items() if not d.acid.is_base):
            delta = self.dirs[name].acid
            if (self.insert_only and delta.is_delete) or not self.visible(delta):
                continue
            lo, hi = delta.min_write_id, delta.max_write_id
            if self.write_ids.is_write_id_range_aborted(lo, hi) is RangeResponse.ALL:
                self.aborted.append(name)
            elif self.write_ids.is_write_id_range_valid(lo, hi) is not RangeResponse.NONE:
                working.append(delta)
        return working

    def best_deltas(self, working: list[AcidDir], current: int) -> list[AcidDir]:
        """Rule 4, second half (Hive ``findBestWorkingDeltas``): walk the deltas in Hive's order
        from write id ``current`` (the base's, else 0); the others are obsolete."""
        chosen: list[AcidDir] = []
        last_stmt = -1
        prev: AcidDir | None = None
        for nxt in sorted(working, key=_delta_sort_key):
            if nxt.max_write_id > current:
                valid = self.write_ids.is_write_id_range_valid(current + 1, nxt.max_write_id)
                if valid is not RangeResponse.NONE:
                    chosen.append(nxt)
                    current = nxt.max_write_id
                    last_stmt = _stmt(nxt)
                    prev = nxt
            elif (nxt.max_write_id == current and last_stmt >= 0) or _twin(prev, nxt):
                chosen.append(nxt)
                prev = nxt
            else:
                self.obsolete.append(nxt.listed_path)
        return chosen

    def needs_filter(self, d: AcidDir) -> bool:
        """A delta whose write-id range holds ids not valid in the snapshot (see
        :attr:`DataFile.write_id_filter`)."""
        lo, hi = d.min_write_id, d.max_write_id
        return not d.is_base and self.write_ids.is_write_id_range_valid(lo, hi) is not RangeResponse.ALL

    def files_of(self, *dirs: AcidDir) -> tuple[DataFile, ...]:
        """The data files of these directories, each directory's sorted by path."""
        out: list[DataFile] = []
        for d in dirs:
            listed = self.dirs[d.listed_path].files
            filtered = self.needs_filter(d)
            for path in sorted(listed):
                rel = path.split("/", 1)[1]
                if is_side_file(path) or not self._is_data_file(rel):
                    continue
                bucket = parse_bucket_file(rel)
                if bucket is None:
                    bucket = original_file_bucket(rel)
                side = side_file_name(path)
                out.append(
                    DataFile(path, listed[path], d, bucket, side if side in listed else None, filtered)
                )
        return tuple(out)

    def _is_data_file(self, rel: str) -> bool:
        """Whether a file at ``rel`` inside an ACID directory is data: in insert-only tables any
        (non-hidden) file; in full ACID a direct child named ``bucket_*`` (Hive
        ``bucketFileFilter``) or ``N_M[_copy_K]`` (raw files of LOAD DATA)."""
        if self.insert_only:
            return True
        return "/" not in rel and (rel.startswith(BUCKET_PREFIX) or original_file_bucket(rel) is not None)


def _twin(prev: AcidDir | None, nxt: AcidDir) -> bool:
    """``nxt`` has the range and statement id of the delta taken before it (its delete_delta twin)."""
    return (
        prev is not None
        and nxt.max_write_id == prev.max_write_id
        and nxt.min_write_id == prev.min_write_id
        and _stmt(nxt) == _stmt(prev)
    )


def _original_files(originals: dict[str, int], skip_empty: bool) -> tuple[DataFile, ...]:
    """Rule 5 without a base: the original files in row-id order (bucket id, unknown as -1, then path)."""
    items = []
    for path, size in originals.items():
        if skip_empty and size == 0:
            continue
        bucket = original_file_bucket(path)
        if bucket is None:
            bucket = parse_bucket_file(path)
        items.append(DataFile(path, size, None, bucket, None))
    return tuple(sorted(items, key=lambda f: (-1 if f.bucket_id is None else f.bucket_id, f.path)))


def _is_valid_base(write_id: int, is_compacted: bool, write_ids: ValidWriteIdList) -> bool:
    """Hive ``AcidUtils.isValidBase`` without its ``writeId <= minOpenWriteId`` shortcut (see
    :func:`select_files`, rule 2)."""
    if write_id == JAVA_LONG_MIN:
        return True
    if is_compacted:
        return write_ids.is_valid_base(write_id)
    return write_ids.is_write_id_valid(write_id)


def _metadata_is_compacted(path: str, read_metadata: Callable[[str], bytes | str]) -> bool:
    """Hive ``AcidUtils.MetaDataFile.isCompacted``: ``thisFileVersion`` must be ``0`` (ValueError
    otherwise); compacted when ``dataFormat`` is ``compacted`` (case-insensitive)."""
    raw = read_metadata(path)
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"unreadable {path}: {exc}") from exc
    if not isinstance(meta, dict) or str(meta.get("thisFileVersion", "")).lower() != "0":
        raise ValueError(f"unexpected ACID metadata version in {path}: {text!r}")
    return str(meta.get("dataFormat", "")).lower() == "compacted"

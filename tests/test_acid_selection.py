"""Snapshot file selection of Hive ACID tables (hivemesh.acid.selection): Hive AcidUtils.getAcidState."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemesh.acid.names import AcidDir
from hivemesh.acid.selection import (
    DataFile,
    ListedFile,
    NotEnoughHistoryError,
    SnapshotFiles,
    select_files,
)
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hive-acid"
ALL_VALID = "9223372036854775807"  # minOpen when nothing is open


def wids(text: str) -> ValidWriteIdList:
    return ValidWriteIdList.parse(text)


def fixture_listing(folder: str, prefix: str = "") -> list[ListedFile]:
    root = FIXTURES / folder
    return [
        ListedFile(prefix + p.relative_to(root).as_posix(), p.stat().st_size)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def names(dirs: tuple[AcidDir, ...]) -> list[str]:
    return [d.listed_path for d in dirs]


def paths(files: tuple[DataFile, ...]) -> list[str]:
    return [f.path for f in files]


def base_name(r: SnapshotFiles) -> str | None:
    return None if r.base is None else r.base.listed_path


# --- table-driven directory choice ----------------------------------------------------------------

# (case id, listing, ValidWriteIdList, base, insert deltas, delete deltas, obsolete, aborted, ignored)
CASES = [
    (
        "compacted-base-covers-older-deltas-and-originals",
        [
            "000000_0",
            "000001_0_copy_1",
            "base_0000010/_metadata_acid",
            "base_0000010/bucket_00000",
            "delta_0000001_0000001_0000/bucket_00000",
            "delta_0000005_0000010/bucket_00000",
            "delta_0000011_0000011_0000/bucket_00000",
            "delete_delta_0000011_0000011_0000/bucket_00000",
            "delta_0000012_0000012_0000/bucket_00000",
        ],
        "t:11:" + ALL_VALID + "::",
        "base_0000010",
        ["delta_0000011_0000011_0000"],
        ["delete_delta_0000011_0000011_0000"],
        ["000000_0", "000001_0_copy_1", "delta_0000001_0000001_0000", "delta_0000005_0000010"],
        [],
        ["delta_0000012_0000012_0000"],  # above the high watermark
    ),
    (
        "highest-usable-base-wins-lower-bases-obsolete",
        [
            "base_0000003/bucket_00000",
            "base_0000003/_metadata_acid",
            "base_0000007/bucket_00000",
            "base_0000007/_metadata_acid",
            "base_0000009/bucket_00000",
            "base_0000009/_metadata_acid",
            "delta_0000008_0000008_0000/bucket_00000",
            "delta_0000009_0000009_0000/bucket_00000",
        ],
        "t:9:8:8:",
        "base_0000007",  # base_9 is compacted and not below the open write id 8
        ["delta_0000009_0000009_0000"],
        [],
        ["base_0000003"],
        [],
        ["base_0000009", "delta_0000008_0000008_0000"],
    ),
    (
        "insert-overwrite-base-above-open-write-id-is-usable",
        [
            "base_0000003/_metadata_acid",
            "base_0000003/bucket_00000",
            "delta_0000004_0000004_0000/bucket_00000",
            "base_0000005/bucket_00000",  # INSERT OVERWRITE: no _metadata_acid, no _v
            "delta_0000006_0000006_0000/bucket_00000",
        ],
        "t:6:4:4:",
        "base_0000005",
        ["delta_0000006_0000006_0000"],
        [],
        ["base_0000003"],
        [],
        ["delta_0000004_0000004_0000"],
    ),
    (
        "open-insert-overwrite-base-is-not-read",
        [
            "base_0000003/_metadata_acid",
            "base_0000003/bucket_00000",
            "delta_0000004_0000004_0000/bucket_00000",
            "base_0000005/bucket_00000",
        ],
        # write id 5 is the lowest open one: Hive's isValidBase shortcut (writeId <= minOpen) would
        # read this uncommitted INSERT OVERWRITE; the snapshot rule does not
        "t:5:5:5:",
        "base_0000003",
        ["delta_0000004_0000004_0000"],
        [],
        [],
        [],
        ["base_0000005"],
    ),
    (
        "aborted-insert-overwrite-base",
        [
            "base_0000002/bucket_00000",
            "delta_0000001_0000001_0000/bucket_00000",
            "delta_0000003_0000003_0000/x",
        ],
        "t:3:" + ALL_VALID + "::2",
        None,
        ["delta_0000001_0000001_0000", "delta_0000003_0000003_0000"],
        [],
        [],
        ["base_0000002"],
        [],
    ),
    (
        "compacted-beats-insert-overwrite-of-same-write-id",
        ["base_0000005/bucket_00000", "base_0000005_v0000020/bucket_00000"],
        "t:5:" + ALL_VALID + "::",
        "base_0000005_v0000020",
        [],
        [],
        ["base_0000005"],
        [],
        [],
    ),
    (
        "aborted-deltas",
        [
            "delta_0000001_0000001_0000/bucket_00000",
            "delta_0000002_0000002_0000/bucket_00000",
            "delete_delta_0000002_0000002_0000/bucket_00000",
            "delta_0000003_0000004/bucket_00000",  # streaming batch, both aborted
            "delta_0000005_0000007/bucket_00000",  # streaming batch, 6 aborted
            "delta_0000008_0000008_0000/bucket_00000",  # open
            "delta_0000009_0000009_0000/bucket_00000",  # above the high watermark
        ],
        "t:8:8:8:2,3,4,6",
        None,
        ["delta_0000001_0000001_0000", "delta_0000005_0000007"],
        [],
        [],
        ["delete_delta_0000002_0000002_0000", "delta_0000002_0000002_0000", "delta_0000003_0000004"],
        ["delta_0000008_0000008_0000", "delta_0000009_0000009_0000"],
    ),
    (
        "statement-id-siblings-and-delete-twins",
        [
            "delta_0000003_0000003_0000/bucket_00000",
            "delta_0000003_0000003_0001/bucket_00000",
            "delete_delta_0000003_0000003_0001/bucket_00000",
            "delta_0000003_0000003_0002/bucket_00000",
            "delta_0000004_0000004_0000/bucket_00000",
            "delete_delta_0000004_0000004_0000/bucket_00000",
        ],
        "t:4:" + ALL_VALID + "::",
        None,
        [
            "delta_0000003_0000003_0000",
            "delta_0000003_0000003_0001",
            "delta_0000003_0000003_0002",
            "delta_0000004_0000004_0000",
        ],
        ["delete_delta_0000003_0000003_0001", "delete_delta_0000004_0000004_0000"],
        [],
        [],
        [],
    ),
    (
        "minor-compacted-delta-covers-per-statement-deltas",
        [
            "delta_0000005_0000005_0000/bucket_00000",
            "delta_0000006_0000006_0000/bucket_00000",
            "delta_0000006_0000006_0001/bucket_00000",
            "delete_delta_0000007_0000007_0000/bucket_00000",
            "delta_0000020_0000020_0000/bucket_00000",
            "delta_5_20/bucket_00000",  # unpadded names are Hive-readable too
            "delete_delta_5_20/bucket_00000",
            "delta_0000021_0000021_0000/bucket_00000",
        ],
        "t:21:" + ALL_VALID + "::",
        None,
        ["delta_5_20", "delta_0000021_0000021_0000"],
        ["delete_delta_5_20"],
        [
            "delete_delta_0000007_0000007_0000",
            "delta_0000005_0000005_0000",
            "delta_0000006_0000006_0000",
            "delta_0000006_0000006_0001",
            "delta_0000020_0000020_0000",
        ],
        [],
        [],
    ),
    (
        "narrower-deltas-inside-a-wider-one",
        [
            "delta_0000001_0000010/bucket_00000",
            "delta_0000001_0000005/bucket_00000",
            "delta_0000006_0000010/bucket_00000",
            "delta_0000011_0000015/bucket_00000",
        ],
        "t:15:" + ALL_VALID + "::",
        None,
        ["delta_0000001_0000010", "delta_0000011_0000015"],
        [],
        ["delta_0000001_0000005", "delta_0000006_0000010"],
        [],
        [],
    ),
    (
        "delta-whose-new-ids-are-all-invalid-is-dropped",
        ["base_0000004/_metadata_acid", "base_0000004/bucket_00000", "delta_0000003_0000005/bucket_00000"],
        "t:5:5:5:",
        "base_0000004",
        [],
        [],
        [],
        [],
        ["delta_0000003_0000005"],  # Hive neither reads nor marks it obsolete
    ),
    (
        "hive-walk-takes-any-delta-ending-at-current-after-a-statement-delta",
        ["delta_0000003_0000005_0000/bucket_00000", "delta_0000004_0000005_0000/bucket_00000"],
        "t:5:" + ALL_VALID + "::",
        None,
        ["delta_0000003_0000005_0000", "delta_0000004_0000005_0000"],
        [],
        [],
        [],
        [],
    ),
    (
        "empty-listing",
        [],
        "t:5:" + ALL_VALID + "::",
        None,
        [],
        [],
        [],
        [],
        [],
    ),
    (
        "long-min-base-is-always-usable",
        ["base_-9223372036854775808/bucket_00000", "delta_0000001_0000001_0000/bucket_00000"],
        "t:1:1:1:",
        "base_-9223372036854775808",
        [],
        [],
        [],
        [],
        ["delta_0000001_0000001_0000"],
    ),
]


@pytest.mark.parametrize(
    ("listing", "snapshot", "base", "deltas", "delete_deltas", "obsolete", "aborted", "ignored"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_directory_choice(
    listing: list[str],
    snapshot: str,
    base: str | None,
    deltas: list[str],
    delete_deltas: list[str],
    obsolete: list[str],
    aborted: list[str],
    ignored: list[str],
) -> None:
    r = select_files(listing, wids(snapshot))
    assert base_name(r) == base
    assert names(r.deltas) == deltas
    assert names(r.delete_deltas) == delete_deltas
    assert list(r.obsolete) == obsolete
    assert list(r.aborted) == aborted
    assert list(r.ignored) == ignored
    # the listing order does not matter
    assert select_files(list(reversed(listing)), wids(snapshot)) == r


# --- not enough history -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listing", "snapshot", "message"),
    [
        (
            ["base_0000005_v0000020/bucket_00000", "delta_0000006_0000006_0000/bucket_00000"],
            "t:6:3:3:",
            "Not enough history available for (6,3).  Oldest available base: base_0000005_v0000020",
        ),
        (
            # the reported id is the lowest invalid one, aborted or open (Hive: exceptions[0])
            ["base_0000005/_metadata_acid", "base_0000005/bucket_00000"],
            "t:6:4:4:2",
            "Not enough history available for (6,2).  Oldest available base: base_0000005",
        ),
        (
            ["base_0000005/_metadata_acid", "base_0000007/_metadata_acid"],
            "t:4:" + ALL_VALID + "::",
            "Not enough history available for (4,x).  Oldest available base: base_0000005",
        ),
    ],
)
def test_not_enough_history(listing: list[str], snapshot: str, message: str) -> None:
    with pytest.raises(NotEnoughHistoryError) as info:
        select_files(listing, wids(snapshot))
    assert str(info.value) == message
    assert info.value.oldest_base == message.rsplit(" ", 1)[1]


def test_oldest_insert_overwrite_base_does_not_raise() -> None:
    # an unusable INSERT OVERWRITE base holds all history, Hive just ignores it
    r = select_files(
        ["base_0000005/bucket_00000", "delta_0000001_0000001_0000/bucket_00000"], wids("t:5:5:5:")
    )
    assert r.base is None and names(r.deltas) == ["delta_0000001_0000001_0000"]
    assert r.ignored == ("base_0000005",)


def test_older_usable_base_avoids_the_error() -> None:
    listing = ["base_0000002/_metadata_acid", "base_0000005/_metadata_acid", "delta_0000003_0000003_0000/b"]
    assert base_name(select_files(listing, wids("t:6:4:4:"))) == "base_0000002"


# --- _v visibility --------------------------------------------------------------------------------

VISIBILITY_LISTING = [
    "base_0000002/bucket_00000",
    "delta_0000003_0000003_0000/bucket_00000",
    "delta_0000004_0000004_0000/bucket_00000",
    "delete_delta_0000004_0000004_0000/bucket_00000",
    "delta_0000003_0000004_v0000030/bucket_00000",
    "delete_delta_0000003_0000004_v0000030/bucket_00000",
    "base_0000004_v0000031/bucket_00000",
]


@pytest.mark.parametrize(
    ("txns", "base", "deltas", "delete_deltas", "aborted", "ignored"),
    [
        # both compactor txns open: their output is invisible, the old directories are read
        (
            "40:30:30,31:",
            "base_0000002",
            ["delta_0000003_0000003_0000", "delta_0000004_0000004_0000"],
            ["delete_delta_0000004_0000004_0000"],
            [],
            [
                "base_0000004_v0000031",
                "delete_delta_0000003_0000004_v0000030",
                "delta_0000003_0000004_v0000030",
            ],
        ),
        # minor compaction committed, major still running
        (
            "40:31:31:",
            "base_0000002",
            ["delta_0000003_0000004_v0000030"],
            ["delete_delta_0000003_0000004_v0000030"],
            [],
            ["base_0000004_v0000031"],
        ),
        # major compaction committed: it covers everything
        ("40:" + ALL_VALID + "::", "base_0000004_v0000031", [], [], [], []),
        # major compaction aborted, minor committed
        (
            "40:" + ALL_VALID + "::31",
            "base_0000002",
            ["delta_0000003_0000004_v0000030"],
            ["delete_delta_0000003_0000004_v0000030"],
            ["base_0000004_v0000031"],
            [],
        ),
        # compactor txn above the reader's high watermark
        (
            "29:" + ALL_VALID + "::",
            "base_0000002",
            ["delta_0000003_0000003_0000", "delta_0000004_0000004_0000"],
            ["delete_delta_0000004_0000004_0000"],
            [],
            [
                "base_0000004_v0000031",
                "delete_delta_0000003_0000004_v0000030",
                "delta_0000003_0000004_v0000030",
            ],
        ),
        # no ValidTxnList: visibility is not checked (Trino's behaviour)
        (None, "base_0000004_v0000031", [], [], [], []),
    ],
)
def test_visibility_suffix(
    txns: str | None,
    base: str,
    deltas: list[str],
    delete_deltas: list[str],
    aborted: list[str],
    ignored: list[str],
) -> None:
    r = select_files(
        VISIBILITY_LISTING,
        wids("t:4:" + ALL_VALID + "::"),
        None if txns is None else ValidTxnList.parse(txns),
    )
    assert base_name(r) == base
    assert names(r.deltas) == deltas
    assert names(r.delete_deltas) == delete_deltas
    assert list(r.aborted) == aborted
    assert list(r.ignored) == ignored
    read = {base, *deltas, *delete_deltas}
    everything = {p.split("/")[0] for p in VISIBILITY_LISTING}
    assert set(r.obsolete) == everything - read - set(aborted) - set(ignored)


def test_v0_is_no_suffix() -> None:
    r = select_files(
        ["base_0000004_v0000000/bucket_00000"], wids("t:4:" + ALL_VALID + "::"), ValidTxnList.parse("1:1:1:")
    )
    assert base_name(r) == "base_0000004_v0000000"
    assert r.base == AcidDir("base", 4, 4, None, 0)


def test_invisible_compacted_base_does_not_count_as_oldest() -> None:
    listing = ["base_0000005_v0000040/bucket_00000", "delta_0000001_0000005/bucket_00000"]
    r = select_files(listing, wids("t:6:6:6:"), ValidTxnList.parse("50:40:40:"))
    assert r.base is None and names(r.deltas) == ["delta_0000001_0000005"]


# --- original files ----------------------------------------------------------------------------------

ORIGINALS = [
    ListedFile("000002_0_copy_1", 30),
    ListedFile("000001_0", 20),
    ListedFile("000002_0", 10),
    ListedFile("HIVE_UNION_SUBDIR_1/000000_0", 5),
    ListedFile("000000_0", 7),
    ListedFile("nested/deeper/000001_0", 9),
    ListedFile("000002_0_copy_10", 11),
    ListedFile("000002_0_copy_2", 12),
    ListedFile("notes.txt", 3),
    ListedFile("empty/", 0),
    ListedFile("000003_0", 0),
]


def test_original_files_in_row_id_order_without_base() -> None:
    r = select_files([*ORIGINALS, "delta_0000001_0000001_0000/bucket_00000"], wids("t:1:" + ALL_VALID + "::"))
    assert paths(r.original_files) == [
        "notes.txt",  # unknown bucket sorts as -1
        "000000_0",
        "HIVE_UNION_SUBDIR_1/000000_0",
        "000001_0",
        "nested/deeper/000001_0",
        "000002_0",
        "000002_0_copy_1",
        "000002_0_copy_10",  # Hive orders by path, not by copy number
        "000002_0_copy_2",
        "000003_0",
    ]
    assert [f.bucket_id for f in r.original_files] == [None, 0, 0, 1, 1, 2, 2, 2, 2, 3]
    assert all(
        f.directory is None and f.side_file is None and not f.write_id_filter for f in r.original_files
    )
    assert r.original_files[1].size == 7
    # originals come first in data_files, then the deltas' files
    assert paths(r.data_files) == [*paths(r.original_files), "delta_0000001_0000001_0000/bucket_00000"]
    assert r.obsolete == ()
    empty_skipped = select_files(ORIGINALS, wids("t:1:" + ALL_VALID + "::"), skip_empty_originals=True)
    assert "000003_0" not in paths(empty_skipped.original_files)


def test_original_files_obsolete_with_base() -> None:
    r = select_files([*ORIGINALS, "base_0000001/bucket_00000"], wids("t:1:" + ALL_VALID + "::"))
    assert base_name(r) == "base_0000001"
    assert r.original_files == ()
    assert paths(r.data_files) == ["base_0000001/bucket_00000"]
    # Hive marks the top-level original files and the top-level non-ACID directories obsolete
    assert list(r.obsolete) == sorted(
        [
            "000000_0",
            "000001_0",
            "000002_0",
            "000002_0_copy_1",
            "000002_0_copy_10",
            "000002_0_copy_2",
            "000003_0",
            "HIVE_UNION_SUBDIR_1",
            "empty",
            "nested",
            "notes.txt",
        ]
    )


def test_acid_named_dirs_below_a_non_acid_dir_are_original_files() -> None:
    r = select_files(["sub/delta_0000001_0000001_0000/bucket_00000"], wids("t:1:" + ALL_VALID + "::"))
    assert r.deltas == () and paths(r.original_files) == ["sub/delta_0000001_0000001_0000/bucket_00000"]


# --- files inside directories -------------------------------------------------------------------------


def test_hidden_files_ignored_and_markers_used() -> None:
    listing = [
        "_SUCCESS",
        ".hive-staging_hive_2024/-ext-10000/000000_0",
        "_tmp.delta_0000002_0000002_0000/bucket_00000",
        "base_0000001/_metadata_acid",
        "base_0000001/_orc_acid_version",
        "base_0000001/bucket_00000",
        "base_0000001/.bucket_00000.crc",
        "delta_0000002_0000002_0000/_orc_acid_version",
        "delta_0000002_0000002_0000/bucket_00000",
        "delta_0000002_0000002_0000/_tmp/bucket_00001",
        "delta_0000003_0000003_0000/_orc_acid_version",  # a delta with no data file yet
    ]
    r = select_files(listing, wids("t:3:3:3:"))
    assert base_name(r) == "base_0000001"
    assert names(r.deltas) == ["delta_0000002_0000002_0000"]
    assert paths(r.data_files) == ["base_0000001/bucket_00000", "delta_0000002_0000002_0000/bucket_00000"]
    assert r.obsolete == () and r.ignored == ("delta_0000003_0000003_0000",)
    # _metadata_acid made base_1 compacted: with write id 1 open it is not usable -> no history
    with pytest.raises(NotEnoughHistoryError):
        select_files(listing, wids("t:3:1:1:"))
    without_marker = [p for p in listing if not p.endswith("_metadata_acid")]
    assert base_name(select_files(without_marker, wids("t:3:1:1:"))) is None


def test_full_acid_data_files_and_side_files() -> None:
    listing = [
        ListedFile("delta_0000001_0000003/bucket_00000", 1000),
        ListedFile("delta_0000001_0000003/bucket_00000_flush_length", 16),
        ListedFile("delta_0000001_0000003/bucket_00001", 500),
        ListedFile("delta_0000001_0000003/bucket_00002_flush_length", 8),  # data file not listed
        ListedFile("delta_0000001_0000003/README", 1),  # not a data file name
        ListedFile("delta_0000001_0000003/sub/bucket_00003", 1),  # nested: not read for full ACID
        ListedFile("delta_0000004_0000004_0000/bucket_00000_2", 70),  # direct insert attempt 2
        ListedFile("delta_0000005_0000005_0000/000000_0", 60),  # raw format (LOAD DATA)
        ListedFile("delta_0000005_0000005_0000/bucket_00007.orc", 50),
    ]
    r = select_files(listing, wids("t:5:" + ALL_VALID + "::"))
    assert r.data_files == (
        DataFile(
            "delta_0000001_0000003/bucket_00000",
            1000,
            r.deltas[0],
            0,
            "delta_0000001_0000003/bucket_00000_flush_length",
        ),
        DataFile("delta_0000001_0000003/bucket_00001", 500, r.deltas[0], 1, None),
        DataFile("delta_0000004_0000004_0000/bucket_00000_2", 70, r.deltas[1], 0, None),
        DataFile("delta_0000005_0000005_0000/000000_0", 60, r.deltas[2], 0, None),
        DataFile("delta_0000005_0000005_0000/bucket_00007.orc", 50, r.deltas[2], None, None),
    )
    assert not r.needs_write_id_filter()


def test_write_id_filter_for_streaming_deltas() -> None:
    listing = [
        "delta_0000001_0000004/bucket_00000",
        "delta_0000001_0000004/bucket_00000_flush_length",
        "delta_0000005_0000005_0000/bucket_00000",
        "delete_delta_0000005_0000005_0000/bucket_00000",
    ]
    committed = select_files(listing, wids("t:5:" + ALL_VALID + "::"))
    assert committed.write_id_filtered == () and not committed.needs_write_id_filter()
    # write id 2 aborted, 4 still open: the batch is read, its rows filtered
    partial = select_files(listing, wids("t:5:4:4:2"))
    assert names(partial.deltas) == ["delta_0000001_0000004", "delta_0000005_0000005_0000"]
    assert partial.write_id_filtered == ("delta_0000001_0000004",)
    assert partial.needs_write_id_filter()
    assert partial.needs_write_id_filter(partial.deltas[0])
    assert not partial.needs_write_id_filter(partial.deltas[1])
    assert not partial.needs_write_id_filter(partial.delete_deltas[0])
    assert [f.write_id_filter for f in partial.data_files] == [True, False]
    assert partial.data_files[0].side_file == "delta_0000001_0000004/bucket_00000_flush_length"


def test_directories_and_delete_files() -> None:
    listing = [
        "base_0000002/bucket_00001",
        "base_0000002/bucket_00000",
        "delete_delta_0000003_0000003_0000/bucket_00001",
        "delete_delta_0000003_0000003_0000/bucket_00000",
        "delta_0000003_0000003_0000/bucket_00000",
    ]
    r = select_files(listing, wids("t:3:" + ALL_VALID + "::"))
    assert names(r.directories) == [
        "base_0000002",
        "delta_0000003_0000003_0000",
        "delete_delta_0000003_0000003_0000",
    ]
    assert paths(r.data_files) == [
        "base_0000002/bucket_00000",
        "base_0000002/bucket_00001",
        "delta_0000003_0000003_0000/bucket_00000",
    ]
    assert paths(r.delete_files) == [
        "delete_delta_0000003_0000003_0000/bucket_00000",
        "delete_delta_0000003_0000003_0000/bucket_00001",
    ]
    assert [f.bucket_id for f in r.delete_files] == [0, 1]
    assert all(f.directory is r.delete_deltas[0] for f in r.delete_files)


def test_insert_only_table() -> None:
    listing = [
        "000000_0",
        "delta_0000001_0000001_0000/000000_0",
        "delta_0000001_0000001_0000/HIVE_UNION_SUBDIR_1/000000_0",
        "delta_0000001_0000001_0000/HIVE_UNION_SUBDIR_2/000001_0",
        "delta_0000001_0000001_0000/_SUCCESS",
        "delta_0000002_0000002_0000/part-00000-abc.snappy.parquet",
        "delta_0000003_0000003_0000/000000_0",
        "delete_delta_0000002_0000002_0000/bucket_00000",
    ]
    r = select_files(listing, wids("t:3:3:3:"), insert_only=True)
    assert r.base is None and r.delete_deltas == () and r.delete_files == ()
    assert names(r.deltas) == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert paths(r.original_files) == ["000000_0"]
    assert paths(r.data_files) == [
        "000000_0",
        "delta_0000001_0000001_0000/000000_0",
        "delta_0000001_0000001_0000/HIVE_UNION_SUBDIR_1/000000_0",
        "delta_0000001_0000001_0000/HIVE_UNION_SUBDIR_2/000001_0",
        "delta_0000002_0000002_0000/part-00000-abc.snappy.parquet",
    ]
    assert [f.bucket_id for f in r.data_files] == [0, 0, 0, 1, None]
    assert r.ignored == ("delete_delta_0000002_0000002_0000", "delta_0000003_0000003_0000")
    # an INSERT OVERWRITE base of an insert-only table hides the originals and older deltas
    r2 = select_files([*listing, "base_0000003/000000_0"], wids("t:3:" + ALL_VALID + "::"), insert_only=True)
    assert base_name(r2) == "base_0000003" and r2.deltas == ()
    assert paths(r2.data_files) == ["base_0000003/000000_0"]
    assert "000000_0" in r2.obsolete


def test_metadata_reader_distinguishes_truncate_bases() -> None:
    listing = ["base_0000005/_metadata_acid", "base_0000005/bucket_00000", "delta_0000006_0000006_0000/b"]
    meta = {"base_0000005/_metadata_acid": '{"thisFileVersion":"0","dataFormat":"truncated"}'}
    # a truncate base is treated like INSERT OVERWRITE: usable once its write id is committed
    r = select_files(listing, wids("t:6:6:6:"), read_metadata=meta.__getitem__)
    assert base_name(r) == "base_0000005"
    with pytest.raises(NotEnoughHistoryError):
        select_files(
            listing,
            wids("t:6:4:4:"),
            read_metadata=lambda p: b'{"dataFormat":"compacted","thisFileVersion":"0"}',
        )
    assert (
        base_name(select_files(listing, wids("t:6:4:4:"), read_metadata=meta.__getitem__)) == "base_0000005"
    )
    with pytest.raises(ValueError, match="version"):
        select_files(
            listing,
            wids("t:6:6:6:"),
            read_metadata=lambda p: '{"thisFileVersion":"1","dataFormat":"compacted"}',
        )
    with pytest.raises(ValueError):
        select_files(listing, wids("t:6:6:6:"), read_metadata=lambda p: "not json")


@pytest.mark.parametrize(
    "listing",
    [
        ["../other/bucket_00000"],
        ["delta_x_y/bucket_00000"],
        ["base_0000001.tmp/bucket_00000"],
        ["delete_delta_1/"],
        [""],
    ],
)
def test_malformed_listing(listing: list[str]) -> None:
    with pytest.raises(ValueError):
        select_files(listing, wids("t:5:" + ALL_VALID + "::"))


def test_top_level_file_with_acid_name_is_an_original_file() -> None:
    r = select_files(["delta_0000001_0000001_0000", "./base_5"], wids("t:5:" + ALL_VALID + "::"))
    assert r.base is None and r.deltas == ()
    assert paths(r.original_files) == ["base_5", "delta_0000001_0000001_0000"]


# --- real Hive-written fixture folders -------------------------------------------------------------


def test_fixture_fullacid_delete_delta_test() -> None:
    listing = fixture_listing("fullacid_delete_delta_test")
    r = select_files(listing, wids("t:7:" + ALL_VALID + "::"))
    # Hive sorts delete_delta_4_4 (no statement id = -1) before delete_delta_4_4_0000 and treats it
    # like a minor-compacted delta: the per-statement twin is obsolete (AcidUtils.findBestWorkingDeltas)
    assert names(r.delete_deltas) == ["delete_delta_0000004_0000004", "delete_delta_0000007_0000007_0000"]
    assert r.obsolete == ("delete_delta_0000004_0000004_0000",)
    assert paths(r.delete_files) == [
        "delete_delta_0000004_0000004/bucket_00000",
        "delete_delta_0000007_0000007_0000/bucket_00000",
    ]
    assert all(f.size > 0 and f.bucket_id == 0 for f in r.delete_files)
    assert r.data_files == () and r.base is None
    # write id 7 not yet visible; write id 4 aborted
    assert names(select_files(listing, wids("t:6:" + ALL_VALID + "::")).delete_deltas) == [
        "delete_delta_0000004_0000004"
    ]
    aborted4 = select_files(listing, wids("t:7:" + ALL_VALID + "::4"))
    assert names(aborted4.delete_deltas) == ["delete_delta_0000007_0000007_0000"]
    assert aborted4.aborted == ("delete_delta_0000004_0000004", "delete_delta_0000004_0000004_0000")


def test_fixture_dummy_id_data_orc() -> None:
    listing = fixture_listing("dummy_id_data_orc")
    r = select_files(listing, wids("t:10000001:" + ALL_VALID + "::"))
    assert paths(r.original_files) == [
        "000000_0",
        "000001_0",
        "000002_0",
        "000002_0_copy_1",
        "000002_0_copy_2",
    ]
    assert [f.bucket_id for f in r.original_files] == [0, 1, 2, 2, 2]
    assert paths(r.data_files) == paths(r.original_files)
    assert names(r.delete_deltas) == ["delete_delta_10000001_10000001_0000"]
    assert r.delete_deltas[0] == AcidDir("delete_delta", 10000001, 10000001, 0)
    # before the delete was committed only the originals are read
    early = select_files(listing, wids("t:10000000:" + ALL_VALID + "::"))
    assert early.delete_deltas == () and early.ignored == ("delete_delta_10000001_10000001_0000",)


def test_fixture_nation_table_with_originals_and_deltas() -> None:
    originals = select_files(
        fixture_listing("fullacidNationTableWithOriginalFiles"), wids("t:10000001:" + ALL_VALID + "::")
    )
    assert paths(originals.original_files) == ["000000_0"]
    assert names(originals.delete_deltas) == ["delete_delta_10000001_10000001_0000"]
    # the nation insert file placed in delta_2_2 plus the two delete deltas of write ids 3 and 4
    listing = [
        *fixture_listing("nationFile25kRowsSortedOnNationKey", "delta_0000002_0000002_0000/"),
        *fixture_listing("nation_delete_deltas"),
    ]
    r = select_files(listing, wids("t:4:" + ALL_VALID + "::"))
    assert paths(r.data_files) == ["delta_0000002_0000002_0000/bucket_00000"]
    assert names(r.delete_deltas) == [
        "delete_delta_0000003_0000003_0000",
        "delete_delta_0000004_0000004_0000",
    ]
    only3 = select_files(listing, wids("t:4:4:4:"))
    assert names(only3.delete_deltas) == ["delete_delta_0000003_0000003_0000"]


def test_fixture_impala_streaming_file_as_open_batch() -> None:
    size = (FIXTURES / "impala" / "streaming.orc").stat().st_size
    listing = [ListedFile("delta_0000001_0000002/bucket_00000", size)]
    done = select_files(listing, wids("t:2:" + ALL_VALID + "::"))
    assert not done.needs_write_id_filter() and done.data_files[0].size == size
    open2 = select_files(listing, wids("t:2:2:2:"))
    assert names(open2.deltas) == ["delta_0000001_0000002"] and open2.needs_write_id_filter()

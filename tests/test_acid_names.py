"""Hive ACID file and directory names, BucketCodec and side files (hivemesh.acid.names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemesh.acid.names import (
    ACID_COLUMNS,
    ACID_VERSION_FILE,
    DELETE,
    INSERT,
    METADATA_ACID_FILE,
    ORC_ACID_VERSION,
    SIDE_FILE_SUFFIX,
    UPDATE,
    AcidDir,
    base_dir_name,
    bucket_file_name,
    decode_bucket_property,
    delta_dir_name,
    encode_bucket_property,
    encode_flush_length,
    is_acid_marker,
    is_hidden,
    is_side_file,
    last_flush_length,
    original_file_bucket,
    parse_acid_dir,
    parse_bucket_file,
    parse_flush_lengths,
    side_file_name,
)

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hive-acid"


def test_constants() -> None:
    assert ACID_VERSION_FILE == "_orc_acid_version"
    assert METADATA_ACID_FILE == "_metadata_acid"
    assert SIDE_FILE_SUFFIX == "_flush_length"
    assert ORC_ACID_VERSION == 2
    assert ACID_COLUMNS == (
        "operation",
        "originalTransaction",
        "bucket",
        "rowId",
        "currentTransaction",
        "row",
    )
    assert (INSERT, UPDATE, DELETE) == (0, 1, 2)


@pytest.mark.parametrize(
    ("name", "expected", "canonical"),
    [
        ("base_0000005", AcidDir("base", 5, 5, None), "base_0000005"),
        ("base_0000005_v0000123", AcidDir("base", 5, 5, None, 123), "base_0000005_v0000123"),
        ("base_5_v0", AcidDir("base", 5, 5, None, 0), "base_0000005"),
        ("base_12345678", AcidDir("base", 12345678, 12345678, None), "base_12345678"),
        ("delta_0000001_0000001_0000", AcidDir("delta", 1, 1, 0), "delta_0000001_0000001_0000"),
        ("delta_0000001_0000001_0003", AcidDir("delta", 1, 1, 3), "delta_0000001_0000001_0003"),
        ("delta_5_20", AcidDir("delta", 5, 20, None), "delta_0000005_0000020"),
        ("delta_0000001_0000002", AcidDir("delta", 1, 2, None), "delta_0000001_0000002"),
        (
            "delta_0000005_0000020_v0000123",
            AcidDir("delta", 5, 20, None, 123),
            "delta_0000005_0000020_v0000123",
        ),
        (
            "delta_0000005_0000005_0002_v0000009",
            AcidDir("delta", 5, 5, 2, 9),
            "delta_0000005_0000005_0002_v0000009",
        ),
        (
            "delete_delta_10000001_10000001_0000",
            AcidDir("delete_delta", 10000001, 10000001, 0),
            "delete_delta_10000001_10000001_0000",
        ),
        ("delete_delta_0000004_0000004", AcidDir("delete_delta", 4, 4, None), "delete_delta_0000004_0000004"),
        (
            "delete_delta_0000007_0000007_0000/",
            AcidDir("delete_delta", 7, 7, 0),
            "delete_delta_0000007_0000007_0000",
        ),
        ("delta_1_1_12345", AcidDir("delta", 1, 1, 12345), "delta_0000001_0000001_12345"),
    ],
)
def test_parse_acid_dir(name: str, expected: AcidDir, canonical: str) -> None:
    parsed = parse_acid_dir(name)
    assert parsed == expected
    assert parsed is not None
    assert parsed.name == canonical
    assert parsed.path == name.rstrip("/")
    assert parse_acid_dir(canonical) == expected  # canonical names round-trip


def test_parse_acid_dir_of_path_keeps_listed_path() -> None:
    d = parse_acid_dir("warehouse/t/p=1/delta_5_20")
    assert d == AcidDir("delta", 5, 20, None)
    assert d is not None and d.path == "warehouse/t/p=1/delta_5_20" and d.listed_path == d.path
    assert AcidDir("delta", 5, 20, None).listed_path == "delta_0000005_0000020"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "base_",
        "base_x",
        "base_5_v",
        "base_5_6",
        "delta_1",
        "delta_1_",
        "delta_a_b",
        "delta_1_2_3_4",
        "delete_delta_1",
        "deltas_1_2",
        "000000_0",
        "bucket_00000",
        "_orc_acid_version",
        "delta_1_2_99999999999",  # statement id beyond Java int
        "base_99999999999999999999",  # beyond Java long
        "delta_1_1_0000_v",
    ],
)
def test_parse_acid_dir_rejects(name: str) -> None:
    assert parse_acid_dir(name) is None


def test_acid_dir_kinds_and_validation() -> None:
    base, delta, dd = AcidDir("base", 3, 3, None), AcidDir("delta", 1, 2, 0), AcidDir("delete_delta", 1, 1, 0)
    assert (base.is_base, base.is_delta, base.is_delete) == (True, False, False)
    assert (delta.is_base, delta.is_delta, delta.is_delete) == (False, True, False)
    assert (dd.is_base, dd.is_delta, dd.is_delete) == (False, False, True)
    assert base.write_id == 3 and delta.has_statement_id and not base.has_statement_id
    assert str(delta) == "delta_0000001_0000002_0000"
    with pytest.raises(ValueError):
        AcidDir("snapshot", 1, 1, None)
    with pytest.raises(ValueError):
        AcidDir("base", 1, 2, None)
    with pytest.raises(ValueError):
        AcidDir("base", 1, 1, 0)
    # the listed path does not take part in equality or hashing
    assert parse_acid_dir("delta_5_20") == parse_acid_dir("delta_0000005_0000020")
    assert len({parse_acid_dir("delta_5_20"), parse_acid_dir("delta_0000005_0000020")}) == 1


def test_dir_name_builders() -> None:
    assert base_dir_name(5) == "base_0000005"
    assert base_dir_name(5, 123) == "base_0000005_v0000123"
    assert base_dir_name(5, 0) == "base_0000005"
    assert base_dir_name(123456789) == "base_123456789"
    assert delta_dir_name(1, 1, 0) == "delta_0000001_0000001_0000"
    assert delta_dir_name(1, 2) == "delta_0000001_0000002"
    assert delta_dir_name(1, 2, -1) == "delta_0000001_0000002"
    assert delta_dir_name(4, 4, delete=True) == "delete_delta_0000004_0000004"
    assert delta_dir_name(10000001, 10000001, 0, delete=True) == "delete_delta_10000001_10000001_0000"
    assert delta_dir_name(5, 20, visibility_txn_id=123) == "delta_0000005_0000020_v0000123"
    assert (
        delta_dir_name(5, 5, 2, delete=True, visibility_txn_id=9)
        == "delete_delta_0000005_0000005_0002_v0000009"
    )
    for bad in [lambda: base_dir_name(-1), lambda: base_dir_name(1, -1), lambda: delta_dir_name(2, 1)]:
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError):
        delta_dir_name(-1, 1)
    with pytest.raises(ValueError):
        delta_dir_name(1, 1, -2)


def test_fixture_directory_names_round_trip() -> None:
    names = sorted(p.name for p in FIXTURES.glob("*/*") if p.is_dir())
    assert "delete_delta_0000004_0000004" in names
    for name in names:
        parsed = parse_acid_dir(name)
        assert parsed is not None, name
        assert parsed.name == name


def test_bucket_file_names() -> None:
    assert bucket_file_name(0) == "bucket_00000"
    assert bucket_file_name(12) == "bucket_00012"
    assert bucket_file_name(0, 3) == "bucket_00000_3"
    assert bucket_file_name(123456) == "bucket_123456"
    with pytest.raises(ValueError):
        bucket_file_name(-1)
    with pytest.raises(ValueError):
        bucket_file_name(0, -1)
    assert parse_bucket_file("bucket_00000") == 0
    assert parse_bucket_file("bucket_00012_3") == 12
    assert parse_bucket_file("delta_0000001_0000001_0000/bucket_00001") == 1
    assert parse_bucket_file("bucket_7") == 7
    for name in [
        "bucket_00000_flush_length",
        "bucket_",
        "bucket_x",
        "000000_0",
        "bucket_00000.orc",
        "_orc_acid_version",
    ]:
        assert parse_bucket_file(name) is None, name
    for bucket, attempt in [(0, None), (5, None), (4095, 1), (17, 0)]:
        assert parse_bucket_file(bucket_file_name(bucket, attempt)) == bucket


def test_original_file_bucket() -> None:
    assert original_file_bucket("000000_0") == 0
    assert original_file_bucket("000002_0") == 2
    assert original_file_bucket("000002_0_copy_1") == 2
    assert original_file_bucket("000002_0_copy_2") == 2
    assert original_file_bucket("HIVE_UNION_SUBDIR_1/000013_1") == 13
    for name in [
        "bucket_00000",
        "000000",
        "000000_0_copy_",
        "000000_0_copy",
        "x_0",
        "000000_0.orc",
        "alltypes_non_acid.orc",
    ]:
        assert original_file_bucket(name) is None, name
    fixture_buckets = sorted(
        original_file_bucket(p.name) for p in (FIXTURES / "dummy_id_data_orc").iterdir() if p.is_file()
    )
    assert fixture_buckets == [0, 1, 2, 2, 2]


def test_bucket_codec() -> None:
    assert encode_bucket_property(0) == 536870912 == 0x20000000
    assert encode_bucket_property(0, 0) == 536870912
    assert encode_bucket_property(1) == 536870912 + 65536
    assert encode_bucket_property(3, 2) == 0x20000000 | 3 << 16 | 2
    assert encode_bucket_property(0, -1) == 536870912  # Hive writes "no statement id" as 0
    assert encode_bucket_property(4095, 4095) == 0x2FFF0FFF
    for bucket, stmt in [(0, 0), (1, 0), (0, 1), (17, 5), (4095, 4095)]:
        assert decode_bucket_property(encode_bucket_property(bucket, stmt)) == (bucket, stmt)
    assert decode_bucket_property(536870912) == (0, 0)
    assert decode_bucket_property(0x20000000 | 1 << 12) == (0, 0)  # reserved bits 15-12 ignored


@pytest.mark.parametrize(("bucket", "stmt"), [(-1, 0), (4096, 0), (0, 4096), (0, -2)])
def test_bucket_codec_encode_errors(bucket: int, stmt: int) -> None:
    with pytest.raises(ValueError):
        encode_bucket_property(bucket, stmt)


@pytest.mark.parametrize("value", [0, 1, 5, 0x40000000, 0x60000000, 0xE0000000, -1, 1 << 32])
def test_bucket_codec_decode_errors(value: int) -> None:
    with pytest.raises(ValueError):
        decode_bucket_property(value)


def test_side_files() -> None:
    assert side_file_name("bucket_00000") == "bucket_00000_flush_length"
    assert (
        side_file_name("delta_0000001_0000002/bucket_00001")
        == "delta_0000001_0000002/bucket_00001_flush_length"
    )
    assert is_side_file("delta_0000001_0000002/bucket_00001_flush_length")
    assert not is_side_file("bucket_00001")
    assert encode_flush_length(0) == bytes(8)
    assert encode_flush_length(1234) == (1234).to_bytes(8, "big")
    assert encode_flush_length(0x0102030405060708) == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    with pytest.raises(ValueError):
        encode_flush_length(-1)
    with pytest.raises(ValueError):
        encode_flush_length(1 << 63)
    data = encode_flush_length(100) + encode_flush_length(2500) + encode_flush_length(7000)
    assert parse_flush_lengths(data) == [100, 2500, 7000]
    assert last_flush_length(data) == 7000
    assert parse_flush_lengths(data + b"\x00\x00\x01") == [100, 2500, 7000]  # partial record ignored
    assert last_flush_length(data + b"\x00\x00\x01") == 7000
    assert parse_flush_lengths(b"") == [] and last_flush_length(b"") is None
    assert last_flush_length(b"\x00" * 7) is None
    assert parse_flush_lengths(bytearray(encode_flush_length(9))) == [9]


def test_hidden_and_markers() -> None:
    for name in [
        "_SUCCESS",
        ".bucket_00000.crc",
        "_orc_acid_version",
        "_metadata_acid",
        "_tmp.delta_1_1",
        "a/b/.hive-staging",
    ]:
        assert is_hidden(name), name
    for name in ["bucket_00000", "bucket_00000_flush_length", "000000_0", "delta_1_1_0000/", "a_b"]:
        assert not is_hidden(name), name
    assert is_acid_marker("_orc_acid_version") and is_acid_marker("base_1/_metadata_acid")
    assert not is_acid_marker("_SUCCESS")

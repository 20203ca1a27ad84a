"""Pure-function tests: catalog-qualified names, Hive path escaping, name patterns, configuration."""

from __future__ import annotations

import pytest
from hive_metastore.ttypes import MetaException, NoSuchObjectException

from hivemesh import storage
from hivemesh.config import ConfigError, load_config
from hivemesh.hive.names import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    make_part_name,
    matches_pattern,
    parse_db_name,
    qualify_db_name,
    split_part_name,
    unescape_path_name,
)
from hivemesh.metastore.base import validate_name


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sales", ("hive", "sales")),
        ("Sales", ("hive", "sales")),
        ("@hive#sales", ("hive", "sales")),
        ("@spark#Sales", ("spark", "sales")),
        ("@hive#", ("hive", None)),
        ("@hive#!", ("hive", "")),
        (None, ("hive", None)),
    ],
)
def test_parse_db_name(given: str | None, expected: tuple[str, str | None]) -> None:
    assert parse_db_name(given) == expected


def test_parse_db_name_without_separator_is_an_error() -> None:
    with pytest.raises(MetaException, match="malformed"):
        parse_db_name("@hive")


def test_qualify_round_trips() -> None:
    for cat, db in [("hive", "x"), ("hive", None), ("c", "")]:
        assert parse_db_name(qualify_db_name(cat, db)) == (cat, db)


def test_exceptions_can_be_chained_and_reraised() -> None:
    # Thrift's generated exceptions refuse attribute writes; hivemesh.thrift patches them so that
    # "raise X from e" and contextlib re-raising work.
    import hivemesh.thrift  # noqa: F401

    try:
        try:
            raise KeyError("x")
        except KeyError as e:
            raise NoSuchObjectException("missing") from e
    except NoSuchObjectException as exc:
        assert isinstance(exc.__cause__, KeyError)
        with pytest.raises(TypeError):
            exc.message = "changed"


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("2020-01-01", "2020-01-01"),
        ("a/b", "a%2Fb"),
        ("x=y:z", "x%3Dy%3Az"),
        ("50%", "50%25"),
        ("tab\there", "tab%09here"),
        ("", DEFAULT_PARTITION_NAME),
        ("ünï", "ünï"),
    ],
)
def test_escape_path_name(value: str, escaped: str) -> None:
    assert escape_path_name(value) == escaped
    if value:
        assert unescape_path_name(escaped) == value


def test_partition_names() -> None:
    name = make_part_name(["DS", "hr"], ["2020/01", "1"])
    assert name == "ds=2020%2F01/hr=1"
    assert split_part_name(name) == [("ds", "2020/01"), ("hr", "1")]
    with pytest.raises(ValueError, match="has no '='"):
        split_part_name("ds=1/oops")


@pytest.mark.parametrize(
    ("location", "normalized"),
    [
        ("file:///tmp/w/x.db", "file:/tmp/w/x.db"),
        ("file:/tmp/w", "file:/tmp/w"),
        ("s3a://bucket/w/", "s3a://bucket/w"),
        ("hdfs://nn:8020/w", "hdfs://nn:8020/w"),
    ],
)
def test_normalize_location(location: str, normalized: str) -> None:
    assert storage.normalize_location(location) == normalized


def test_directory_operations(tmp_path) -> None:  # type: ignore[no-untyped-def]
    loc = storage.normalize_location(str(tmp_path / "a" / "b"))
    assert storage.make_dirs(loc)
    (tmp_path / "a" / "b" / "f").write_text("x")
    dst = storage.normalize_location(str(tmp_path / "c" / "d"))
    assert storage.move_dir(loc, dst)
    assert (tmp_path / "c" / "d" / "f").read_text() == "x"
    assert not (tmp_path / "a" / "b").exists()
    assert storage.delete_dir(dst)
    assert not (tmp_path / "c" / "d").exists()
    assert not storage.delete_dir(dst)
    assert storage.is_subdir("file:/w/t/p=1", "file:/w/t")
    assert not storage.is_subdir("file:/w/t2", "file:/w/t")


@pytest.mark.parametrize(
    ("name", "pattern", "matches"),
    [
        ("sales", "*", True),
        ("sales", "sal*", True),
        ("sales", "SAL*", True),
        ("sales", "x*|sa*", True),
        ("sales", "x*|y*", False),
        ("sales", "sale", False),
        ("a.b", "a.b", True),
        ("axb", "a.b", True),  # '.' is any one character, as in Hive 2.3 and 4
        ("ab", "a.b", False),
        ("plain", "p.*", True),
        ("p", "p.*", False),
        ("a+b", "a+b", True),  # other regex characters match themselves
        ("sales", None, True),
    ],
)
def test_matches_pattern(name: str, pattern: str | None, matches: bool) -> None:
    assert matches_pattern(name, pattern) is matches


def test_validate_name() -> None:
    assert validate_name("t_1")
    assert not validate_name("bad name!")
    assert not validate_name("")
    assert not validate_name("ü")


def test_config_defaults_env_file_and_options(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config().metastore
    assert (cfg.host, cfg.port, cfg.log_level, cfg.framed) == ("127.0.0.1", 9083, "INFO", False)
    assert cfg.db.startswith("sqlite:///")
    f = tmp_path / "mesh.yaml"
    f.write_text("metastore:\n  port: 9200\n  log_level: debug\n  db: postgresql+psycopg://u@h/db\n")
    assert load_config(f).metastore.port == 9200
    assert load_config(f).metastore.log_level == "DEBUG"
    monkeypatch.setenv("HIVEMESH_METASTORE_PORT", "9300")
    assert load_config(f).metastore.port == 9300
    assert load_config(f, metastore__port=9400).metastore.port == 9400
    assert load_config(f, metastore__port=None).metastore.port == 9300


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metastore:\n  prot: 1\n", "metastore.prot: Extra inputs are not permitted"),
        ("metastore:\n  port: high\n", "metastore.port"),
        ("metastore:\n  port: 70000\n", "less than or equal to 65535"),
        ("metastore:\n  db: mysql://x\n", "must be a SQLAlchemy URL"),
        ("federation: {}\n", "federation: Extra inputs are not permitted"),
        ("- a\n- b\n", "the top level must be a mapping"),
        ("metastore: [\n", "is not valid YAML"),
    ],
)
def test_config_errors_are_precise(tmp_path, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mesh.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert message in str(err.value)


def test_missing_config_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_config(tmp_path / "nope.yaml")

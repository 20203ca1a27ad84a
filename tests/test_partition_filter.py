"""Tests for hivemesh.metastore.partition_filter: Hive's partition-filter language.

Parsing (operators, precedence, quoting, errors), evaluate() semantics, and a randomised check that
the SQL from to_sqlalchemy() selects exactly the partitions evaluate() accepts, on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from hivemesh.metastore.partition_filter import (
    And,
    Comparison,
    FilterError,
    Like,
    Not,
    NotPushable,
    Or,
    evaluate,
    parse_filter,
    referenced_keys,
    to_sqlalchemy,
)
from tests.conftest import PG_SKIP_REASON, pg_admin_url, postgres_available


def num(key: str, op: str, value: str) -> Comparison:
    return Comparison(key, op, value, True)


def text(key: str, op: str, value: str) -> Comparison:
    return Comparison(key, op, value, False)


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "normalised"),
    [("=", "="), ("==", "="), ("!=", "!="), ("<>", "!="), ("<", "<"), ("<=", "<="), (">", ">"), (">=", ">=")],
)
def test_each_comparison_operator(op: str, normalised: str) -> None:
    assert parse_filter(f"year {op} 1995") == num("year", normalised, "1995")
    assert parse_filter(f'name{op}"x"') == text("name", normalised, "x")


@pytest.mark.parametrize(
    ("filter_text", "expected"),
    [
        ("1995 < year", num("year", ">", "1995")),
        ("1995 <= year", num("year", ">=", "1995")),
        ("1995 > year", num("year", "<", "1995")),
        ("1995 >= year", num("year", "<=", "1995")),
        ("1995 = year", num("year", "=", "1995")),
        ("'x' <> name", text("name", "!=", "x")),
    ],
)
def test_literal_on_the_left_flips_the_operator(filter_text: str, expected: Comparison) -> None:
    assert parse_filter(filter_text) == expected


def test_like() -> None:
    assert parse_filter('name like "a.*"') == Like("name", "a.*")
    assert parse_filter("name LIKE 'x%'") == Like("name", "x%")


def test_like_with_the_value_on_the_left_is_rejected_as_hive_does() -> None:
    with pytest.raises(FilterError, match="right of LIKE") as info:
        parse_filter('"a.*" like name')
    assert info.value.position == 6


def test_precedence_not_and_or() -> None:
    a, b, c = num("a", "=", "1"), num("b", "=", "2"), num("c", "=", "3")
    assert parse_filter("a = 1 or b = 2 and c = 3") == Or((a, And((b, c))))
    assert parse_filter("a = 1 and b = 2 or c = 3") == Or((And((a, b)), c))
    assert parse_filter("not a = 1 and b = 2") == And((Not(a), b))
    assert parse_filter("a = 1 or not b = 2 and c = 3") == Or((a, And((Not(b), c))))
    assert parse_filter("not not a = 1") == Not(Not(a))


def test_parentheses_override_precedence() -> None:
    a, b, c = num("a", "=", "1"), num("b", "=", "2"), num("c", "=", "3")
    assert parse_filter("(a = 1 or b = 2) and c = 3") == And((Or((a, b)), c))
    assert parse_filter("not (a = 1 or b = 2)") == Not(Or((a, b)))
    assert parse_filter("((a = 1))") == a
    assert parse_filter('(a = 1 or a = 2) and not b like "x%"') == And(
        (Or((a, num("a", "=", "2"))), Not(Like("b", "x%")))
    )


def test_and_and_or_collect_all_operands() -> None:
    assert parse_filter("a = 1 and b = 2 and c = 3") == And(
        (num("a", "=", "1"), num("b", "=", "2"), num("c", "=", "3"))
    )
    assert parse_filter("a = 1 or a = 2 or a = 3") == Or(
        (num("a", "=", "1"), num("a", "=", "2"), num("a", "=", "3"))
    )


def test_keywords_are_case_insensitive() -> None:
    lower = parse_filter("not a = 1 and b like 'x' or c between 1 and 2 or (d) not in (1, 2)")
    mixed = parse_filter("NoT a = 1 AND b LiKe 'x' Or c BETWEEN 1 aNd 2 OR (d) NOT In (1, 2)")
    assert lower == mixed
    assert isinstance(lower, Or)


def test_keys_are_case_insensitive_and_may_be_backquoted() -> None:
    assert parse_filter("YeAr = 1") == num("year", "=", "1")
    assert parse_filter("`Weird``Key` = 1") == num("weird`key", "=", "1")
    assert parse_filter("`and` = 1") == num("and", "=", "1")
    assert parse_filter("android = 1 and order_id = 2") == And(
        (num("android", "=", "1"), num("order_id", "=", "2"))
    )
    assert parse_filter("_c0 = 1") == num("_c0", "=", "1")
    assert parse_filter("2nd = 1") == num("2nd", "=", "1")


@pytest.mark.parametrize(
    ("filter_text", "value"),
    [
        ('k = "x"', "x"),
        ("k = 'x'", "x"),
        ("k = 'it\"s'", 'it"s'),
        ('k = "it\'s"', "it's"),
        ('k = ""', ""),
        ('k = "a and b = 1"', "a and b = 1"),
        ('k = "Mixed Case"', "Mixed Case"),
        # Hive's lexer lets a backslash escape the quote, but (TrimQuotes/unquoteString) keeps the
        # backslashes in the value
        (r"k = 'a\'b'", r"a\'b"),
        (r'k = "a\"b"', r"a\"b"),
        (r'k = "a\\b"', r"a\\b"),
        (r'k = "a\.b"', r"a\.b"),
    ],
)
def test_string_literals(filter_text: str, value: str) -> None:
    assert parse_filter(filter_text) == text("k", "=", value)


@pytest.mark.parametrize(
    ("filter_text", "expected"),
    [
        ("k = 7", num("k", "=", "7")),
        ("k = -7", num("k", "=", "-7")),
        ("k=-7", num("k", "=", "-7")),
        ("k = 007", num("k", "=", "007")),
        ("k = 2.50", num("k", "=", "2.50")),
        ("k = -0.5", num("k", "=", "-0.5")),
        ("k = 9223372036854775807", num("k", "=", "9223372036854775807")),
        ("k = -9223372036854775808", num("k", "=", "-9223372036854775808")),
        ("k >= 2020-01-31", text("k", ">=", "2020-01-31")),
        ("2020-01-31 < k", text("k", ">", "2020-01-31")),
    ],
)
def test_numbers_and_dates(filter_text: str, expected: Comparison) -> None:
    assert parse_filter(filter_text) == expected


def test_between_expands_like_hive() -> None:
    assert parse_filter("k between 1 and 5") == And((num("k", ">=", "1"), num("k", "<=", "5")))
    assert parse_filter("k not between 'a' and 'c'") == Or((text("k", "<", "a"), text("k", ">", "c")))
    assert parse_filter("k between 1 and 5 and j = 2") == And(
        (And((num("k", ">=", "1"), num("k", "<=", "5"))), num("j", "=", "2"))
    )


@pytest.mark.parametrize("spelling", ["(k) in (1, 2, 3)", "k in (1, 2, 3)", "K IN(1,2,3)"])
def test_in(spelling: str) -> None:
    assert parse_filter(spelling) == Or((num("k", "=", "1"), num("k", "=", "2"), num("k", "=", "3")))


def test_not_in_and_single_value_in() -> None:
    assert parse_filter("(k) not in ('a', 'b')") == And((text("k", "!=", "a"), text("k", "!=", "b")))
    assert parse_filter("k in ('a')") == text("k", "=", "a")


def test_struct_in() -> None:
    expr = parse_filter("(struct(a, b)) in (const struct(1, 'x'), struct(2, 'y'))")
    assert expr == Or(
        (
            And((num("a", "=", "1"), text("b", "=", "x"))),
            And((num("a", "=", "2"), text("b", "=", "y"))),
        )
    )
    negated = parse_filter("(STRUCT(a, b)) NOT IN (CONST STRUCT(1, 'x'))")
    assert negated == Or((num("a", "!=", "1"), text("b", "!=", "x")))


@pytest.mark.parametrize("blank", ["", "   ", "\n\t ", None])
def test_blank_filter_means_all_partitions(blank: str | None) -> None:
    assert parse_filter(blank) is None
    assert evaluate(None, {"k": "v"}, {"k": "string"}) is True
    assert referenced_keys(None) == set()


@pytest.mark.parametrize(
    ("filter_text", "position", "message"),
    [
        (
            "a = ",
            4,
            "unexpected end of filter at column 5 of filter 'a = '; expected a date, a number or a string",
        ),
        ("a = = 1", 4, "unexpected '=' at column 5"),
        ('a = "abc', 4, "unexpected character '\"' (unterminated string?) at column 5"),
        ("(a = 1", 6, "expected ')', AND or OR"),
        ("a = 1)", 5, "unexpected ')' at column 6"),
        ("a & 1", 2, "expected '!=', '<', '<=', '=', '>', '>=', BETWEEN, IN, LIKE or NOT"),
        ("a = 1 andx b = 2", 6, "unexpected 'andx'"),
        ("a between 1 and", 15, "expected a date, a number or a string"),
        ("(a) in (1", 9, "expected ')' or ','"),
        ("a in 1", 5, "expected '('"),
        ("a not like 'x'", 6, "expected BETWEEN or IN"),
        (")", 0, "expected '(', NOT, a date, a number, a partition key or a string"),
        ("a = 1\nand b ! 2", 12, "at column 7"),
        ("a = 1.", 4, "unexpected character '1'"),
    ],
)
def test_syntax_errors_say_where_and_what_was_expected(filter_text: str, position: int, message: str) -> None:
    with pytest.raises(FilterError) as info:
        parse_filter(filter_text)
    assert message in str(info.value)
    assert info.value.position == position
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("filter_text", "message"),
    [
        ("d = 2020-13-01", "invalid date 2020-13-01 at column 5"),
        ("k = 9223372036854775808", "outside the BIGINT range"),
        ("k = -9223372036854775809", "outside the BIGINT range"),
        ("(struct(a, b)) in (struct(1))", "STRUCT of 2 keys ['a', 'b'] compared with 1 values"),
        ("(" * 3000 + "a = 1" + ")" * 3000, "nested too deeply"),
    ],
)
def test_semantic_errors(filter_text: str, message: str) -> None:
    with pytest.raises(FilterError) as info:
        parse_filter(filter_text)
    assert message in str(info.value)


def test_referenced_keys() -> None:
    expr = parse_filter(
        "A = 1 or (not `B` like 'x' and c between 1 and 2) or (struct(d, e)) in (struct(1, 2))"
    )
    assert referenced_keys(expr) == {"a", "b", "c", "d", "e"}


# --- evaluate -----------------------------------------------------------------------------------

INT_KEY = {"yr": "int"}


@pytest.mark.parametrize(
    ("filter_text", "value", "expected"),
    [
        ("yr = 1995", "1995", True),
        ("yr = 1995", "01995", True),  # numeric: leading zeros do not matter
        ("yr = 7", "007", True),
        ("yr = 007", "7", True),
        ("yr > 9", "10", True),  # numeric, not "10" < "9"
        ("yr < 10", "9", True),
        ("yr > -5", "-3", True),
        ("yr < -5", "-30", True),
        ("yr = 0", "-0", True),
        ("yr >= 1995", "1994", False),
        ("1995 < yr", "1996", True),
        ("yr = 1", "abc", False),  # a value that is not a number never matches a numeric comparison
        ("yr != 1", "abc", False),
        ("yr != 1", "__HIVE_DEFAULT_PARTITION__", False),
        ("not yr = 1", "abc", True),
        ("yr > 0", "", False),
        ("yr > 0", "+5", False),
        ("yr > 0", " 5", False),
        ("yr > 0", "5.0", False),
        ("yr > 0", "9223372036854775808", False),  # outside BIGINT: not a number
        ("yr = 9223372036854775807", "9223372036854775807", True),
        ("yr < 2.5", "2", True),  # decimal literals compare numerically
        ("yr < 2.5", "3", False),
        ("yr <= 2.5", "2", True),
        ("yr > -2.5", "-2", True),
        ("yr > -2.5", "-3", False),
        ("yr >= -2.5", "-2", True),
        ("yr = 2.5", "2", False),
        ("yr != 2.5", "2", True),
        ("yr = 2.0", "2", True),
        ('yr = "0007"', "7", False),  # a string literal compares as a string
        ('yr = "0007"', "0007", True),
        ('yr > "5"', "10", False),
        ("yr like '19.*'", "1995", True),  # LIKE compares strings whatever the key type
        ("yr between 1990 and 1999", "1995", True),
        ("yr not between 1990 and 1999", "2000", True),
        ("yr in (1, 2)", "02", True),
        ("(yr) not in (1, 2)", "3", True),
    ],
)
def test_evaluate_integral_key(filter_text: str, value: str, expected: bool) -> None:
    assert evaluate(parse_filter(filter_text), {"yr": value}, INT_KEY) is expected


@pytest.mark.parametrize("key_type", ["tinyint", "smallint", "int", "bigint", " BIGINT "])
def test_every_integral_type_compares_numerically(key_type: str) -> None:
    assert evaluate(parse_filter("k > 9"), {"k": "10"}, {"k": key_type}) is True


@pytest.mark.parametrize(
    ("filter_text", "value", "expected"),
    [
        ("s = 007", "007", True),  # a number literal against a string key compares the literal's text
        ("s = 007", "7", False),
        ("s > 10", "9", True),  # as strings
        ('s = "x"', "x", True),
        ('s = "x"', "X", False),
        ('s != "x"', "y", True),
        ('s < "b"', "a", True),
        ('s < "b"', "B", True),  # by code point: "B" < "b"
        ('s < "a"', "Z", True),
        ('s > "z"', "é", True),
        ('s = ""', "", True),
        (r"s = 'a\'b'", r"a\'b", True),
    ],
)
def test_evaluate_string_key(filter_text: str, value: str, expected: bool) -> None:
    assert evaluate(parse_filter(filter_text), {"s": value}, {"s": "string"}) is expected


def test_evaluate_date_key_compares_strings() -> None:
    types = {"ds": "date"}
    assert evaluate(parse_filter("ds >= 2020-01-15"), {"ds": "2020-02-01"}, types) is True
    assert evaluate(parse_filter("ds >= 2020-01-15"), {"ds": "2020-01-01"}, types) is False
    assert evaluate(parse_filter("ds = '2020-01-15'"), {"ds": "2020-01-15"}, types) is True
    assert evaluate(parse_filter("ds > 5"), {"ds": "2020-01-01"}, types) is False  # "2020..." < "5"


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("a.*", "abc", True),
        ("a.*", "a", True),
        ("a.*", "xa", False),
        (".*b.*", "abc", True),
        (".*c", "abc", True),
        ("a.c", "abc", True),
        ("a.c", "ac", False),
        ("a.c", "abbc", False),
        ("ab", "abc", False),  # the whole value must match
        ("A.*", "abc", False),  # case-sensitive
        ("a%", "abc", False),  # % and _ are ordinary characters in Hive 2.3
        ("a%", "a%", True),
        ("a_c", "abc", False),
        ("a_c", "a_c", True),
        (r"a\.c", "abc", False),
        (r"a\.c", "a.c", True),
        ("a*", "aaa", False),  # only ".*" is special; other regex syntax is literal
        ("a*", "a*", True),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a+", "a+", True),
        ("", "", True),
        ("", "a", False),
    ],
)
def test_like_semantics(pattern: str, value: str, expected: bool) -> None:
    assert evaluate(Like("s", pattern), {"s": value}, {"s": "string"}) is expected
    assert evaluate(parse_filter(f"s like '{pattern}'"), {"s": value}, {"s": "string"}) is expected


def test_evaluate_logic() -> None:
    types = {"a": "int", "b": "string"}
    values = {"a": "1", "b": "x"}
    assert evaluate(parse_filter("a = 1 and b = 'x'"), values, types) is True
    assert evaluate(parse_filter("a = 1 and b = 'y'"), values, types) is False
    assert evaluate(parse_filter("a = 2 or b = 'x'"), values, types) is True
    assert evaluate(parse_filter("a = 2 or b = 'y'"), values, types) is False
    assert evaluate(parse_filter("not (a = 2 or b = 'y')"), values, types) is True
    assert evaluate(parse_filter("(struct(a, b)) in (struct(2, 'x'), struct(1, 'x'))"), values, types) is True
    assert evaluate(parse_filter("(struct(a, b)) not in (struct(1, 'x'))"), values, types) is False


def test_evaluate_unknown_key_raises_even_when_not_needed() -> None:
    with pytest.raises(FilterError, match=r"Specified key <nope> is not a partitioning key"):
        evaluate(parse_filter("yr = 1 or nope = 2"), {"yr": "1"}, INT_KEY)
    with pytest.raises(FilterError, match=r"no value for key <yr>"):
        evaluate(parse_filter("yr = 1"), {}, INT_KEY)


# --- to_sqlalchemy -----------------------------------------------------------------------------


def _pg_sql(expr_text: str, key_types: dict[str, str]) -> str:
    table = sa.table("kv", sa.column("value", sa.String))
    cond = to_sqlalchemy(parse_filter(expr_text), lambda key: table.c.value, key_types, "postgresql")
    return str(cond.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


def test_string_equality_compares_the_column_directly() -> None:
    assert _pg_sql("s = 'x'", {"s": "string"}) == "kv.value = 'x'"
    assert _pg_sql("s != 'x'", {"s": "string"}) == "kv.value != 'x'"
    assert _pg_sql("s < 'x'", {"s": "string"}) == "(kv.value COLLATE \"C\") < 'x'"


def test_numeric_comparison_is_a_guarded_bigint_cast() -> None:
    sql = _pg_sql("n > 5", {"n": "int"})
    assert sql.startswith("CASE WHEN ((kv.value ~ '^-?[0-9]+$')")
    assert "THEN CAST(kv.value AS BIGINT) > 5 ELSE false END" in sql


def test_to_sqlalchemy_rejects_other_dialects_and_unknown_keys() -> None:
    table = sa.table("kv", sa.column("value", sa.String))
    with pytest.raises(NotPushable, match="mysql"):
        to_sqlalchemy(parse_filter("s = 'x'"), lambda key: table.c.value, {"s": "string"}, "mysql")
    with pytest.raises(FilterError, match="<nope>"):
        to_sqlalchemy(parse_filter("nope = 1"), lambda key: table.c.value, {"s": "string"}, "sqlite")
    assert str(to_sqlalchemy(None, lambda key: table.c.value, {}, "sqlite").compile()) == "true"


KEY_TYPES = {"yr": "int", "name": "string", "ds": "date"}
INTISH = [
    "0", "7", "007", "-3", "-0", "-007", "2", "3", "10", "1995", "01995", "abc", "", "1.5", " 5", "+5", "5 ",
    "12a", "-", "--1", "__HIVE_DEFAULT_PARTITION__", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "0009223372036854775807", "99999999999999999999",
]  # fmt: skip
STRINGS = [
    "a", "b", "B", "ab", "abc", "a_c", "a%c", "a.c", "axc", "A.C", "007", "7", "-1", "10", "9", "", " ", "é",
    "Z", "z", "a*", "a?", "[x]", "a!b", "a\\b", "x y", "ä", "aa", "a\nb",
]  # fmt: skip
DATES = [
    "2020-01-01",
    "2020-01-15",
    "2020-02-01",
    "2019-12-31",
    "2020-1-5",
    "garbage",
    "__HIVE_DEFAULT_PARTITION__",
]
NUMBERS = ["0", "7", "007", "-3", "-0", "2", "10", "1995", "2.5", "-2.5", "0.5", "3.0", "9223372036854775807",
           "-9223372036854775808"]  # fmt: skip
LIKE_PIECES = ["a", "b", "c", ".*", ".*", ".", "%", "_", "\\.", "0", "7", "*", "?", "[", "!", "-", "A"]
VALUE_POOL = {"yr": INTISH, "name": STRINGS, "ds": DATES}


def _partitions(rng: random.Random, count: int = 90) -> list[dict[str, str]]:
    """Every pool value at least once, the rest random."""
    rows = []
    for i in range(count):
        rows.append({k: pool[i] if i < len(pool) else rng.choice(pool) for k, pool in VALUE_POOL.items()})
    return rows


def _literal(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(NUMBERS)
    if kind < 0.5:
        return rng.choice(DATES[:4])
    value = rng.choice(STRINGS + INTISH + DATES)
    quote = "'" if '"' in value or rng.random() < 0.5 else '"'
    return quote + value + quote


def _key(rng: random.Random) -> str:
    key = rng.choice(list(KEY_TYPES))
    return rng.choice([key, key.upper(), f"`{key}`"])


def _kw(rng: random.Random, word: str) -> str:
    return rng.choice([word.lower(), word.upper(), word.capitalize()])


def _leaf(rng: random.Random) -> str:
    kind = rng.randrange(6)
    op = rng.choice(["=", "==", "!=", "<>", "<", "<=", ">", ">="])
    if kind == 0:
        return f"{_key(rng)} {op} {_literal(rng)}"
    if kind == 1:
        return f"{_literal(rng)} {op} {_key(rng)}"
    if kind == 2:
        pattern = "".join(rng.choice(LIKE_PIECES) for _ in range(rng.randint(0, 4)))
        return f"{_key(rng)} {_kw(rng, 'like')} '{pattern}'"
    not_ = _kw(rng, "not") + " " if rng.random() < 0.4 else ""
    if kind == 3:
        return f"{_key(rng)} {not_}{_kw(rng, 'between')} {_literal(rng)} {_kw(rng, 'and')} {_literal(rng)}"
    if kind == 4:
        values = ", ".join(_literal(rng) for _ in range(rng.randint(1, 3)))
        key = _key(rng) if rng.random() < 0.5 else f"({_key(rng)})"
        return f"{key} {not_}{_kw(rng, 'in')} ({values})"
    structs = ", ".join(f"struct({_literal(rng)}, {_literal(rng)})" for _ in range(rng.randint(1, 2)))
    return f"(struct(yr, name)) {not_}in ({structs})"


def _filter(rng: random.Random, depth: int = 0) -> str:
    choice = rng.random()
    if depth >= 3 or choice < 0.35:
        return _leaf(rng)
    if choice < 0.5:
        return f"{_kw(rng, 'not')} ({_filter(rng, depth + 1)})"
    joiner = f" {_kw(rng, rng.choice(['and', 'or']))} "
    parts = [_filter(rng, depth + 1) for _ in range(rng.randint(2, 3))]
    return "(" + joiner.join(parts) + ")" if rng.random() < 0.5 else joiner.join(parts)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def connection(request: pytest.FixtureRequest) -> Iterator[sa.Connection]:
    """A connection to an in-memory SQLite database or to PostgreSQL (where the test table is TEMPORARY)."""
    if request.param == "sqlite":
        engine = sa.create_engine("sqlite://")
    else:
        if not postgres_available():
            pytest.skip(PG_SKIP_REASON)
        engine = sa.create_engine(pg_admin_url(), connect_args={"connect_timeout": 3})
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def _pg_non_c_collation(conn: sa.Connection) -> str | None:
    """An ICU collation that sorts 'B' after 'a', so the test notices a missing COLLATE "C"."""
    names = conn.execute(
        sa.text("SELECT collname FROM pg_collation WHERE collname IN ('en-x-icu', 'und-x-icu')")
    )
    found = sorted(names.scalars())
    return found[0] if found else None


def test_sql_agrees_with_evaluate_on_random_filters(connection: sa.Connection) -> None:
    dialect = connection.dialect.name
    collation = _pg_non_c_collation(connection) if dialect == "postgresql" else None
    kv = sa.Table(
        "pf_kv",
        sa.MetaData(),
        sa.Column("part_id", sa.Integer, nullable=False),
        sa.Column("key", sa.String(20), nullable=False),
        sa.Column("value", sa.String(256, collation=collation), nullable=False),
        prefixes=["TEMPORARY"],
    )
    kv.create(connection)
    rng = random.Random(20240611)
    partitions = _partitions(rng)
    rows = [{"part_id": i, "key": k, "value": v} for i, p in enumerate(partitions) for k, v in p.items()]
    connection.execute(kv.insert(), rows)

    aliases = {key: kv.alias(f"k_{key}") for key in KEY_TYPES}
    first = aliases["yr"]
    joined = first
    for key, alias in aliases.items():
        if alias is not first:
            joined = joined.join(alias, sa.and_(alias.c.part_id == first.c.part_id, alias.c.key == key))

    checked = matched = 0
    for _ in range(400):
        filter_text = _filter(rng)
        expr = parse_filter(filter_text)
        expected = {i for i, p in enumerate(partitions) if evaluate(expr, p, KEY_TYPES)}
        cond = to_sqlalchemy(expr, lambda key: aliases[key].c.value, KEY_TYPES, dialect)
        query = sa.select(first.c.part_id).select_from(joined).where(first.c.key == "yr", cond)
        got = set(connection.execute(query).scalars())
        assert got == expected, (
            f"filter {filter_text!r}: SQL-only {got - expected}, Python-only {expected - got}"
        )
        checked += 1
        matched += bool(expected) and len(expected) < len(partitions)
    assert checked == 400
    assert matched > 100  # most filters split the partitions, so the comparison means something


def test_filters_of_thousands_of_terms_over_thrift(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    """get_partitions_by_filter with filters of 1,500-3,000 terms (IN lists, STRUCT IN, NOT IN,
    long OR chains of LIKE and of numeric tests) answers exactly what evaluate() accepts, on
    SQLite too (whose parser stops at 1,000 levels of AND/OR); a filter of more than 10,000
    comparisons is refused with MetaException naming the limit."""
    from hive_metastore.ttypes import (
        FieldSchema,
        MetaException,
        Partition,
        SerDeInfo,
        StorageDescriptor,
        Table,
    )

    from hivemesh.metastore.partition_filter import MAX_FILTER_TERMS

    def sd() -> StorageDescriptor:
        return StorageDescriptor(cols=[FieldSchema("x", "string", None)], serdeInfo=SerDeInfo(parameters={}),
                                 bucketCols=[], sortCols=[], parameters={})  # fmt: skip

    keys = {"region": "string", "n": "int"}
    hms.create_table(Table(tableName=unique_name, dbName="default", sd=sd(), parameters={},
                           partitionKeys=[FieldSchema(k, t, None) for k, t in keys.items()]))  # fmt: skip
    values = [(f"r{i % 40}", str(i)) for i in range(240)]
    hms.add_partitions([Partition(values=list(v), dbName="default", tableName=unique_name, sd=sd(), parameters={})
                        for v in values])  # fmt: skip

    def check(text: str) -> int:
        got = sorted(p.values[1] for p in hms.get_partitions_by_filter("default", unique_name, text, -1))
        expr = parse_filter(text)
        want = sorted(n for r, n in values if evaluate(expr, {"region": r, "n": n}, keys))
        assert got == want, text[:80]
        return len(got)

    assert check("region in (" + ", ".join(f"'r{i}'" for i in range(0, 3000, 3)) + ")") == 84
    struct_rows = ", ".join(f"struct('r{i % 40}', {i})" for i in range(0, 1500, 2))
    assert check(f"(struct(region, n)) in ({struct_rows})") == 120
    assert check("region not in (" + ", ".join(f"'r{i}'" for i in range(1, 1500, 2)) + ")") == 120
    assert check(" or ".join(f"region like 'r{i}.*'" for i in range(1500))) == 240
    assert check(" or ".join(f"n = {i}" for i in range(0, 1200, 5))) == 48
    assert check(" and ".join(f"n <> {i}" for i in range(1, 1200, 2))) == 120
    too_many = "region in (" + ", ".join(f"'r{i}'" for i in range(MAX_FILTER_TERMS + 1)) + ")"
    with pytest.raises(MetaException, match=f"at most {MAX_FILTER_TERMS} are accepted"):
        hms.get_partitions_by_filter("default", unique_name, too_many, -1)
    assert check("region = 'r1'") == 6  # the server is fine


def test_numeric_in_lists_at_the_term_limit_answer_quickly(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    """Found by tests/test_fuzz_thrift.py (issue 18): ``(n) not in (0, 1, ..., 9999)`` on an int
    key, within MAX_FILTER_TERMS, compiled to 10,000 guarded CASEs that SQLite took minutes to plan
    and run for 12 partitions, holding a server thread. Numeric IN / NOT IN lists now compile to one
    guarded ``CAST(... AS BIGINT) [NOT] IN``; answers as evaluate(), in seconds."""
    import time

    from hive_metastore.ttypes import FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

    from hivemesh.metastore.partition_filter import MAX_FILTER_TERMS

    sd = StorageDescriptor(cols=[FieldSchema("x", "string", None)], serdeInfo=SerDeInfo(parameters={}),
                           bucketCols=[], sortCols=[], parameters={})  # fmt: skip
    keys = {"n": "int"}
    hms.create_table(Table(tableName=unique_name, dbName="default", sd=sd, parameters={},
                           partitionKeys=[FieldSchema("n", "int", None)]))  # fmt: skip
    values = [str(i * 7) for i in range(60)] + ["-3", "__HIVE_DEFAULT_PARTITION__"]
    hms.add_partitions([Partition(values=[v], dbName="default", tableName=unique_name, sd=sd, parameters={})
                        for v in values])  # fmt: skip
    numbers = [str(i) for i in range(MAX_FILTER_TERMS - 2)] + ["2.5", "-3"]
    for text in (
        f"(n) not in ({', '.join(numbers)})",
        f"n in ({', '.join(numbers)})",
        " or ".join(f"n = {v}" for v in numbers[::2]),
        " and ".join(f"n != {v}" for v in numbers[1::2]),
        "n in (2.5, 3.5) or n = 14",
        "n not in (2.5, 3.5)",
    ):
        t0 = time.monotonic()
        got = sorted(p.values[0] for p in hms.get_partitions_by_filter("default", unique_name, text, -1))
        took = time.monotonic() - t0
        expr = parse_filter(text)
        assert got == sorted(v for v in values if evaluate(expr, {"n": v}, keys)), text[:80]
        assert took < 20, f"{took:.1f} s for {text[:60]!r}..."  # a deadline, not a benchmark: it was minutes


def test_large_filters_do_not_fill_the_statement_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each distinct large filter compiles to a statement of its own; those run outside
    SQLAlchemy's compiled-statement cache (which would keep hundreds of them, megabytes each, for
    the life of the server), while small filters keep using it."""
    from hive_metastore.ttypes import FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

    from hivemesh.metastore.handler import LocalMetastore
    from hivemesh.metastore.partitions import UNCACHED_FILTER_TERMS
    from hivemesh.metastore.store import Store

    store = Store(f"sqlite:///{tmp_path / 'ms.db'}")
    m = LocalMetastore(store, str(tmp_path / "wh"))
    sd = StorageDescriptor(cols=[FieldSchema("x", "string", None)], serdeInfo=SerDeInfo(parameters={}),
                           bucketCols=[], sortCols=[], parameters={})  # fmt: skip
    m.create_table(Table(tableName="t", dbName="default", sd=sd, parameters={},
                         partitionKeys=[FieldSchema("k", "string", None)]))  # fmt: skip
    m.add_partitions([Partition(values=[str(i)], dbName="default", tableName="t", sd=sd, parameters={})
                      for i in range(50)])  # fmt: skip
    cache = store.read_engine._compiled_cache
    m.get_partitions_by_filter("default", "t", "k = '1' or k like '2.*'", -1)
    before = len(cache)
    for n in range(30):  # distinct large filters: LIKE chains of different lengths
        terms = UNCACHED_FILTER_TERMS + 1 + n
        text = " or ".join(f"k like '{i}.*'" for i in range(terms))
        got = {p.values[0] for p in m.get_partitions_by_filter("default", "t", text, -1)}
        assert got == {str(i) for i in range(50) if any(str(i).startswith(str(j)) for j in range(terms))}
    assert len(cache) - before <= 3  # the per-table lookups, not one entry per filter
    m.get_partitions_by_filter("default", "t", "k = '1' or k like '3.*'", -1)
    store.dispose()

"""Hive's partition-filter language: the ``filter`` string of ``get_partitions_by_filter``.

Clients send strings such as ``year = 1995 and name = "x"``, ``ds >= 2020-01-01`` or
``(a = 1 or a = 2) and not b like "x.*"``. This module parses them with a lark grammar into small
frozen dataclasses, evaluates them against one partition's values in Python, and compiles them to a
SQLAlchemy Core condition over ``PARTITION_KEY_VALS`` that gives the same answers on SQLite and
PostgreSQL.

The grammar follows Hive 2.3.10's ``Filter.g`` (the HMS inside the PySpark wheel) and Hive 4's
``PartitionFilter.g4``:

* ``key op literal`` and ``literal op key`` with ``=`` (also ``==``), ``!=``, ``<>``, ``<``, ``<=``,
  ``>``, ``>=``; ``key LIKE literal`` (Hive rejects the literal on the left of LIKE, so do we);
* ``key [NOT] BETWEEN lo AND hi`` (expanded, as Hive does, to ``key >= lo AND key <= hi``, or
  ``key < lo OR key > hi``);
* ``(key) [NOT] IN (v1, v2, ...)`` (Hive's spelling) and ``key [NOT] IN (...)`` (expanded to ORs of
  ``=``, or ANDs of ``!=``), and ``(STRUCT(k1, k2)) [NOT] IN ([CONST] STRUCT(v1, v2), ...)``;
* ``AND``, ``OR``, parentheses, and (an extension to Hive) a prefix ``NOT`` on any sub-expression.
  Precedence: NOT binds tighter than AND, which binds tighter than OR.

Keywords are case-insensitive. Keys are ``[A-Za-z0-9_]+`` names (not all digits) or backquoted
(`` `a``b` `` is ``a`b``); they are compared case-insensitively and reported in lower case.
Literals: strings in single or double quotes, where a backslash escapes the next character *for the
lexer only*: like Hive (which only strips the quotes), the value keeps the backslashes verbatim, so
``'a\\'b'`` is the 4-character value ``a\\'b``; integers (``-7``, ``007``, within the BIGINT range, as
Hive's ``Long.parseLong`` requires) and, as an extension, decimals (``2.5``); unquoted dates
``yyyy-mm-dd`` (what Spark sends for DATE keys), which are string values.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, cast

import sqlalchemy as sa
from lark import Lark, Token, Transformer, UnexpectedInput, UnexpectedToken
from lark.exceptions import VisitError

from hivemesh.errors import HivemeshError

__all__ = [
    "And",
    "Comparison",
    "Expr",
    "FilterError",
    "Like",
    "Not",
    "NotPushable",
    "Or",
    "evaluate",
    "parse_filter",
    "referenced_keys",
    "to_sqlalchemy",
]


class FilterError(HivemeshError, ValueError):
    """A filter that cannot be parsed, or that names a key the table does not have.

    ``position`` is the 0-based character offset of the problem in the filter text, when known.
    Hive raises ``MetaException`` in these cases; the caller converts.
    """

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class NotPushable(Exception):
    """``to_sqlalchemy`` cannot compile the filter for this database; evaluate it in Python instead."""


@dataclass(frozen=True)
class Comparison:
    """``key op value``. ``key`` is lower case; ``op`` is one of ``= != < <= > >=`` (``<>`` and ``==``
    are normalised, and ``1995 < year`` is stored as ``year > 1995``). ``value`` is the literal's text:
    the string between the quotes (backslashes kept), the number as written (``"007"``, ``"-2.5"``)
    or the date; ``value_is_number`` tells numbers apart."""

    key: str
    op: str
    value: str
    value_is_number: bool


@dataclass(frozen=True)
class Like:
    """``key LIKE pattern``; see :func:`evaluate` for the pattern language."""

    key: str
    pattern: str


@dataclass(frozen=True)
class And:
    """All of ``items`` (two or more) hold."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    """At least one of ``items`` (two or more) holds."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    """``item`` does not hold."""

    item: Expr


Expr = Comparison | Like | And | Or | Not

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (OR and_expr)*
?and_expr: not_expr (AND not_expr)*
?not_expr: NOT not_expr | atom
?atom: LPAR or_expr RPAR | predicate

predicate: key _cmp_op literal                                  -> compare
         | literal _cmp_op key                                  -> compare_reversed
         | key LIKE literal                                     -> like
         | literal LIKE key                                     -> like_reversed
         | key NOT? BETWEEN literal AND literal                 -> between
         | key NOT? IN LPAR literal (COMMA literal)* RPAR       -> in_list
         | LPAR key RPAR NOT? IN LPAR literal (COMMA literal)* RPAR -> in_list
         | LPAR STRUCT LPAR key (COMMA key)* RPAR RPAR NOT? IN LPAR struct (COMMA struct)* RPAR -> in_structs
struct: CONST? STRUCT LPAR literal (COMMA literal)* RPAR
key: IDENT | QIDENT
literal: STRING | NUMBER | DATE
_cmp_op: EQ | NE | LT | LE | GT | GE

AND.3: /and\b/i
OR.3: /or\b/i
NOT.3: /not\b/i
LIKE.3: /like\b/i
BETWEEN.3: /between\b/i
IN.3: /in\b/i
STRUCT.3: /struct\b/i
CONST.3: /const\b/i
DATE.3: /[0-9]{4}-[0-9]{2}-[0-9]{2}(?![0-9A-Za-z_])/
NUMBER.2: /-?[0-9]+(\.[0-9]+)?(?![0-9A-Za-z_.])/
IDENT.1: /[0-9]*[A-Za-z_][A-Za-z0-9_]*/
QIDENT: /`(?:[^`]|``)+`/
STRING: /"(?:[^"\\]|\\[\s\S])*"|'(?:[^'\\]|\\[\s\S])*'/
EQ: "==" | "="
NE: "!=" | "<>"
LE: "<="
GE: ">="
LT: "<"
GT: ">"
LPAR: "("
RPAR: ")"
COMMA: ","
%ignore /[ \t\r\n]+/
"""

_DISPLAY = {  # terminal names in error messages; keywords show as themselves
    "DATE": "a date",
    "NUMBER": "a number",
    "IDENT": "a partition key",
    "QIDENT": "a partition key",
    "STRING": "a string",
    "EQ": "'='",
    "NE": "'!='",
    "LE": "'<='",
    "GE": "'>='",
    "LT": "'<'",
    "GT": "'>'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "$END": "the end of the filter",
}

_OP_NAMES = {"EQ": "=", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class _Literal:
    text: str
    is_number: bool


class _Builder(Transformer[Token, Any]):
    """Turns lark's parse tree into :data:`Expr` nodes (key names lower-cased unless ``keep_case``)."""

    def __init__(self, keep_case: bool = False) -> None:
        super().__init__()
        self.keep_case = keep_case

    def or_expr(self, items: list[Any]) -> Or:
        r"""``a OR b OR ...`` -> Or."""
        return Or(tuple(i for i in items if not isinstance(i, Token)))

    def and_expr(self, items: list[Any]) -> And:
        r"""``a AND b AND ...`` -> And."""
        return And(tuple(i for i in items if not isinstance(i, Token)))

    def not_expr(self, items: list[Any]) -> Not:
        r"""``NOT a`` -> Not."""
        return Not(items[1])

    def atom(self, items: list[Any]) -> Expr:
        r"""``( expr )`` -> the inner expression."""
        inner: Expr = items[1]  # LPAR or_expr RPAR
        return inner

    def key(self, items: list[Token]) -> str:
        r"""A partition key name, lower-cased (unless ``keep_case``); backquotes removed
        (``` `a``b` ``` -> ``a`b``)."""
        tok = items[0]
        name = tok[1:-1].replace("``", "`") if tok.type == "QIDENT" else str(tok)
        return name if self.keep_case else name.lower()

    def literal(self, items: list[Token]) -> _Literal:
        r"""A string, date or integer/decimal literal; FilterError for a number outside BIGINT."""
        tok = items[0]
        if tok.type == "STRING":
            return _Literal(tok[1:-1], False)
        if tok.type == "DATE":
            _check_date(tok)
            return _Literal(str(tok), False)
        if not _BIGINT_MIN <= Decimal(tok) <= _BIGINT_MAX:
            raise FilterError(
                f"number {tok} at column {tok.column} is outside the BIGINT range", tok.start_pos
            )
        return _Literal(str(tok), True)

    def compare(self, items: list[Any]) -> Comparison:
        r"""``key op literal`` -> Comparison."""
        key, op, lit = items
        return Comparison(key, _OP_NAMES[op.type], lit.text, lit.is_number)

    def compare_reversed(self, items: list[Any]) -> Comparison:
        r"""``literal op key`` -> Comparison with the operator flipped (``1 < k`` is ``k > 1``)."""
        lit, op, key = items
        return Comparison(key, _FLIPPED[_OP_NAMES[op.type]], lit.text, lit.is_number)

    def like(self, items: list[Any]) -> Like:
        r"""``key LIKE 'pattern'`` -> Like."""
        return Like(items[0], items[2].text)

    def like_reversed(self, items: list[Any]) -> Like:
        r"""``'value' LIKE key`` is refused with FilterError, as Hive does."""
        tok = items[1]
        raise FilterError(f"the value must be on the right of LIKE (column {tok.column})", tok.start_pos)

    def between(self, items: list[Any]) -> Expr:
        r"""``key [NOT] BETWEEN lo AND hi`` -> the two comparisons Hive expands it into."""
        (key, lo, hi), negated = _split(items)
        if negated:
            return Or((_cmp(key, "<", lo), _cmp(key, ">", hi)))
        return And((_cmp(key, ">=", lo), _cmp(key, "<=", hi)))

    def in_list(self, items: list[Any]) -> Expr:
        r"""``key [NOT] IN (v, ...)`` -> an Or of equalities (an And of inequalities when negated)."""
        (key, *values), negated = _split(items)
        return _join(Or, [_cmp(key, "!=" if negated else "=", v) for v in values], negated)

    def struct(self, items: list[Any]) -> tuple[_Literal, ...]:
        r"""``STRUCT(v, ...)`` -> a tuple of literals."""
        return tuple(_split(items)[0])

    def in_structs(self, items: list[Any]) -> Expr:
        r"""``(STRUCT(k1, k2)) [NOT] IN (STRUCT(v1, v2), ...)`` -> Or of per-row Ands of equalities
        (negated, by De Morgan: And of per-row Ors of inequalities)."""
        parts, negated = _split(items)
        keys = [p for p in parts if isinstance(p, str)]
        rows = []
        for row in (p for p in parts if isinstance(p, tuple)):
            if len(row) != len(keys):
                raise FilterError(f"STRUCT of {len(keys)} keys {keys} compared with {len(row)} values")
            tests: list[Expr] = [_cmp(k, "!=" if negated else "=", v) for k, v in zip(keys, row, strict=True)]
            rows.append(_join(And, tests, negated))
        return _join(Or, rows, negated)


def _split(items: list[Any]) -> tuple[list[Any], bool]:
    """The children that are not tokens (keys, literals, ...), and whether a NOT token is among them."""
    negated = any(isinstance(i, Token) and i.type == "NOT" for i in items)
    return [i for i in items if not isinstance(i, Token)], negated


def _cmp(key: str, op: str, lit: _Literal) -> Comparison:
    return Comparison(key, op, lit.text, lit.is_number)


def _join(kind: type[And] | type[Or], items: list[Expr], negated: bool) -> Expr:
    """``kind(items)``, or its dual when ``negated`` (NOT IN joins ``!=`` with AND); one item is itself."""
    if negated:
        kind = And if kind is Or else Or
    return items[0] if len(items) == 1 else kind(tuple(items))


def _check_date(tok: Token) -> None:
    try:
        date.fromisoformat(str(tok))
    except ValueError:
        raise FilterError(f"invalid date {tok} at column {tok.column}", tok.start_pos) from None


MAX_FILTER_CHARS = 1_000_000
MAX_FILTER_TERMS = 10_000  # comparisons in one filter (an IN list counts each value)
"""Bounds on one partition filter, so that one client's filter cannot hold a server thread for
long (parsing and compiling cost grows with them)."""


@functools.cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", lexer="contextual", maybe_placeholders=False)


def parse_filter(text: str | None, keep_case: bool = False) -> Expr | None:
    """Parse a Hive partition filter.

    Key names are lower-cased (partition keys are case-insensitive) unless ``keep_case``: the table
    filters of ``get_table_names_by_filter`` name table parameters, whose keys are case-sensitive.

    Returns ``None`` for an empty or blank filter, which means "all partitions" (every function here
    accepts ``None`` that way). Raises :class:`FilterError` with the column, what was found and what
    was expected, e.g. ``unexpected ')' at column 9 ...; expected a string, a number or a date``.
    """
    if text is None or not text.strip():
        return None
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(f"filter of {len(text)} characters; at most {MAX_FILTER_CHARS} are accepted")
    try:
        tree = _parser().parse(text)
        expr: Expr = _Builder(keep_case).transform(tree)
        terms = term_count(expr)
        if terms > MAX_FILTER_TERMS:
            raise FilterError(
                f"filter of {terms} comparisons; at most {MAX_FILTER_TERMS} are accepted (split the request)"
            )
        return expr
    except VisitError as e:
        if isinstance(e.orig_exc, RecursionError):
            raise FilterError("filter is nested too deeply") from None
        if isinstance(e.orig_exc, FilterError):
            raise e.orig_exc from None
        raise
    except UnexpectedInput as e:
        raise _syntax_error(text, e) from None
    except RecursionError:
        raise FilterError("filter is nested too deeply") from None


def _syntax_error(text: str, e: UnexpectedInput) -> FilterError:
    at_end = isinstance(e, UnexpectedToken) and e.token.type == "$END"
    pos = len(text) if at_end or e.pos_in_stream is None else e.pos_in_stream
    if at_end:
        found = "end of filter"
    elif isinstance(e, UnexpectedToken):
        found = repr(str(e.token))
    else:
        found = f"character {text[pos]!r}" + (" (unterminated string?)" if text[pos] in "'\"`" else "")
    want = sorted({_DISPLAY.get(t, t) for t in _acceptable(text[:pos])})
    wanted = (", ".join(want[:-1]) + " or " + want[-1]) if len(want) > 1 else "".join(want)
    column = pos - text.rfind("\n", 0, pos)  # 1-based, within its line
    msg = f"unexpected {found} at column {column} of filter {text!r}"
    return FilterError(msg + (f"; expected {wanted}" if wanted else ""), pos)


def _acceptable(prefix: str) -> set[str]:
    """The terminals the parser accepts after ``prefix`` (lark's own error sets include lookaheads
    that LALR state merging adds, such as ``)`` right after a key)."""
    try:
        interactive = _parser().parse_interactive(prefix)
        interactive.exhaust_lexer()
        return set(interactive.accepts())  # type: ignore[no-untyped-call]  # lark leaves accepts() unannotated
    except UnexpectedInput:  # pragma: no cover - the prefix before the error always lexes and parses
        return set()


def _walk(expr: Expr | None) -> Iterator[Expr]:
    if expr is None:
        return
    yield expr
    if isinstance(expr, And | Or):
        for item in expr.items:
            yield from _walk(item)
    elif isinstance(expr, Not):
        yield from _walk(expr.item)


def term_count(expr: Expr | None) -> int:
    """How many comparisons (LIKE included) a filter holds; an IN list counts each value."""
    return sum(1 for e in _walk(expr) if isinstance(e, Comparison | Like))


def referenced_keys(expr: Expr | None) -> set[str]:
    """The (lower-case) partition keys the filter mentions; empty for ``None``."""
    return {e.key for e in _walk(expr) if isinstance(e, Comparison | Like)}


# --- semantics shared by evaluate() and to_sqlalchemy() ---------------------------------------

_INTEGRAL_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint"})
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _is_numeric(cmp: Comparison, key_types: Mapping[str, str]) -> bool:
    """Whether ``cmp`` compares numbers: an integral key against a number literal."""
    return cmp.value_is_number and key_types[cmp.key].strip().lower() in _INTEGRAL_TYPES


def _integer_bound(op: str, number: str) -> tuple[str, int] | bool:
    """Rewrite ``n op number`` for integers ``n`` as ``n op' bound`` with an integer bound, or as a
    constant when ``number`` has a fraction (``n = 2.5`` is never true, ``n < 2.5`` is ``n < 3``)."""
    d = Decimal(number)
    if d == d.to_integral_value():
        return op, int(d)
    if op in ("=", "!="):
        return op == "!="
    lo, hi = math.floor(d), math.ceil(d)
    return {"<": ("<", hi), "<=": ("<=", lo), ">": (">", lo), ">=": (">=", hi)}[op]


def _as_bigint(value: str) -> int | None:
    """``value`` as a number if it is ``-?[0-9]+`` (leading zeros allowed) within BIGINT, else None."""
    if not _INTEGER_TEXT.fullmatch(value):
        return None
    n = int(value)
    return n if _BIGINT_MIN <= n <= _BIGINT_MAX else None


def _like_tokens(pattern: str) -> list[str | None]:
    """Split a LIKE pattern into ``None`` for ``.*`` (any run), ``""`` for ``.`` (one character) and
    one-character strings for literal characters (``\\x`` is a literal ``x``)."""
    out: list[str | None] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
        elif c == "." and pattern.startswith(".*", i):
            out.append(None)
            i += 2
        else:
            out.append("" if c == "." else c)
            i += 1
    return out


@functools.lru_cache(maxsize=256)
def _like_regex(pattern: str) -> re.Pattern[str]:
    parts = [".*" if t is None else "." if t == "" else re.escape(t) for t in _like_tokens(pattern)]
    return re.compile("".join(parts), re.DOTALL)


def _known(key: str, key_types: Mapping[str, str]) -> None:
    if key not in key_types:
        raise FilterError(f"Specified key <{key}> is not a partitioning key for the table")


def evaluate(expr: Expr | None, values: Mapping[str, str], key_types: Mapping[str, str]) -> bool:
    """Whether a partition matches the filter (``None`` matches every partition).

    ``values`` maps each partition key (lower case) to the partition's value string; ``key_types``
    maps each key to its Hive type name. Raises :class:`FilterError` for a key not in ``key_types``
    or missing from ``values`` (whether or not the partition would need it).

    Comparisons: when the key's type is integral (tinyint, smallint, int, bigint) and the literal is
    a number, the value is compared numerically if it is ``-?[0-9]+`` (``"007"`` is 7) within the
    BIGINT range; any other value (``"abc"``, ``"__HIVE_DEFAULT_PARTITION__"``) matches no numeric
    comparison, not even ``!=``. Otherwise the value and the literal's text are compared as strings
    (by code point), so ``date_key >= 2020-01-01`` works and ``string_key = 007`` means ``"007"``.
    Hive 2.3 instead fails a string key against a number literal (unless
    ``hive.metastore.integral.jdo.pushdown`` is set, when it compares strings).

    LIKE follows Hive 2.3.10, the metastore in the PySpark wheel: its direct-SQL path refuses LIKE
    ("LIKE is not supported for SQL filter pushdown"), and its JDO path sends
    ``values.get(i).matches(pattern)``, which DataNucleus 4.1 (``StringMatchesMethod`` with
    ``RegularExpressionConverter``) turns into SQL LIKE: ``.*`` matches any run of characters, ``.``
    any one character, ``\\.`` a dot, and every other character only itself (``%`` and ``_`` too).
    Spark sends exactly this form (``k like "prefix.*"``). We read any other ``\\x`` as a literal
    ``x``. The whole value must match, case-sensitively. (Hive 4 additionally treats ``%`` and ``_``
    as wildcards.) LIKE compares the value as a string whatever the key's type.
    """
    for key in referenced_keys(expr):
        _known(key, key_types)
        if key not in values:
            raise FilterError(f"the partition has no value for key <{key}>")
    return _evaluate(expr, values, key_types)


def _evaluate(expr: Expr | None, values: Mapping[str, str], key_types: Mapping[str, str]) -> bool:
    if expr is None:
        return True
    if isinstance(expr, And):
        return all(_evaluate(i, values, key_types) for i in expr.items)
    if isinstance(expr, Or):
        return any(_evaluate(i, values, key_types) for i in expr.items)
    if isinstance(expr, Not):
        return not _evaluate(expr.item, values, key_types)
    value = values[expr.key]
    if isinstance(expr, Like):
        return _like_regex(expr.pattern).fullmatch(value) is not None
    if not _is_numeric(expr, key_types):
        return _OPS[expr.op](value, expr.value)
    n = _as_bigint(value)
    if n is None:
        return False
    bound = _integer_bound(expr.op, expr.value)
    return bound if isinstance(bound, bool) else _OPS[bound[0]](n, bound[1])


# --- SQL ----------------------------------------------------------------------------------------

_DIALECTS = ("sqlite", "postgresql")


def to_sqlalchemy(
    expr: Expr | None,
    value_column: Callable[[str], sa.ColumnElement[Any]],
    key_types: Mapping[str, str],
    dialect_name: str,
) -> sa.ColumnElement[bool]:
    """Compile the filter into a SQLAlchemy Core condition with the same answers as :func:`evaluate`.

    ``value_column(key)`` returns the SQL column holding that key's (non-NULL) value string for the
    partition row; ``dialect_name`` is ``"sqlite"`` or ``"postgresql"`` (``engine.dialect.name``).
    Raises :class:`NotPushable` for another dialect and :class:`FilterError` for an unknown key.

    * ``=`` and ``!=`` on strings compare the column directly, so an index on it can be used; the
      ordering operators add ``COLLATE "C"`` on PostgreSQL so strings sort by code point as in Python
      (SQLite's default BINARY collation already does).
    * Numeric comparisons become ``CASE WHEN <guard> THEN CAST(col AS BIGINT) op :n ELSE false END``.
      The guard accepts exactly the values :func:`evaluate` treats as numbers: ``col ~ '^-?[0-9]+$'``
      on PostgreSQL, ``GLOB`` tests on SQLite (no regular expressions there), plus a BIGINT range test
      on the digits without leading zeros (fewer than 19, or 19 and not above ``9223372036854775807``,
      ``...808`` when negative), so the CAST neither fails on PostgreSQL nor saturates on SQLite.
    * LIKE becomes ``LIKE ... ESCAPE '!'`` on PostgreSQL and ``GLOB`` on SQLite (whose LIKE ignores
      case); both match the whole value case-sensitively, as :func:`evaluate` does.
    """
    if dialect_name not in _DIALECTS:
        raise NotPushable(f"partition filters are compiled only for {_DIALECTS}, not {dialect_name!r}")
    for key in referenced_keys(expr):
        _known(key, key_types)
    return _compile(expr, value_column, key_types, dialect_name == "postgresql")


def _compile(
    expr: Expr | None,
    col_of: Callable[[str], sa.ColumnElement[Any]],
    key_types: Mapping[str, str],
    pg: bool,
) -> sa.ColumnElement[bool]:
    if expr is None:
        return sa.true()
    if isinstance(expr, (And, Or)):
        return _compile_chain(expr, col_of, key_types, pg)
    if isinstance(expr, Not):
        return sa.not_(_compile(expr.item, col_of, key_types, pg))
    col = col_of(expr.key)
    if isinstance(expr, Like):
        return _sql_like(col, expr.pattern, pg)
    if not _is_numeric(expr, key_types):
        if expr.op in ("=", "!="):
            return cast("sa.ColumnElement[bool]", _OPS[expr.op](col, sa.literal(expr.value, sa.String)))
        return cast(
            "sa.ColumnElement[bool]", _OPS[expr.op](_binary(col, pg), sa.literal(expr.value, sa.String))
        )
    bound = _integer_bound(expr.op, expr.value)
    guard = _bigint_guard(col, pg)
    if isinstance(bound, bool):
        return guard if bound else sa.false()
    test = _OPS[bound[0]](sa.cast(col, sa.BigInteger), sa.literal(bound[1], sa.BigInteger))
    return sa.case((guard, test), else_=sa.false())


_CHAIN = 100  # SQLite parses a chain of N ANDs/ORs N levels deep and stops at 1000 levels


def _string_test(e: Expr, op: str, key_types: Mapping[str, str]) -> Comparison | None:
    if isinstance(e, Comparison) and e.op == op and not _is_numeric(e, key_types):
        return e
    return None


def _compile_chain(
    expr: And | Or,
    col_of: Callable[[str], sa.ColumnElement[Any]],
    key_types: Mapping[str, str],
    pg: bool,
) -> sa.ColumnElement[bool]:
    """An And/Or compiled flat: string equalities on one key ORed become ``key IN (...)``,
    string inequalities ANDed ``key NOT IN (...)``, numeric ones likewise one guarded
    ``CAST(key AS BIGINT) [NOT] IN (...)`` (:func:`_numeric_in`), ORed rows of string equalities on
    the same keys (``STRUCT(...) IN (...)``) a row-value IN; the rest is chained in groups of
    :data:`_CHAIN` on SQLite so its parser never nests too deep."""
    is_or = isinstance(expr, Or)
    by_key: dict[str, list[str]] = {}
    numbers: dict[str, list[str]] = {}
    rows: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    parts: list[sa.ColumnElement[bool]] = []
    for item in expr.items:
        cmp = _string_test(item, "=" if is_or else "!=", key_types)
        if cmp is not None:
            by_key.setdefault(cmp.key, []).append(cmp.value)
            continue
        if (
            isinstance(item, Comparison)
            and item.op == ("=" if is_or else "!=")
            and _is_numeric(item, key_types)
        ):
            numbers.setdefault(item.key, []).append(item.value)
            continue
        if is_or and isinstance(item, And) and len(item.items) > 1:
            tests = [_string_test(i, "=", key_types) for i in item.items]
            keys = tuple(t.key for t in tests if t is not None)
            if None not in tests and len(set(keys)) == len(keys):
                rows.setdefault(keys, []).append(tuple(t.value for t in tests if t is not None))
                continue
        parts.append(_compile(item, col_of, key_types, pg))
    for key, values in by_key.items():
        col = col_of(key)
        if len(values) == 1:
            parts.append(
                cast(
                    "sa.ColumnElement[bool]",
                    _OPS["=" if is_or else "!="](col, sa.literal(values[0], sa.String)),
                )
            )
        else:
            parts.append(col.in_(values) if is_or else col.not_in(values))
    for key, values in numbers.items():
        if len(values) == 1:
            parts.append(
                _compile(Comparison(key, "=" if is_or else "!=", values[0], True), col_of, key_types, pg)
            )
        else:
            parts.append(_numeric_in(col_of(key), values, is_or, pg))
    for keys, vals in rows.items():
        if len(vals) == 1:
            parts.append(
                sa.and_(*(col_of(k) == sa.literal(v, sa.String) for k, v in zip(keys, vals[0], strict=True)))
            )
        else:
            parts.append(sa.tuple_(*(col_of(k) for k in keys)).in_(vals))
    return _chain(sa.or_ if is_or else sa.and_, parts, pg)


def _numeric_in(
    col: sa.ColumnElement[Any], numbers: list[str], is_or: bool, pg: bool
) -> sa.ColumnElement[bool]:
    """``n = a OR n = b ...`` (``is_or``) or ``n != a AND n != b ...`` on an integral key, as one
    ``CASE WHEN <guard> THEN CAST(col AS BIGINT) [NOT] IN (...) ELSE false END`` with the answers of
    :func:`evaluate`: a value that is not a BIGINT matches neither form, a fraction never equals
    (and so always differs from) an integer. One guarded comparison per number instead would make
    an IN list of 10,000 numbers (within :data:`MAX_FILTER_TERMS`) 10,000 CASEs, which SQLite took
    minutes to plan and run for a handful of partitions."""
    ints = sorted({b[1] for v in numbers if not isinstance(b := _integer_bound("=", v), bool)})
    guard = _bigint_guard(col, pg)
    if not ints:
        return sa.false() if is_or else guard
    value = sa.cast(col, sa.BigInteger)
    return sa.case((guard, value.in_(ints) if is_or else value.not_in(ints)), else_=sa.false())


def _chain(
    join: Callable[..., sa.ColumnElement[bool]], parts: list[sa.ColumnElement[bool]], pg: bool
) -> sa.ColumnElement[bool]:
    if pg or len(parts) <= _CHAIN:
        return join(*parts)
    # a function call keeps the groups apart (SQLAlchemy drops redundant parentheses); the values
    # are never NULL, so COALESCE changes nothing but the parse depth
    groups: list[sa.ColumnElement[bool]] = [
        sa.func.coalesce(join(*parts[i : i + _CHAIN]), sa.false()) for i in range(0, len(parts), _CHAIN)
    ]
    return _chain(join, groups, pg)


def _binary(x: sa.ColumnElement[Any], pg: bool) -> sa.ColumnElement[Any]:
    return sa.collate(x, "C") if pg else x


def _glob(x: sa.ColumnElement[Any], pattern: str) -> sa.ColumnElement[bool]:
    return x.op("GLOB", is_comparison=True)(sa.literal(pattern, sa.String))


def _bigint_guard(col: sa.ColumnElement[Any], pg: bool) -> sa.ColumnElement[bool]:
    """True exactly when ``_as_bigint(col)`` is not None; never raises, never NULL for a non-NULL col."""
    if pg:
        is_integer: sa.ColumnElement[bool] = col.op("~", is_comparison=True)(
            sa.literal(r"^-?[0-9]+$", sa.String)
        )
    else:

        def digits(x: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
            r"""SQLite: ``x`` is a non-empty run of ASCII digits."""
            return sa.and_(x != "", sa.not_(_glob(x, "*[^0-9]*")))

        is_integer = sa.or_(digits(col), sa.and_(_glob(col, "-*"), digits(sa.func.substr(col, 2))))
    significant = sa.func.ltrim(sa.func.ltrim(col, "-"), "0")
    limit = sa.case((col.like("-%"), str(-_BIGINT_MIN)), else_=str(_BIGINT_MAX))
    width = sa.func.length(significant)
    fits = sa.or_(width < 19, sa.and_(width == 19, _binary(significant, pg) <= limit))
    return sa.and_(is_integer, fits)


def _sql_like(col: sa.ColumnElement[Any], pattern: str, pg: bool) -> sa.ColumnElement[bool]:
    tokens = _like_tokens(pattern)
    if pg:  # LIKE with '!' as the escape character
        special, run, one = {"%": "!%", "_": "!_", "!": "!!"}, "%", "_"
    else:  # GLOB: brackets make *, ? and [ literal
        special, run, one = {"*": "[*]", "?": "[?]", "[": "[[]"}, "*", "?"
    text = "".join(run if t is None else one if t == "" else special.get(t, t) for t in tokens)
    return col.like(text, escape="!") if pg else _glob(col, text)

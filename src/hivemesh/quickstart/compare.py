"""Compare two query results as multisets of rows: order ignored, floats equal within a tolerance."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

#: Default tolerances for float columns (decimals, integers, strings and dates must be equal).
REL_TOL = 1e-9
ABS_TOL = 1e-9


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, float):
        # Rounded so that two results differing in the last bits still sort alike.
        return (1, float(f"{value:.9g}")) if math.isfinite(value) else (1, value)
    if isinstance(value, int | Decimal):
        return (1, value)
    return (2, str(value))


def sort_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples, in a canonical order that tolerates None and tiny float differences."""
    return sorted((tuple(r) for r in rows), key=lambda r: tuple(_sort_key(v) for v in r))


def values_equal(a: Any, b: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """Equality of two result values; when either is a float, within ``rel_tol``/``abs_tol``."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return False
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=abs_tol)
    return a == b


def first_difference(
    left: Iterable[Sequence[Any]],
    right: Iterable[Sequence[Any]],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
) -> str | None:
    """None when both results hold the same rows (in any order); else a description of the first difference."""
    lrows, rrows = sort_rows(left), sort_rows(right)
    if len(lrows) != len(rrows):
        return f"{len(lrows)} rows vs {len(rrows)} rows"
    for i, (lr, rr) in enumerate(zip(lrows, rrows, strict=True)):
        if len(lr) != len(rr):
            return f"row {i}: {len(lr)} columns vs {len(rr)} columns"
        for j, (a, b) in enumerate(zip(lr, rr, strict=True)):
            if not values_equal(a, b, rel_tol, abs_tol):
                return f"row {i} column {j}: {a!r} vs {b!r} (rows {lr!r} vs {rr!r})"
    return None


def rows_match(
    left: Iterable[Sequence[Any]],
    right: Iterable[Sequence[Any]],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
) -> bool:
    """True when both results hold the same rows in any order (floats within the tolerances)."""
    return first_difference(left, right, rel_tol, abs_tol) is None

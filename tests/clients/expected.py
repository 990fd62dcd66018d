"""What every Python client program creates, inserts and expects back."""

from datetime import date
from decimal import Decimal

CREATE = (
    "CREATE TABLE t (k BIGINT, v STRING, price DECIMAL(10,2), day DATE) USING parquet "
    "CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS"
)
ROWS = [
    (1, "one", Decimal("1.50"), date(2024, 1, 15)),
    (2, "two", Decimal("20.25"), date(2024, 2, 29)),
    (3, None, None, None),
]
EXPLAIN = "EXPLAIN FORMATTED SELECT k, v FROM t WHERE k = 2"


def typed(rows):
    """Rows as (type name, text) pairs, so 1 != Decimal(1) and Decimal("1.5") != Decimal("1.50")."""
    return [tuple((type(x).__name__, str(x)) for x in row) for row in rows]


def check_rows(actual, expected):
    actual = [tuple(row) for row in actual]
    assert typed(actual) == typed(expected), f"got {actual!r}, expected {expected!r}"


def check_plan(columns, rows):
    """EXPLAIN FORMATTED answers one row with one text column `plan`."""
    assert list(columns) == ["plan"], columns
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    plan = rows[0][0]
    assert isinstance(plan, str), type(plan)
    assert plan.startswith("== Physical Plan ==\n"), plan
    assert "Scan parquet spark_catalog.default.t" in plan, plan

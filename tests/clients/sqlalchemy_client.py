"""SQLAlchemy 2 over psycopg2: engine, bound parameters, and the inspector's catalog queries.

Usage: sqlalchemy_client.py PORT
"""

import sys

from sqlalchemy import create_engine, exc, inspect, text

from expected import CREATE, EXPLAIN, ROWS, check_plan, check_rows

engine = create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{sys.argv[1]}/postgres")
params = [dict(zip(("k", "v", "price", "day"), row)) for row in ROWS]

with engine.begin() as conn:
    conn.execute(text(CREATE))
    conn.execute(text("INSERT INTO t VALUES (:k, :v, :price, :day)"), params)

with engine.connect() as conn:
    result = conn.execute(text("SELECT k, v, price, day FROM t WHERE k = :k"), {"k": 2})
    check_rows(result.all(), [ROWS[1]])
    result = conn.execute(text(EXPLAIN))
    check_plan(result.keys(), result.all())
    try:
        conn.execute(text("SELECT * FROM missing"))
        raise AssertionError("expected ProgrammingError")
    except exc.ProgrammingError as e:
        assert e.orig.pgcode == "42P01", e.orig.pgcode
    conn.rollback()
    check_rows(conn.execute(text("SELECT count(*) FROM t")).all(), [(3,)])

inspector = inspect(engine)
assert inspector.get_table_names() == ["t"], inspector.get_table_names()
columns = [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns("t")]
assert columns == [
    ("k", "BIGINT", True),
    ("v", "TEXT", True),
    ("price", "NUMERIC(10, 2)", True),
    ("day", "DATE", True),
], columns
engine.dispose()
print("sqlalchemy ok")

"""psycopg2: client-side parameters, text results, implicit BEGIN / COMMIT.

Usage: psycopg2_client.py PORT
"""

import sys

import psycopg2
import psycopg2.errors

from expected import CREATE, EXPLAIN, ROWS, check_plan, check_rows

conn = psycopg2.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", dbname="postgres")
with conn.cursor() as cur:
    cur.execute(CREATE)
    cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s), (%s, %s, %s, %s), (%s, %s, %s, %s)", sum(ROWS, ()))
    assert cur.rowcount == 3, cur.rowcount
conn.commit()

with conn.cursor() as cur:
    cur.execute("SELECT k, v, price, day FROM t WHERE k = %s", (2,))
    check_rows(cur.fetchall(), [ROWS[1]])
    cur.execute("SELECT k, v, price, day FROM t WHERE day >= %s OR v IS NULL ORDER BY k", (ROWS[0][3],))
    check_rows(cur.fetchall(), ROWS)
    cur.execute(EXPLAIN)
    check_plan([c.name for c in cur.description], cur.fetchall())
conn.commit()

with conn.cursor() as cur:
    try:
        cur.execute("SELECT * FROM missing")
        raise AssertionError("expected UndefinedTable")
    except psycopg2.errors.UndefinedTable as e:
        assert e.pgcode == "42P01", e.pgcode
conn.rollback()

with conn.cursor() as cur:
    cur.execute("SELECT count(*) FROM t")
    check_rows(cur.fetchall(), [(3,)])
    # Arrays arrive as lists; maps and structs as json, which psycopg2 decodes, json[] too.
    cur.execute("SELECT array(1, NULL), map('k', 1), named_struct('x', 1.5D, 'y', 'z'), array(map('a', 1))")
    assert cur.fetchall() == [([1, None], {"k": 1}, {"x": 1.5, "y": "z"}, [{"a": 1}])]
conn.close()
print("psycopg2 ok")

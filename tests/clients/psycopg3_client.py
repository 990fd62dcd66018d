"""psycopg 3: server-side parameters, text and binary results, prepared statements.

Usage: psycopg3_client.py PORT
"""

import sys

import psycopg

from expected import CREATE, EXPLAIN, ROWS, check_plan, check_rows

SELECT = "SELECT k, v, price, day FROM t WHERE k = %s"

with psycopg.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", dbname="postgres") as conn:
    with conn.cursor() as cur:
        cur.execute(CREATE)
        cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)", ROWS[0] + ROWS[1])
        assert cur.rowcount == 2, cur.rowcount
        cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", ROWS[2])
        assert cur.rowcount == 1, cur.rowcount
    conn.commit()

    check_rows(conn.execute(SELECT, (2,)).fetchall(), [ROWS[1]])
    with conn.cursor(binary=True) as cur:
        for k in (1, 2, 3, 1, 2, 3):
            cur.execute(SELECT, (k,), prepare=True)
            check_rows(cur.fetchall(), [ROWS[k - 1]])
        cur.execute("SELECT k, v, price, day FROM t WHERE day >= %s OR v IS NULL ORDER BY k", (ROWS[0][3],))
        check_rows(cur.fetchall(), ROWS)

    cur = conn.execute(EXPLAIN)
    check_plan([c.name for c in cur.description], cur.fetchall())
    conn.commit()

    try:
        conn.execute("SELECT * FROM missing")
        raise AssertionError("expected UndefinedTable")
    except psycopg.errors.UndefinedTable as e:
        assert e.sqlstate == "42P01", e.sqlstate
    conn.rollback()
    check_rows(conn.execute("SELECT count(*) FROM t").fetchall(), [(3,)])
    conn.commit()
print("psycopg 3 ok")

"""pg8000 (DB-API): unnamed extended-protocol statements, text parameters and results.

Usage: pg8000_client.py PORT
"""

import sys

import pg8000.dbapi

from expected import CREATE, EXPLAIN, ROWS, check_plan, check_rows

conn = pg8000.dbapi.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", database="postgres")
cur = conn.cursor()
cur.execute(CREATE)
cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s)", ROWS)
conn.commit()

cur.execute("SELECT k, v, price, day FROM t WHERE k = %s", (2,))
check_rows(cur.fetchall(), [ROWS[1]])
cur.execute("SELECT k, v, price, day FROM t WHERE day >= %s OR v IS NULL ORDER BY k", (ROWS[0][3],))
check_rows(cur.fetchall(), ROWS)
cur.execute(EXPLAIN)
check_plan([c[0] for c in cur.description], cur.fetchall())
conn.commit()

try:
    cur.execute("SELECT * FROM missing")
    raise AssertionError("expected DatabaseError")
except pg8000.dbapi.DatabaseError as e:
    assert e.args[0]["C"] == "42P01", e.args[0]
conn.rollback()

cur.execute("SELECT count(*) FROM t")
check_rows(cur.fetchall(), [(3,)])
conn.close()
print("pg8000 ok")

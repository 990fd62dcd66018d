"""psycopg 3 and asyncpg against a running bucketsql: parameters, binary results, errors.

Usage: python_drivers.py PORT
"""

import asyncio
import sys

import asyncpg
import psycopg

PORT = int(sys.argv[1])


def check_psycopg():
    with psycopg.connect(host="127.0.0.1", port=PORT, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a BIGINT, s STRING) USING parquet")
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (%s, %s), (%s, %s)", (1, "x", 2, "y"))
            assert cur.rowcount == 2, cur.rowcount
        rows = conn.execute("SELECT * FROM t WHERE a = %s", (2,)).fetchall()
        assert rows == [(2, "y")], rows
        # Binary results.
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT a, s FROM t WHERE a = %s", (1,))
            assert cur.fetchall() == [(1, "x")]
        try:
            conn.execute("SELECT * FROM nope")
            raise AssertionError("expected an error")
        except psycopg.errors.UndefinedTable:
            pass
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    # Non-autocommit: psycopg wraps statements in BEGIN / COMMIT.
    with psycopg.connect(host="127.0.0.1", port=PORT, user="postgres", dbname="postgres") as conn:
        conn.execute("INSERT INTO t VALUES (%s, %s)", (3, "z"))
        conn.commit()
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3


async def check_asyncpg():
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="postgres", database="postgres")
    try:
        rows = await conn.fetch("SELECT * FROM t WHERE a = $1", 2)
        assert [tuple(r) for r in rows] == [(2, "y")], rows
        stmt = await conn.prepare("SELECT a, s FROM t WHERE a > $1 ORDER BY a")
        assert [tuple(r) for r in await stmt.fetch(1)] == [(2, "y"), (3, "z")]
        await conn.execute("INSERT INTO t VALUES ($1, $2)", 4, "w")
        assert await conn.fetchval("SELECT count(*) FROM t") == 4
        try:
            await conn.fetch("SELEC 1")
            raise AssertionError("expected an error")
        except asyncpg.PostgresSyntaxError:
            pass
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()


check_psycopg()
asyncio.run(check_asyncpg())
print("python drivers ok")

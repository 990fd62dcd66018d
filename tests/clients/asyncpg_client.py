"""asyncpg: extended protocol only, binary parameters and results, prepared statements.

Usage: asyncpg_client.py PORT
"""

import asyncio
import sys

import asyncpg

from expected import CREATE, EXPLAIN, ROWS, check_plan, check_rows


async def main():
    conn = await asyncpg.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", database="postgres")
    await conn.execute(CREATE)
    assert await conn.execute("INSERT INTO t VALUES ($1, $2, $3, $4)", *ROWS[0]) == "INSERT 0 1"
    await conn.executemany("INSERT INTO t VALUES ($1, $2, $3, $4)", ROWS[1:])

    check_rows(await conn.fetch("SELECT k, v, price, day FROM t WHERE k = $1", 2), [ROWS[1]])
    by_k = await conn.prepare("SELECT k, v, price, day FROM t WHERE k = $1")
    assert [t.name for t in by_k.get_parameters()] == ["int8"], by_k.get_parameters()
    assert [(a.name, a.type.name) for a in by_k.get_attributes()] == [
        ("k", "int8"), ("v", "text"), ("price", "numeric"), ("day", "date")
    ], by_k.get_attributes()
    for k in (1, 2, 3, 1, 2, 3):
        check_rows(await by_k.fetch(k), [ROWS[k - 1]])
    since = await conn.prepare("SELECT k, v, price, day FROM t WHERE day >= $1 OR v IS NULL ORDER BY k")
    check_rows(await since.fetch(ROWS[0][3]), ROWS)

    explain = await conn.prepare(EXPLAIN)
    check_plan([a.name for a in explain.get_attributes()], await explain.fetch())

    try:
        await conn.fetch("SELECT * FROM missing")
        raise AssertionError("expected UndefinedTableError")
    except asyncpg.UndefinedTableError as e:
        assert e.sqlstate == "42P01", e.sqlstate
    assert await conn.fetchval("SELECT count(*) FROM t") == 3
    check_rows(await by_k.fetch(2), [ROWS[1]])
    # A struct in the binary format: json, whose binary form is its text.
    assert await conn.fetchval("SELECT named_struct('x', 1, 'y', 'z')") == '{"x":1,"y":"z"}'
    await conn.close()


asyncio.run(main())
print("asyncpg ok")

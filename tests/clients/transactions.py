"""Transactions as each Python driver uses them in its default mode.

Usage: transactions.py PORT DRIVER   (DRIVER: psycopg2, psycopg3, asyncpg, sqlalchemy)

Each scenario writes a table `t_<driver>` through one connection and checks, through a second
one, what another session sees: nothing before COMMIT, nothing after ROLLBACK.
"""

import asyncio
import sys

PORT = int(sys.argv[1])
DRIVER = sys.argv[2]
TABLE = f"t_{DRIVER}"
DSN = f"host=127.0.0.1 port={PORT} user=postgres dbname=postgres"


def expect(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"


def psycopg2_scenario():
    import psycopg2
    import psycopg2.errors
    import psycopg2.extensions as ext

    conn = psycopg2.connect(DSN)
    other = psycopg2.connect(DSN)
    other.autocommit = True

    def count(c):
        with c.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {TABLE}")
            return cur.fetchone()[0]

    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {TABLE} (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS")
    conn.commit()
    # psycopg2 opens a transaction before the first statement; rollback() discards it.
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {TABLE} VALUES (1, 'one'), (2, 'two')")
        expect(conn.info.transaction_status, ext.TRANSACTION_STATUS_INTRANS, "status inside the transaction")
        expect(count(conn), 2, "own rows before commit")
        expect(count(other), 0, "another session before commit")
    conn.rollback()
    expect(count(conn), 0, "after rollback")
    conn.rollback()
    # An error fails the transaction: the next statement gets 25P02 until rollback().
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {TABLE} VALUES (3, 'three')")
        try:
            cur.execute("SELECT * FROM missing_table")
            raise AssertionError("the missing table was found")
        except psycopg2.errors.UndefinedTable:
            pass
        expect(conn.info.transaction_status, ext.TRANSACTION_STATUS_INERROR, "status after the error")
        try:
            cur.execute("SELECT 1")
            raise AssertionError("a statement ran in a failed transaction")
        except psycopg2.errors.InFailedSqlTransaction:
            pass
    conn.rollback()
    expect(conn.info.transaction_status, ext.TRANSACTION_STATUS_IDLE, "status after rollback")
    expect(count(other), 0, "rows of the failed transaction")
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {TABLE} VALUES (4, 'four')")
    conn.commit()
    expect(count(other), 1, "after commit")


def psycopg3_scenario():
    import psycopg
    from psycopg.pq import TransactionStatus

    with psycopg.connect(DSN) as conn, psycopg.connect(DSN, autocommit=True) as other:
        conn.execute(f"CREATE TABLE {TABLE} (k BIGINT, v STRING) USING parquet")
        conn.commit()
        # A savepoint (nested transaction()) rolled back alone, the outer one committed.
        with conn.transaction():
            conn.execute(f"INSERT INTO {TABLE} VALUES (1, 'kept')")
            try:
                with conn.transaction():
                    conn.execute(f"INSERT INTO {TABLE} VALUES (2, 'undone')")
                    conn.execute("SELECT 1 / 0")
            except psycopg.errors.DivisionByZero:
                pass
            expect(conn.info.transaction_status, TransactionStatus.INTRANS, "status after ROLLBACK TO SAVEPOINT")
            rows = conn.execute(f"SELECT k FROM {TABLE} ORDER BY k").fetchall()
            expect(rows, [(1,)], "own rows after the inner rollback")
            expect(other.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0], 0, "another session before commit")
        expect(other.execute(f"SELECT k FROM {TABLE}").fetchall(), [(1,)], "after commit")


def asyncpg_scenario():
    import asyncpg

    class Undo(Exception):
        pass

    async def main():
        conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="postgres", database="postgres")
        other = await asyncpg.connect(host="127.0.0.1", port=PORT, user="postgres", database="postgres")
        await conn.execute(f"CREATE TABLE {TABLE} (k BIGINT, v STRING) USING parquet PARTITIONED BY (v)")
        # An exception inside transaction() rolls it back.
        try:
            async with conn.transaction():
                await conn.execute(f"INSERT INTO {TABLE} VALUES (1, 'a'), (2, 'b')")
                expect(await conn.fetchval(f"SELECT count(*) FROM {TABLE}"), 2, "own rows")
                expect(await other.fetchval(f"SELECT count(*) FROM {TABLE}"), 0, "another session")
                raise Undo()
        except Undo:
            pass
        expect(conn.is_in_transaction(), False, "in a transaction after the rollback")
        expect(await conn.fetchval(f"SELECT count(*) FROM {TABLE}"), 0, "after the rollback")
        async with conn.transaction(isolation="repeatable_read"):
            await conn.execute(f"INSERT INTO {TABLE} VALUES ($1, $2)", 3, "c")
            expect((await conn.fetchrow("SHOW transaction_isolation"))[-1], "repeatable read", "isolation")
        expect(await other.fetchval(f"SELECT count(*) FROM {TABLE}"), 1, "after commit")
        await conn.close()
        await other.close()

    asyncio.run(main())


def sqlalchemy_scenario():
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{PORT}/postgres")
    with engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE {TABLE} (k BIGINT, v STRING) USING parquet"))

    def visible():
        with engine.connect() as conn:
            return conn.execute(text(f"SELECT count(*) FROM {TABLE}")).scalar()

    with Session(engine) as session:
        session.execute(text(f"INSERT INTO {TABLE} VALUES (1, 'rolled back')"))
        expect(session.execute(text(f"SELECT count(*) FROM {TABLE}")).scalar(), 1, "own row in the session")
        expect(visible(), 0, "another connection before commit")
        session.rollback()
        expect(visible(), 0, "after rollback")
        session.execute(text(f"INSERT INTO {TABLE} VALUES (2, 'committed')"))
        session.commit()
    expect(visible(), 1, "after commit")


{
    "psycopg2": psycopg2_scenario,
    "psycopg3": psycopg3_scenario,
    "asyncpg": asyncpg_scenario,
    "sqlalchemy": sqlalchemy_scenario,
}[DRIVER]()
print(f"{DRIVER}: transactions as expected")

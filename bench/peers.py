#!/usr/bin/env python3
"""bucketsql beside DuckDB on the same Parquet files, in one run.

    python3 bench/peers.py target/release/bucketsql [--rows 10000000] [--buckets 16] [--runs 5]

Starts a server on a fresh data directory and writes, over the wire, the tables `bucketsql
bench` writes: transactions (N rows, `account_id` in [0, N/10)) and accounts (N/10 rows), plain
and bucketed by `account_id` into the given count of buckets. It then times, over the wire,
a join with count/sum and a GROUP BY with top-5 on both layouts, under Spark's defaults and
with broadcasts off, and the same queries in DuckDB (its Python package, two threads) reading
the very Parquet files the server wrote. DuckDB also writes the transactions hash-partitioned
into as many directories, each sorted, for the write comparison. Every query's rows are
compared between the two engines. Prints medians and ratios (bucketsql / DuckDB: below 1 is
faster); `--json FILE` keeps them.

DuckDB and a Postgres driver are installed into a virtual environment on first use
(`--venv`, default ~/.cache/bucketsql-peers-venv).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv

REQUIREMENTS = ['duckdb==2.0.1', 'psycopg[binary]==3.3.9']
THREADS = 2

QUERIES = [
    ('join count/sum',
     'SELECT count(*), sum(t.amount) FROM {tx} t JOIN {acc} a ON t.account_id = a.account_id'),
    ('group by top-5',
     'SELECT account_id, count(*), sum(amount) AS total FROM {tx} GROUP BY account_id '
     'ORDER BY total DESC, account_id LIMIT 5'),
]

SETTINGS = [
    ('defaults', []),
    ('broadcast off', ['SET spark.sql.autoBroadcastJoinThreshold = -1']),
]


def in_venv(path):
    """Re-runs this script under the virtual environment at `path`, made on first use."""
    python = os.path.join(path, 'bin', 'python')
    if os.path.realpath(sys.prefix) == os.path.realpath(path):
        return
    if not os.path.exists(python):
        venv.create(path, with_pip=True)
        subprocess.run([python, '-m', 'pip', 'install', '-q', *REQUIREMENTS], check=True)
    os.execv(python, [python, *sys.argv])


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def median_seconds(run, runs):
    """The median of `runs` timed calls of `run` after one untimed call, and its result."""
    result = run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def rounded(rows):
    return [tuple(round(float(v), 6) if isinstance(v, float) else int(v) for v in row) for row in rows]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('binary')
    parser.add_argument('--rows', type=int, default=10_000_000)
    parser.add_argument('--buckets', type=int, default=16)
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--json')
    parser.add_argument('--venv', default=os.path.expanduser('~/.cache/bucketsql-peers-venv'))
    args = parser.parse_args()
    in_venv(args.venv)
    import duckdb
    import psycopg

    data_dir = tempfile.mkdtemp(prefix='bucketsql-peers-')
    port = free_port()
    server = subprocess.Popen([os.path.abspath(args.binary), 'serve', '--data-dir', data_dir, '--listen',
                               f'127.0.0.1:{port}'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                conn = psycopg.connect(host='127.0.0.1', port=port, user='postgres', autocommit=True)
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            sys.exit('the server did not start')
        results = run(conn, duckdb, args, data_dir)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
    report(results, args)


def run(conn, duckdb, args, data_dir):
    rows, buckets, accounts = args.rows, args.buckets, max(args.rows // 10, 1)

    def sql(text):
        with conn.cursor() as cur:
            cur.execute(text)
            return cur.fetchall() if cur.description else None

    def write(text):
        start = time.perf_counter()
        sql(text)
        return time.perf_counter() - start

    results = {'rows': rows, 'buckets': buckets, 'runs': args.runs, 'writes': {}, 'queries': []}
    writes = results['writes']
    writes['bucketsql plain'] = write(
        f'CREATE TABLE tx_plain USING parquet AS SELECT id AS tx_id, id % {accounts} AS account_id, '
        f'CAST(id % 1000 AS DOUBLE) AS amount FROM range({rows})')
    sql(f"CREATE TABLE acc_plain USING parquet AS SELECT id AS account_id, concat('name', CAST(id AS STRING)) "
        f'AS name FROM range({accounts})')
    # The same source as the bucketed write, so the ratio between them is the layout's cost alone.
    writes['bucketsql plain copy'] = write('CREATE TABLE tx_copy USING parquet AS SELECT * FROM tx_plain')
    writes['bucketsql bucketed'] = write(
        f'CREATE TABLE tx USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO {buckets} BUCKETS '
        'AS SELECT * FROM tx_plain')
    sql(f'CREATE TABLE acc USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO {buckets} BUCKETS '
        'AS SELECT * FROM acc_plain')

    duck = duckdb.connect()
    duck.execute(f'SET threads = {THREADS}')
    warehouse = os.path.join(data_dir, 'warehouse', 'default')
    for table in ['tx_plain', 'acc_plain', 'tx', 'acc']:
        files = os.path.join(warehouse, table, '*.parquet')
        duck.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{files}')")

    out = tempfile.mkdtemp(prefix='duckdb-write-', dir=data_dir)
    start = time.perf_counter()
    duck.execute(f"COPY (SELECT * FROM tx_plain) TO '{out}/plain.parquet' (FORMAT parquet)")
    writes['duckdb plain'] = time.perf_counter() - start
    start = time.perf_counter()
    duck.execute(f'COPY (SELECT *, hash(account_id) % {buckets} AS bucket FROM tx_plain ORDER BY bucket, account_id) '
                 f"TO '{out}/bucketed' (FORMAT parquet, PARTITION_BY (bucket))")
    writes['duckdb hash-partitioned sorted'] = time.perf_counter() - start

    for name, query in QUERIES:
        expected = None
        for layout, tables in [('bucketed', {'tx': 'tx', 'acc': 'acc'}),
                               ('plain', {'tx': 'tx_plain', 'acc': 'acc_plain'})]:
            text = query.format(**tables)
            duck_seconds, duck_rows = median_seconds(lambda: duck.execute(text).fetchall(), args.runs)
            expected = expected or rounded(duck_rows)
            assert rounded(duck_rows) == expected, f'DuckDB answers {name} alike on both layouts'
            for setting, statements in SETTINGS:
                sql('RESET ALL')
                for statement in statements:
                    sql(statement)
                ours, our_rows = median_seconds(lambda: sql(text), args.runs)
                assert rounded(our_rows) == expected, f'{name} on {layout} under {setting}: {our_rows} != {expected}'
                results['queries'].append({'query': name, 'layout': layout, 'settings': setting,
                                           'bucketsql_s': ours, 'duckdb_s': duck_seconds})
    sql('RESET ALL')
    return results


def report(results, args):
    print(f"{results['rows']} rows, {results['buckets']} buckets, median of {results['runs']} runs, "
          f'DuckDB {THREADS} threads on the same Parquet files')
    writes = results['writes']
    for name, seconds in writes.items():
        print(f'write tx {name:<34} {seconds:8.2f} s')
    print(f"bucketed write / plain write (bucketsql): {writes['bucketsql bucketed'] / writes['bucketsql plain']:.2f}x")
    print(f"bucketed write / plain copy of the same rows (bucketsql): "
          f"{writes['bucketsql bucketed'] / writes['bucketsql plain copy']:.2f}x")
    print(f"bucketed write / DuckDB's hash-partitioned sorted write: "
          f"{writes['bucketsql bucketed'] / writes['duckdb hash-partitioned sorted']:.2f}x")
    print(f"{'query':<16} {'layout':<9} {'settings':<14} {'bucketsql ms':>12} {'DuckDB ms':>10} {'ratio':>6}")
    for q in results['queries']:
        print(f"{q['query']:<16} {q['layout']:<9} {q['settings']:<14} {q['bucketsql_s'] * 1000:12.1f} "
              f"{q['duckdb_s'] * 1000:10.1f} {q['bucketsql_s'] / q['duckdb_s']:6.2f}")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2)


if __name__ == '__main__':
    main()

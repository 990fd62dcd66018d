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

    python3 bench/peers.py target/release/bucketsql --tpch 1 [--runs 3] [--data-dir DIR] [--memory-limit SIZE]

runs `bucketsql bench --tpch SF` (TPC-H's 22 queries on plain tables of one Parquet file each
and on bucketed copies, answers checked against the specification's at SF1), then the same
queries in DuckDB over the very files the plain tables are, and compares every answer. Prints
each query's medians, the ratios to DuckDB and their geometric means. The generated files stay
in `--data-dir` for the next run.

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
    parser.add_argument('--tpch', type=float, metavar='SF', help="TPC-H's queries at this scale factor")
    parser.add_argument('--data-dir', help='where --tpch keeps its generated files (default: a temporary one)')
    parser.add_argument('--memory-limit', help="the server's --memory-limit for --tpch (default: its own)")
    args = parser.parse_args()
    in_venv(args.venv)
    import duckdb
    if args.tpch is not None:
        sys.exit(tpch(duckdb, args))
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


def same_value(ours, theirs):
    """Our text of a value against DuckDB's value: numbers to a millionth (DuckDB averages in
    DOUBLE where Spark's are DECIMAL), anything else as text."""
    if ours is None or theirs is None:
        return ours is None and theirs is None
    try:
        a, b = float(ours), float(theirs)
    except ValueError:
        return ours == str(theirs)
    return abs(a - b) <= 1e-6 + abs(b) * 1e-12 or abs(a - b) <= abs(b) * 1e-9


def same_row(ours, theirs):
    return len(ours) == len(theirs) and all(same_value(x, y) for x, y in zip(ours, theirs))


def same_answer(ours, theirs):
    """Row by row, except that rows tied in the ORDER BY may come in either order: where the
    rows at a position differ, they must share a value (the tie), and each row must be matched by
    one of the other answer's."""
    if len(ours) != len(theirs):
        return False
    unmatched = list(theirs)
    for mine, other in zip(ours, theirs):
        if not same_row(mine, other) and not any(same_value(x, y) for x, y in zip(mine, other)):
            return False
        match = next((i for i, row in enumerate(unmatched) if same_row(mine, row)), None)
        if match is None:
            return False
        unmatched.pop(match)
    return True


def tpch(duckdb, args):
    """`bucketsql bench --tpch` and DuckDB over the same files; non-zero when an answer differs."""
    data_dir = args.data_dir or tempfile.mkdtemp(prefix='bucketsql-tpch-')
    report_file = os.path.join(data_dir, 'tpch-report.json')
    try:
        limit = ['--memory-limit', args.memory_limit] if args.memory_limit else []
        subprocess.run([os.path.abspath(args.binary), 'bench', '--tpch', str(args.tpch), '--runs', str(args.runs),
                        '--buckets', str(args.buckets), '--data-dir', data_dir, '--json', report_file, *limit],
                       check=True)
        with open(report_file) as f:
            ours = json.load(f)
        duck = duckdb.connect()
        duck.execute(f'SET threads = {THREADS}')
        for table in ours['tables']:
            files = os.path.join(ours['tables_dir'], table, '*.parquet')
            duck.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{files}')")
        rows = []
        for query in ours['queries']:
            seconds, answer = median_seconds(lambda: duck.execute(query['sql']).fetchall(), args.runs)
            agrees = same_answer(query['rows'], answer)
            rows.append({'query': query['query'], 'plain_ms': query['plain']['median_ms'],
                         'bucketed_ms': query['bucketed']['median_ms'], 'duckdb_ms': seconds * 1000,
                         'agrees': agrees, 'duckdb_rows': len(answer)})
    finally:
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)

    print(f"TPC-H SF{ours['scale']}: bucketsql (plain tables, copies bucketed into {ours['buckets']}) beside "
          f"DuckDB ({THREADS} threads) over the same files, median of {args.runs} runs")
    print(f"{'query':<6} {'plain ms':>10} {'bucketed ms':>12} {'DuckDB ms':>10} {'plain/DuckDB':>13} "
          f"{'bucketed/DuckDB':>16}  answers")
    for r in rows:
        print(f"Q{r['query']:<5} {r['plain_ms']:10.1f} {r['bucketed_ms']:12.1f} {r['duckdb_ms']:10.1f} "
              f"{r['plain_ms'] / r['duckdb_ms']:13.2f} {r['bucketed_ms'] / r['duckdb_ms']:16.2f}  "
              f"{'agree' if r['agrees'] else 'DIFFER'}")

    def geometric_mean(layout):
        return statistics.geometric_mean(r[f'{layout}_ms'] / r['duckdb_ms'] for r in rows)

    def total(column):
        return sum(r[column] for r in rows) / 1000
    print(f"total: plain {total('plain_ms'):.2f} s, bucketed {total('bucketed_ms'):.2f} s, "
          f"DuckDB {total('duckdb_ms'):.2f} s")
    print(f"geometric mean vs DuckDB: plain {geometric_mean('plain'):.2f}x, bucketed {geometric_mean('bucketed'):.2f}x")
    agreeing = sum(r['agrees'] for r in rows)
    print(f'{agreeing} of {len(rows)} answers agree with DuckDB')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'scale': ours['scale'], 'runs': args.runs, 'queries': rows}, f, indent=2)
    return 0 if agreeing == len(rows) else 1


if __name__ == '__main__':
    main()

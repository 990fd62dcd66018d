"""Random queries, answered by bucketsql and by DuckDB on the same rows, must agree.

Usage: random_queries.py PORT SEED QUERIES [--time-budget SECONDS] [--only INDEX] [--jobs N] [--verbose]

Loads the tables of random_query_data.py into the bucketsql server on PORT (over the wire, with
psycopg 3) and into an in-process DuckDB, then runs QUERIES queries from random_query_grammar.py,
each under a random bundle of the Spark settings that change plans (broadcasts off, bucketing off,
coalescing, shuffled hash joins, shuffle partitions that are and are not the bucket count, sorted
bucket scans, adaptive on and off). Query i and its settings depend only on SEED and i, so
`--only i` replays one. Results are compared as multisets (as lists where ORDER BY fixes the
order of every row), numbers within a relative 1e-9, dates as ISO text.

A result that differs, or an error from bucketsql where DuckDB answers, is a failure. Where
DuckDB refuses a value (a CAST that cannot convert; the grammar asks for these only where both
engines must read every row), bucketsql must refuse it too, with a SQLSTATE of class 22. Any
other query DuckDB rejects is a fault of the grammar and fails the run too.

The summary groups wrong rows by the most telling construct of the query (`rollup`,
`window-key`, `cross-join`, ...) and errors by their message, and shows the shortest query of
each group with the fewest settings that still make it fail, and whether it fails with bucketing
off. Exits 1 on any failure, 0 when every query agreed.
"""
import argparse
import datetime
import decimal
import random
import re
import sys
import threading
import time
from collections import Counter, defaultdict

import duckdb
import psycopg

from random_query_data import load
from random_query_grammar import Generator

# Settings and the values a query may get; None keeps the default (every query starts from RESET).
SETTINGS = [
    ('spark.sql.autoBroadcastJoinThreshold', ['-1', '-1', '1000', None, None]),
    ('spark.sql.sources.bucketing.enabled', ['false', None, None, None]),
    ('spark.sql.bucketing.coalesceBucketsInJoin.enabled', ['true', None]),
    ('spark.sql.join.preferSortMergeJoin', ['false', None, None]),
    ('spark.sql.shuffledHashJoinFactor', ['1', None, None]),
    ('spark.sql.shuffle.partitions', ['1', '3', '5', '8', '200']),
    ('spark.sql.legacy.bucketedTableScan.outputOrdering', ['true', None]),
    ('spark.sql.adaptive.enabled', ['true', 'false', None]),
    ('spark.sql.sources.bucketing.autoBucketedScan.enabled', ['false', None, None]),
    ('spark.sql.requireAllClusterKeysForCoPartition', ['false', None, None]),
]
BUCKETING_OFF = ('spark.sql.sources.bucketing.enabled', 'false')
# A failing query is filed under the first of these constructs it uses.
CATEGORIES = ['grouping-sets', 'rollup', 'cube', 'window-key', 'cross-join', 'cast-filter', 'cast-key', 'not-in', 'null-safe-join',
              'expression-key', 'two-key-join', 'full-join', 'right-join', 'anti-join', 'semi-join', 'scalar-subquery',
              'left-join', 'window', 'intersect', 'except', 'union', 'union-all', 'cte', 'distinct-agg', 'distinct',
              'limit', 'multi-join', 'non-equi', 'inner-join', 'having', 'aggregate', 'values', 'range', 'cast', 'or',
              'in-list', 'order-by']
REL_TOL = 1e-9
STATEMENT_TIMEOUT = '60s'


def settings_for(r):
    return [(k, v) for k, vs in SETTINGS for v in [r.choice(vs)] if v is not None]


def query_and_settings(seed, i, tables):
    r = random.Random(f'{seed}:{i}')
    q = Generator(r.random(), tables).query()
    return q, settings_for(r)


# ---- running

class Bucketsql:
    def __init__(self, port):
        self.port = port
        self.conn = None
        self.connect()

    def connect(self):
        self.conn = psycopg.connect(host='127.0.0.1', port=self.port, user='postgres', dbname='postgres', autocommit=True)

    def run(self, settings, text):
        """('rows', rows) or ('error', sqlstate, message)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute('RESET')
                cur.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
                for k, v in settings:
                    cur.execute(f'SET {k} = {v}')
                cur.execute(text)
                return ('rows', cur.fetchall())
        except psycopg.OperationalError as e:
            if not self.conn.closed:
                return ('error', e.sqlstate or '?', first_line(e))
            self.connect()
            return ('error', 'connection lost', first_line(e))
        except psycopg.Error as e:
            return ('error', e.sqlstate or '?', first_line(e))


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def run_duckdb(dk, text):
    """('rows', rows), ('data error', class, message) for a value that cannot be converted
    (which bucketsql must refuse too), or ('error', class, message): a grammar fault."""
    try:
        return ('rows', dk.execute(text).fetchall())
    except duckdb.DataError as e:
        return ('data error', type(e).__name__, first_line(e))
    except duckdb.Error as e:
        return ('error', type(e).__name__, first_line(e))


# ---- comparing

def is_number(x):
    return isinstance(x, (int, float, decimal.Decimal)) and not isinstance(x, bool)


def text_of(x):
    return x.isoformat() if isinstance(x, (datetime.date, datetime.datetime)) else str(x)


def same_value(a, b):
    if a is None or b is None:
        return a is None and b is None
    if is_number(a) and is_number(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        fa, fb = float(a), float(b)
        return abs(fa - fb) <= REL_TOL * max(1.0, abs(fa), abs(fb))
    if is_number(a) or is_number(b):
        return False
    return text_of(a) == text_of(b)


def same_row(a, b):
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))


def value_key(x):
    if x is None:
        return (0, 0.0, '')
    if is_number(x):
        return (1, float(f'{float(x):.8g}'), '')
    return (2, 0.0, text_of(x))


def row_key(row):
    return tuple(value_key(x) for x in row)


def multiset_diff(got, want):
    """Rows of `got` with no equal row in `want` and the other way round (numbers within tolerance)."""
    got, want = sorted(got, key=row_key), sorted(want, key=row_key)
    if len(got) == len(want) and all(same_row(a, b) for a, b in zip(got, want)):
        return [], []
    by_key = defaultdict(list)
    for row in want:
        by_key[row_key(row)].append(row)
    only_got = []
    for row in got:
        bucket = by_key.get(row_key(row))
        if bucket:
            bucket.pop()
        else:
            only_got.append(row)
    only_want = [row for rows in by_key.values() for row in rows]
    # Values rounded to different keys can still be equal within the tolerance.
    for row in list(only_got):
        match = next((w for w in only_want if same_row(row, w)), None)
        if match is not None:
            only_got.remove(row)
            only_want.remove(match)
    return only_got, only_want


def compare(bs_rows, dk_rows, ordered):
    """None when the results agree, else a description of how they differ."""
    only_bs, only_dk = multiset_diff(bs_rows, dk_rows)
    if only_bs or only_dk:
        return (f'bucketsql {len(bs_rows)} rows, DuckDB {len(dk_rows)} rows; '
                f'only in bucketsql ({len(only_bs)}): {show_rows(only_bs)}; only in DuckDB ({len(only_dk)}): {show_rows(only_dk)}')
    if ordered:
        for n, (a, b) in enumerate(zip(bs_rows, dk_rows)):
            if not same_row(a, b):
                return f'same rows in another order: row {n + 1} is {show_rows([a])} in bucketsql, {show_rows([b])} in DuckDB'
    return None


def show_rows(rows, limit=5):
    shown = ', '.join('(' + ', '.join('NULL' if x is None else repr(text_of(x)) if not is_number(x) else str(x) for x in row) + ')'
                      for row in sorted(rows, key=row_key)[:limit])
    return shown + (', ...' if len(rows) > limit else '')


# ---- one query

class Outcome:
    def __init__(self, index, query, settings, kind, detail, sqlstate=None, seconds=0.0):
        self.index, self.query, self.settings = index, query, settings
        self.kind, self.detail, self.sqlstate, self.seconds = kind, detail, sqlstate, seconds

    def category(self):
        """The first of CATEGORIES that the query uses."""
        return next((c for c in CATEGORIES if c in self.query.tags), 'scan')

    def group(self):
        """Wrong rows are grouped by construct, errors by message (without names, numbers and the
        prefixes that only say where in the engine it was raised)."""
        if self.kind == 'wrong':
            return f'wrong rows: {self.category()}'
        message = re.sub(r'"[^"]*"|\'[^\']*\'|`[^`]*`|\[[^\]]*\]', '…', self.detail)
        message = re.sub(r'\b\w+\.\w+\b|\b\d+\b', '…', message)
        message = re.sub(r'^((Internal error|Error during planning|Arrow error|Invalid argument error|'
                         r'This feature is not implemented): )+', '', message)
        return f'error: {message[:150]}'


def check(bs, dk, index, query, settings):
    """Outcome of one query: kind 'agree', 'wrong', 'error' or 'rejected' (by DuckDB)."""
    want = run_duckdb(dk, query.text.dk)
    if want[0] == 'rows' and query.unconvertible is not None and dk.execute(query.unconvertible.dk).fetchone()[0] > 0:
        want = ('data error', 'ConversionException', 'some value does not convert (DuckDB TRY_CAST)')
    if want[0] == 'error':
        return Outcome(index, query, settings, 'rejected', f'{want[1]}: {want[2]}')
    started = time.monotonic()
    got = bs.run(settings, query.text.bs)
    seconds = time.monotonic() - started
    if want[0] == 'data error':
        if got[0] == 'rows':
            detail = f'bucketsql returned {len(got[1])} rows where DuckDB refused a value: {want[2]}'
            return Outcome(index, query, settings, 'wrong', detail, seconds=seconds)
        if got[1].startswith('22'):
            return Outcome(index, query, settings, 'agree', None, seconds=seconds)
    if got[0] == 'error':
        return Outcome(index, query, settings, 'error', got[2], got[1], seconds)
    diff = compare(got[1], want[1], query.ordered)
    return Outcome(index, query, settings, 'wrong' if diff else 'agree', diff, seconds=seconds)


def same_failure(a, b):
    return a.kind == b.kind and a.sqlstate == b.sqlstate


def fewest_settings(bs, dk, failure):
    """Drops each setting that the failure does not need."""
    settings = list(failure.settings)
    for s in list(settings):
        trial = [x for x in settings if x != s]
        if same_failure(check(bs, dk, failure.index, failure.query, trial), failure):
            settings = trial
    return check(bs, dk, failure.index, failure.query, settings)


# ---- the run

def describe(outcome):
    lines = [f'  query #{outcome.index}; constructs: {", ".join(sorted(t for t in outcome.query.tags if not t.startswith("table:")))}',
             f'  tables: {", ".join(sorted(t[6:] for t in outcome.query.tags if t.startswith("table:")))}']
    lines += [f'  SET {k} = {v};' for k, v in outcome.settings] or ['  (default settings)']
    lines.append(f'  {outcome.query.text.bs};')
    if outcome.query.text.dk != outcome.query.text.bs:
        lines.append(f'  -- as DuckDB reads it: {outcome.query.text.dk};')
    lines.append(f'  {"SQLSTATE " + outcome.sqlstate + ": " if outcome.kind == "error" else ""}{outcome.detail}')
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('port', type=int)
    ap.add_argument('seed', type=int)
    ap.add_argument('queries', type=int)
    ap.add_argument('--time-budget', type=float, help='stop starting queries after this many seconds')
    ap.add_argument('--only', type=int, help='run only query INDEX')
    ap.add_argument('--jobs', type=int, default=2, help='queries run at once, each on its own connection')
    ap.add_argument('--verbose', action='store_true', help='print every query and its outcome')
    args = ap.parse_args()

    started = time.monotonic()
    bs = Bucketsql(args.port)
    dk = duckdb.connect()
    dk.execute('SET threads = 1')
    # DuckDB 2.0.1 crashes on some IN lists over an outer join of a window (its in_clause
    # rewrite); without that rewrite it answers them.
    dk.execute("SET disabled_optimizers = 'in_clause'")
    tables = load(random.Random(args.seed), bs.conn, dk)
    print(f'loaded {len(tables)} tables ({sum(tables.values())} rows) in {time.monotonic() - started:.1f} s', flush=True)

    indexes = iter([args.only] if args.only is not None else range(args.queries))
    outcomes, lock = [], threading.Lock()
    run_started = time.monotonic()

    def worker(bs, dk):
        while True:
            with lock:
                i = next(indexes, None)
                if i is None or (args.time_budget is not None and time.monotonic() - started > args.time_budget):
                    return
            query, settings = query_and_settings(args.seed, i, tables)
            outcome = check(bs, dk, i, query, settings)
            with lock:
                outcomes.append(outcome)
                if args.verbose or args.only is not None:
                    print(f'#{i} {outcome.kind}\n{describe(outcome)}', flush=True)
                if len(outcomes) % 250 == 0:
                    failed = sum(o.kind in ('wrong', 'error', 'rejected') for o in outcomes)
                    print(f'{len(outcomes)} queries, {failed} failures, {time.monotonic() - run_started:.0f} s', flush=True)

    threads = [threading.Thread(target=worker, args=(bs, dk) if n == 0 else (Bucketsql(args.port), dk.cursor()))
               for n in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - run_started
    outcomes.sort(key=lambda o: o.index)
    counts = Counter(o.kind for o in outcomes)
    failures = [o for o in outcomes if o.kind in ('wrong', 'error')]
    rejected = [o for o in outcomes if o.kind == 'rejected']
    if len(outcomes) < args.queries and args.only is None:
        print(f'time budget of {args.time_budget:.0f} s spent after {len(outcomes)} of {args.queries} queries')

    ran = len(outcomes)
    print(f'\n{ran} queries (seed {args.seed}) in {elapsed:.1f} s ({ran / max(elapsed, 1e-9):.1f}/s): {counts["agree"]} agree, '
          f'{counts["wrong"]} wrong rows, {counts["error"]} bucketsql errors, {counts["rejected"]} rejected by DuckDB')
    slowest = max(outcomes, key=lambda o: o.seconds, default=None)
    if slowest is not None:
        print(f'slowest query: #{slowest.index}, {slowest.seconds:.2f} s')
    groups = defaultdict(list)
    for f in failures:
        groups[f.group()].append(f)
    ordered_groups = sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))
    for name, fs in ordered_groups:
        constructs = Counter(f.category() for f in fs).most_common(4)
        states = '' if name.startswith('wrong') else f'SQLSTATE {"/".join(sorted({f.sqlstate for f in fs}))}; '
        print(f'  {len(fs):5d}  {name}  [{states}{", ".join(f"{c} {n}" for c, n in constructs)}]')
    # Reducing settings replays queries: a minute past the budget, groups are shown as they failed.
    deadline = started + (args.time_budget or float('inf')) + 60
    for name, fs in ordered_groups:
        smallest = min(fs, key=lambda f: (len(f.query.text.bs), len(f.settings)))
        if time.monotonic() > deadline:
            print(f'\n== {name} ({len(fs)} queries); the shortest (settings not reduced: out of time):\n{describe(smallest)}')
            continue
        reduced = fewest_settings(bs, dk, smallest)
        if reduced.kind not in ('wrong', 'error'):
            reduced = smallest  # flaky: show it as it first failed
        print(f'\n== {name} ({len(fs)} queries); the shortest, with the settings it needs:\n{describe(reduced)}')
        if BUCKETING_OFF not in reduced.settings:
            off = check(bs, dk, reduced.index, reduced.query, [s for s in reduced.settings if s[0] != BUCKETING_OFF[0]] + [BUCKETING_OFF])
            verdict = {'agree': 'agrees', 'wrong': 'wrong rows'}.get(off.kind, f'{off.kind} {off.sqlstate or ""}'.strip())
            print(f'  with {BUCKETING_OFF[0]} = false: {verdict}')
        print(f'  replay: random_queries.py PORT {args.seed} {args.queries} --only {reduced.index}')
    for r in rejected[:10]:
        print(f'\n== rejected by DuckDB (a grammar fault):\n{describe(r)}')
    print(f'\n{"FAILED" if failures or rejected else "OK"}: {ran} queries, {counts["agree"]} agree, '
          f'{len(failures)} failures in {len(groups)} groups, {len(rejected)} rejected by DuckDB')
    sys.exit(1 if failures or rejected else 0)


if __name__ == '__main__':
    main()

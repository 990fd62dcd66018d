#!/usr/bin/env python3
"""Soak test: many clients hammer one real bucketsql server for a while, then every
acknowledged write is accounted for and the server's memory and descriptors are judged.

Usage (needs psycopg 3, e.g. the venv that `cargo test --test main -- clients` creates under
the target directory: `<target>/tmp/python-clients/bin/python`):

    python tests/reliability/soak.py --binary target/release/bucketsql \
        --clients 32 --seconds 600 --seed 1 [--memory-limit 1GiB]

`--mix kind=weight,...` replaces the statement mix (to chase one kind of statement); the
other options are in `--help`.

What it does:

1. Starts `BINARY serve --listen 127.0.0.1:PORT --data-dir TMP/data [--memory-limit X]` on a
   free port and waits until it accepts connections (server log: TMP/server.log).
2. Creates three shared tables with the same columns (id, k, v, amount): `soak_events` and
   `soak_dims`, both `CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS` (so they join without an
   exchange), and `soak_plain`, not bucketed. Every row is derived from its id
   (k = id * 2654435761 % 50000, v = prefix || id, amount = (id % 1000) * 0.5), so any row
   read back can be checked on its own.
3. Runs --clients threads, each on its own connection (with its own bundle of planner
   settings), for --seconds, each picking statements from a weighted mix (see KINDS):
   - INSERT ... VALUES with literals and with parameters, COPY FROM STDIN (text and binary)
     and INSERT ... SELECT FROM range() into the shared tables, each batch taking fresh,
     globally unique ids, recorded as acknowledged only once the statement succeeded;
   - joins and aggregates over the shared tables, EXPLAIN and EXPLAIN FORMATTED;
   - point lookups: rows acknowledged before the query are visible, and nothing else is (no
     duplicates, no row of a failed INSERT, no row nobody inserted); count(*) lies between
     what was acknowledged before and what was attempted after;
   - INSERT OVERWRITE of the client's own table: afterwards it holds exactly what was
     written, and after a failed one exactly what it held before;
   - CREATE TABLE (bucketed, partitioned, plain, CTAS) and DROP TABLE of the client's own
     tables, checked against SHOW TABLES (a CREATE that failed leaves no table);
   - a large-ish SELECT whose rows are all checked, catalog queries, OPTIMIZE of a shared
     table, and reconnects.
   Every statement is timed. Every INSERT adds a file per bucket it touches and the cost of a
   scan (time and memory) grows with the files it reads, so one more connection keeps the
   workload stationary: it runs OPTIMIZE on each shared table holding more than
   --compact-above files ("compaction").
4. Counts errors by SQLSTATE. None is expected, except 40001 for OPTIMIZE and compaction
   (two OPTIMIZEs of one table race to replace the same files; the loser is told to run again), 53200 (out of
   memory) when --memory-limit is given, and those named with --allow-sqlstate. An
   unexpected SQLSTATE (so any XX000, or 53300 "too many clients"), a dropped connection, a
   statement still running --grace seconds after the end, a panic in the server log or the
   server exiting is a failure, as is any failed check above.
5. Samples the server's VmRSS / VmHWM / Threads (/proc/PID/status), its open descriptors
   (/proc/PID/fd) and the data files under the warehouse every --sample-interval seconds.
   Memory is "flat" when, after the warm-up (the first quarter of the run), the largest RSS
   of the last quarter is at most the largest of the second quarter times (1 + --rss-margin)
   plus --rss-slack-mib; descriptors likewise (x1.5 + 32); and once every client has
   disconnected the descriptor count must come back to within 16 of what it was before the
   clients started. RSS follows the number of files the queries scan, so the file counts are
   reported next to it; gaps in the sampling (the whole host stalled) are reported too.
6. At the end, for each shared table: `SELECT id` compared with the acknowledged set (nothing
   lost, nothing duplicated, nothing unexpected, nothing of a failed INSERT), count(*) agrees,
   every row's columns agree with its id, and point lookups on a sample of keys find exactly
   the rows of that key (so rows sit in their buckets); SHOW TABLES lists exactly the tables
   that should exist. Then the server is stopped and started again on the same data
   directory and the rows are compared once more (skip with --no-restart-check).
7. Prints a summary (statements per kind, latency p50/p95/p99/max, errors by SQLSTATE,
   memory and descriptors) and, as the last line, `RESULT {json}`. Exits 1 on any failure.

The data directory is removed after a run that passed and kept (its path printed) otherwise,
or always with --keep.
"""

import argparse
import bisect
import collections
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psycopg

KEYS = 50_000
KEY_MULTIPLIER = 2654435761
BUCKETS = 8
SHARED = {
    # name: (value prefix, CREATE clauses)
    'soak_events': ('e', f'CLUSTERED BY (k) SORTED BY (k) INTO {BUCKETS} BUCKETS'),
    'soak_dims': ('d', f'CLUSTERED BY (k) SORTED BY (k) INTO {BUCKETS} BUCKETS'),
    'soak_plain': ('p', ''),
}
# Which shared table an INSERT goes to: dims get fewer rows, so joins stay affordable.
INSERT_TABLES = (['soak_events', 'soak_dims', 'soak_plain'], [5, 2, 3])
COLUMNS = 'id BIGINT, k BIGINT, v STRING, amount DOUBLE'

# Statement kinds and their weights in each client's mix.
KINDS = {
    'insert_values': 14,
    'insert_params': 6,
    'copy_in': 4,
    'insert_select': 3,
    'join': 10,
    'aggregate': 10,
    'point_lookup': 8,
    'count_bounds': 3,
    'explain': 4,
    'explain_formatted': 4,
    'overwrite': 5,
    'ddl': 4,
    'large_select': 2,
    'catalog': 3,
    'optimize': 1,
    'reconnect': 1,
}

# SQLSTATEs that are not failures for one kind of statement: two OPTIMIZEs of the same table
# race to replace the same files, and the loser is told to run again.
EXPECTED_BY_KIND = {'optimize': {'40001'}, 'compaction': {'40001'}}

# Per-connection planner settings; each client takes one bundle, round robin.
SETTING_BUNDLES = [
    [],
    [('spark.sql.autoBroadcastJoinThreshold', '-1')],
    [('spark.sql.adaptive.enabled', 'false'), ('spark.sql.shuffle.partitions', '8')],
    [('spark.sql.legacy.bucketedTableScan.outputOrdering', 'true'),
     ('spark.sql.autoBroadcastJoinThreshold', '-1')],
    [('spark.sql.sources.bucketing.enabled', 'false')],
]

JOINS = [
    'SELECT count(*), sum(e.amount + d.amount) FROM soak_events e JOIN soak_dims d ON e.k = d.k',
    'SELECT e.k, count(*) AS n FROM soak_events e JOIN soak_dims d ON e.k = d.k '
    'WHERE e.k % 50 = {r50} GROUP BY e.k ORDER BY n DESC, e.k LIMIT 10',
    'SELECT count(*) FROM soak_events e JOIN soak_plain p ON e.k = p.k WHERE p.k < {x}',
    'SELECT e.id, d.id FROM soak_events e JOIN soak_dims d ON e.k = d.k WHERE e.k = {k}',
    'SELECT count(*), count(d.id) FROM soak_events e LEFT JOIN soak_dims d '
    'ON e.k = d.k AND d.amount > 100 WHERE e.k BETWEEN {x} AND {x} + 200',
    'SELECT /*+ MERGE(d) */ count(*) FROM soak_events e JOIN soak_dims d ON e.k = d.k WHERE e.k < {x}',
    'SELECT /*+ SHUFFLE_HASH(p) */ count(*), max(p.id) FROM soak_plain p JOIN soak_dims d ON p.k = d.k',
    'SELECT count(*) FROM soak_events e WHERE e.k IN (SELECT k FROM soak_dims WHERE amount < 10)',
]
AGGREGATES = [
    'SELECT k % 100 AS g, count(*), sum(amount), min(id), max(id) FROM soak_events GROUP BY k % 100 ORDER BY g',
    'SELECT count(*), count(DISTINCT k), sum(amount) FROM soak_plain',
    'SELECT k, count(*) AS n FROM soak_events GROUP BY k ORDER BY n DESC, k LIMIT 5',
    'SELECT k, sum(amount), count(*) FROM soak_dims WHERE k IN ({k}, {k2}, {k3}) GROUP BY k',
    'SELECT g, count(*) FROM (SELECT k % 10 AS g FROM soak_plain) t GROUP BY ROLLUP (g) ORDER BY g',
    'SELECT k, id, row_number() OVER (PARTITION BY k ORDER BY id) AS rn FROM soak_events WHERE k IN ({k}, {k2})',
    'SELECT count(*) FROM (SELECT k FROM soak_events UNION ALL SELECT k FROM soak_plain) u WHERE k < {x}',
    'SELECT k % 7 AS g, avg(amount), max(v) FROM soak_dims GROUP BY k % 7',
]


def key_of(i):
    return i * KEY_MULTIPLIER % KEYS


def row_of(table, i):
    return (i, key_of(i), SHARED[table][0] + str(i), (i % 1000) * 0.5)


def row_ok(table, row):
    return tuple(row) == row_of(table, row[0])


def integrity_violations_sql(table):
    prefix = SHARED[table][0]
    return (f"SELECT count(*) FROM {table} WHERE k <> (id * {KEY_MULTIPLIER}) % {KEYS} "
            f"OR v <> concat('{prefix}', CAST(id AS STRING)) OR amount <> CAST(id % 1000 AS DOUBLE) * 0.5 "
            f"OR k IS NULL OR v IS NULL OR amount IS NULL")


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def short(sql, limit=300):
    sql = ' '.join(str(sql).split())
    return sql if len(sql) <= limit else sql[:limit] + '…'


class Ledger:
    """Every id handed out, in batches (one per INSERT/COPY), and what became of each batch:
    'inflight', 'acked' (the statement succeeded), 'failed' (it returned an error, so none of
    its rows may appear) or 'in_doubt' (the connection dropped: either outcome is fine)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next_id = 1
        self.starts = []    # first id of each batch, increasing
        self.batches = []   # [table, lo, hi, state]
        self.acked_batches = collections.defaultdict(list)
        self.acked_rows = collections.Counter()
        self.allocated_rows = collections.Counter()

    def allocate(self, table, n):
        with self.lock:
            lo = self.next_id
            self.next_id += n
            self.starts.append(lo)
            self.batches.append([table, lo, lo + n, 'inflight'])
            self.allocated_rows[table] += n
            return len(self.batches) - 1, lo, lo + n

    def settle(self, batch, state):
        with self.lock:
            b = self.batches[batch]
            b[3] = state
            if state == 'acked':
                self.acked_batches[b[0]].append(batch)
                self.acked_rows[b[0]] += b[2] - b[1]

    def lookup(self, i):
        """(table, state) of the batch holding id i, or None if it was never handed out."""
        with self.lock:
            at = bisect.bisect_right(self.starts, i) - 1
            if at < 0:
                return None
            table, lo, hi, state = self.batches[at]
            return (table, state) if lo <= i < hi else None

    def sample_acked(self, table, rng, n):
        with self.lock:
            batches = self.acked_batches[table]
            if not batches:
                return []
            ids = []
            for _ in range(n):
                _, lo, hi, _ = self.batches[rng.choice(batches)]
                ids.append(rng.randrange(lo, hi))
            return ids

    def ids(self, table, state):
        with self.lock:
            out = set()
            for t, lo, hi, s in self.batches:
                if t == table and s == state:
                    out.update(range(lo, hi))
            return out


class ConnectionLost(Exception):
    pass


class StatementError(Exception):
    def __init__(self, sqlstate):
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


class Soak:
    def __init__(self, args):
        self.args = args
        self.mix = args.mix or KINDS
        self.allowed = set(args.allow_sqlstate or [])
        if args.memory_limit:
            self.allowed.add('53200')
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ledger = Ledger()
        self.ok = collections.Counter()
        self.errors = collections.Counter()          # kind -> statements that failed
        self.sqlstates = collections.Counter()       # sqlstate -> count
        self.error_examples = {}                     # sqlstate -> first (kind, sql, message)
        self.latencies = collections.defaultdict(list)
        self.failures = []
        self.samples = []                            # (t, rss KiB, hwm KiB, fds, threads, files)
        self.server = None
        self.server_gone = False
        self.run_started = None
        self.run_seconds = args.seconds
        self.root = tempfile.mkdtemp(prefix='bucketsql-soak-')
        self.data_dir = os.path.join(self.root, 'data')
        self.log_path = os.path.join(self.root, 'server.log')
        self.port = None
        self.log_summary = {}

    # -- bookkeeping -------------------------------------------------------------------

    def fail(self, what, **details):
        entry = {'what': what, **details}
        with self.lock:
            self.failures.append(entry)
        print(f'FAILURE: {what} {json.dumps(details, default=str)[:600]}', file=sys.stderr, flush=True)

    def record_ok(self, kind, seconds):
        with self.lock:
            self.ok[kind] += 1
            self.latencies[kind].append(seconds * 1000)

    def record_error(self, kind, sql, sqlstate, message):
        with self.lock:
            self.errors[kind] += 1
            self.sqlstates[sqlstate] += 1
            self.error_examples.setdefault(sqlstate, {'kind': kind, 'sql': short(sql), 'message': message[:300]})
        if sqlstate not in self.allowed and sqlstate not in EXPECTED_BY_KIND.get(kind, ()):
            self.fail('unexpected error', kind=kind, sqlstate=sqlstate, message=message[:500], sql=short(sql))

    # -- server --------------------------------------------------------------------------

    def start_server(self):
        for _ in range(5):
            with socket.socket() as s:
                s.bind(('127.0.0.1', 0))
                self.port = s.getsockname()[1]
            command = [self.args.binary, 'serve', '--listen', f'127.0.0.1:{self.port}', '--data-dir', self.data_dir]
            if self.args.memory_limit:
                command += ['--memory-limit', self.args.memory_limit]
            env = dict(os.environ)
            env.setdefault('RUST_LOG', 'warn')
            log = open(self.log_path, 'a')
            log.write(f'### {" ".join(command)}\n')
            log.flush()
            self.server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.server.poll() is None:
                try:
                    self.connect().close()
                    return
                except psycopg.OperationalError:
                    time.sleep(0.1)
            if self.server.poll() is None:
                raise SystemExit(f'server did not accept connections within 60 s (log: {self.log_path})')
            # Most likely the port was taken in between: try another.
        raise SystemExit(f'server failed to start (log: {self.log_path}):\n{self.log_tail()}')

    def stop_server(self):
        if self.server and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        return self.server.returncode if self.server else None

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, errors='replace') as f:
                return ''.join(f.readlines()[-lines:])
        except OSError:
            return ''

    def connect(self, settings=()):
        conn = psycopg.connect(host='127.0.0.1', port=self.port, user='postgres', dbname='postgres',
                               autocommit=True, connect_timeout=10)
        for name, value in settings:
            conn.execute(f'SET {name} = {value}')
        return conn

    def proc_sample(self):
        pid = self.server.pid
        fields = {}
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                name, _, value = line.partition(':')
                if name in ('VmRSS', 'VmHWM', 'Threads'):
                    fields[name] = int(value.split()[0])
        fds = len(os.listdir(f'/proc/{pid}/fd'))
        return fields.get('VmRSS', 0), fields.get('VmHWM', 0), fds, fields.get('Threads', 0)

    def sampler(self):
        last_progress = time.monotonic()
        while not self.stop.is_set():
            if self.server.poll() is not None:
                self.server_gone = True
                self.fail('server exited', returncode=self.server.returncode, log_tail=self.log_tail(15))
                self.stop.set()
                return
            try:
                rss, hwm, fds, threads = self.proc_sample()
                self.samples.append((time.monotonic() - self.run_started, rss, hwm, fds, threads,
                                     self.count_files()))
            except OSError:
                pass
            if time.monotonic() - last_progress >= 10 and self.samples:
                last_progress = time.monotonic()
                with self.lock:
                    done, failed = sum(self.ok.values()), sum(self.errors.values())
                t, rss, hwm, fds, threads, files = self.samples[-1]
                print(f'  t={t:5.0f}s statements={done} errors={failed} rss={rss / 1024:.0f}MiB '
                      f'hwm={hwm / 1024:.0f}MiB fds={fds} threads={threads} files={files} '
                      f'acked_rows={sum(self.ledger.acked_rows.values())}', file=sys.stderr, flush=True)
            self.stop.wait(self.args.sample_interval)

    # -- the run -------------------------------------------------------------------------

    def setup(self):
        with self.connect() as conn:
            for table, (_, clauses) in SHARED.items():
                conn.execute(f'CREATE TABLE {table} ({COLUMNS}) USING parquet {clauses}')
            # A few rows so that the first joins and lookups have something to read.
            for table in SHARED:
                batch, lo, hi = self.ledger.allocate(table, 100)
                conn.execute(f'INSERT INTO {table} VALUES ' + ', '.join(
                    "({}, {}, '{}', {!r})".format(*row_of(table, i)) for i in range(lo, hi)))
                self.ledger.settle(batch, 'acked')
        time.sleep(0.5)
        return self.proc_sample()

    def run(self):
        args = self.args
        print(f'bucketsql soak: {args.clients} clients, {args.seconds} s, seed {args.seed}, '
              f'memory limit {args.memory_limit or "default"}, data {self.data_dir}', flush=True)
        self.start_server()
        print(f'server pid {self.server.pid} on port {self.port}', flush=True)
        baseline = self.setup()
        clients = [Client(self, i) for i in range(args.clients)]
        if args.compact_above:
            clients.append(Compactor(self, args.clients))
        self.run_started = time.monotonic()
        self.deadline = self.run_started + args.seconds
        sampler = threading.Thread(target=self.sampler, daemon=True)
        sampler.start()
        for c in clients:
            c.start()
        give_up = self.deadline + args.grace
        for c in clients:
            c.join(max(0.0, give_up - time.monotonic()))
        stuck = [c for c in clients if c.is_alive()]
        for c in stuck:
            current = c.current
            self.fail('statement still running after the end of the run', client=c.index,
                      kind=current and current[0], sql=current and short(current[1]),
                      running_s=current and round(time.monotonic() - current[2], 1))
            c.cancel()
        for c in stuck:
            c.join(10)
        self.stop.set()
        sampler.join()
        if self.server.poll() is not None and not self.server_gone:
            self.server_gone = True
            self.fail('server exited', returncode=self.server.returncode, log_tail=self.log_tail(15))
        actual_seconds = time.monotonic() - self.run_started

        idle = None
        if not self.server_gone:
            idle = self.settle_idle(baseline)
        verify = {}
        catalog = {}
        restart = None
        if not self.server_gone:
            try:
                with self.connect() as conn:
                    verify = self.verify_rows(conn, 'end')
                    catalog = self.verify_catalog(conn, clients)
                if args.restart_check:
                    code = self.stop_server()
                    self.start_server()
                    with self.connect() as conn:
                        tables = self.verify_rows(conn, 'after restart', point_lookups=0)
                    restart = {'previous_exit': code, **{
                        name: {k: v for k, v in info.items() if k in ('rows', 'missing', 'duplicates', 'unexpected')}
                        for name, info in tables.items()}}
            except psycopg.Error as e:
                self.fail('verification failed to run', sqlstate=getattr(e, 'sqlstate', None), message=str(e)[:500])
        exit_code = self.stop_server()
        self.check_log()
        return self.report(baseline, idle, verify, catalog, restart, actual_seconds, exit_code)

    def settle_idle(self, baseline):
        """Once every client is gone, descriptors should return to about where they started."""
        limit = baseline[2] + 16
        end = time.monotonic() + 15
        sample = self.proc_sample()
        while sample[2] > limit and time.monotonic() < end:
            time.sleep(0.5)
            sample = self.proc_sample()
        if sample[2] > limit:
            self.fail('descriptors not released after every client disconnected',
                      baseline_fds=baseline[2], idle_fds=sample[2],
                      fd_targets=self.fd_targets())
        return sample

    def count_files(self, table=None):
        """Files under the warehouse, or under one shared table's directory."""
        top = os.path.join(self.data_dir, 'warehouse', *(('default', table) if table else ()))
        return sum(len(files) for _, _, files in os.walk(top))

    def fd_targets(self, limit=40):
        targets = collections.Counter()
        fd_dir = f'/proc/{self.server.pid}/fd'
        try:
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(os.path.join(fd_dir, fd))
                except OSError:
                    continue
                if target.startswith(self.data_dir):
                    target = '<data>' + target[len(self.data_dir):]
                    target = target.rsplit('/', 1)[0] + '/…'
                targets[target.split('[')[0]] += 1
        except OSError:
            pass
        return dict(targets.most_common(limit))

    def verify_rows(self, conn, when, point_lookups=100):
        rng = random.Random(self.args.seed ^ 0x5eed)
        out = {}
        for table in SHARED:
            acked = self.ledger.ids(table, 'acked')
            failed = self.ledger.ids(table, 'failed')
            in_doubt = self.ledger.ids(table, 'in_doubt') | self.ledger.ids(table, 'inflight')
            ids = [r[0] for r in conn.execute(f'SELECT id FROM {table}').fetchall()]
            present = set(ids)
            counted = conn.execute(f'SELECT count(*) FROM {table}').fetchone()[0]
            dup_rows = conn.execute(f'SELECT id, count(*) FROM {table} GROUP BY id HAVING count(*) > 1 '
                                    f'ORDER BY id LIMIT 20').fetchall()
            bad_rows = conn.execute(integrity_violations_sql(table)).fetchone()[0]
            duplicates = len(ids) - len(present)
            missing = acked - present
            unexpected = present - acked - in_doubt - failed
            failed_present = present & failed
            info = {'acked': len(acked), 'rows': len(ids), 'count': counted, 'duplicates': duplicates,
                    'missing': len(missing), 'unexpected': len(unexpected), 'failed_present': len(failed_present),
                    'in_doubt': len(in_doubt), 'in_doubt_present': len(present & in_doubt),
                    'bad_rows': bad_rows}
            if missing:
                self.fail(f'{when}: acknowledged rows lost', table=table, count=len(missing),
                          examples=sorted(missing)[:10])
            if duplicates or dup_rows:
                self.fail(f'{when}: duplicated rows', table=table, count=duplicates,
                          examples=[list(r) for r in dup_rows[:10]])
            if unexpected:
                self.fail(f'{when}: rows nobody inserted', table=table, count=len(unexpected),
                          examples=sorted(unexpected)[:10])
            if failed_present:
                self.fail(f'{when}: rows of INSERTs that returned an error', table=table,
                          count=len(failed_present), examples=sorted(failed_present)[:10])
            if counted != len(ids):
                self.fail(f'{when}: count(*) disagrees with SELECT id', table=table, count=counted, rows=len(ids))
            if bad_rows:
                self.fail(f'{when}: rows whose columns do not match their id', table=table, count=bad_rows)
            # Point lookups prune to one bucket: they find a row only if it sits in its bucket.
            by_key = collections.defaultdict(set)
            for i in present:
                by_key[key_of(i)].add(i)
            keys = rng.sample(sorted(by_key), min(point_lookups, len(by_key)))
            wrong = []
            for k in keys:
                got = [r[0] for r in conn.execute(f'SELECT id FROM {table} WHERE k = {k}').fetchall()]
                if sorted(got) != sorted(by_key[k]):
                    wrong.append({'k': k, 'lookup': len(got), 'scan': len(by_key[k])})
            info['point_lookups'] = len(keys)
            if wrong:
                self.fail(f'{when}: point lookups disagree with a full scan', table=table, examples=wrong[:5])
            out[table] = info
        return out

    def verify_catalog(self, conn, clients):
        listed = {r[1] for r in conn.execute('SHOW TABLES').fetchall()}
        expected, absent, maybe = set(SHARED), set(), set()
        for c in clients:
            expected |= c.exists
            absent |= c.absent
            maybe |= c.tables_in_doubt
        missing = expected - listed
        extra = listed - expected - maybe
        if missing or extra:
            self.fail('SHOW TABLES disagrees with the tables created and dropped', missing=sorted(missing),
                      extra=sorted(extra), of_which_dropped_or_failed=sorted(extra & absent))
        return {'tables': len(listed), 'expected': len(expected), 'absent': len(absent), 'in_doubt': len(maybe)}

    def check_log(self):
        """A panic in the server log is a failure; ERROR and WARN lines are counted."""
        panics = []
        lines = {'ERROR': [], 'WARN': []}
        try:
            with open(self.log_path, errors='replace') as f:
                for line in f:
                    if 'panicked' in line:
                        panics.append(line.strip())
                    for level, found in lines.items():
                        if f' {level} ' in line or f'{level}\x1b' in line:
                            found.append(line.strip())
        except OSError:
            return
        self.log_summary = {level.lower(): len(found) for level, found in lines.items()}
        self.log_summary['examples'] = (lines['ERROR'] + lines['WARN'])[:5]
        if panics:
            self.fail('panic in the server log', count=len(panics), examples=panics[:5])

    # -- report --------------------------------------------------------------------------

    def memory_summary(self, baseline, idle):
        n = self.run_seconds
        samples = self.samples

        def quarter(a, b):
            return [s for s in samples if a * n <= s[0] < b * n]

        def mib(kib):
            return round(kib / 1024, 1) if kib is not None else None

        def col_max(rows, i):
            return max((r[i] for r in rows), default=None)

        q = [quarter(0, .25), quarter(.25, .5), quarter(.5, .75), quarter(.75, 10)]
        warm = q[1][0] if q[1] else None
        end = samples[-1] if samples else None
        post = [s for s in samples if s[0] >= .25 * n]
        slope = None
        if len(post) >= 3:
            mt = sum(s[0] for s in post) / len(post)
            mr = sum(s[1] for s in post) / len(post)
            var = sum((s[0] - mt) ** 2 for s in post)
            if var:
                slope = sum((s[0] - mt) * (s[1] - mr) for s in post) / var * 60 / 1024
        # A sampler that fell silent means the whole host stalled (the sampler does no SQL):
        # latencies from that window say little about the server.
        gaps = [[round(a[0], 1), round(b[0] - a[0], 1)] for a, b in zip(samples, samples[1:])
                if b[0] - a[0] > max(5.0, 5 * self.args.sample_interval)]
        memory = {
            'samples': len(samples),
            'sampling_gaps_s': gaps,
            'rss_mib': {'start': mib(baseline[0]), 'warm': mib(warm and warm[1]), 'end': mib(end and end[1]),
                        'max': mib(col_max(samples, 1)), 'idle_end': mib(idle and idle[0]),
                        'quarter_max': [mib(col_max(x, 1)) for x in q],
                        'slope_after_warmup_mib_per_min': slope and round(slope, 2)},
            'hwm_mib': mib(max([baseline[1]] + [s[2] for s in samples])),
            'fds': {'start': baseline[2], 'warm': warm and warm[3], 'end': end and end[3],
                    'max': col_max(samples, 3), 'idle_end': idle and idle[2],
                    'quarter_max': [col_max(x, 3) for x in q]},
            'threads': {'start': baseline[3], 'max': col_max(samples, 4), 'idle_end': idle and idle[3]},
            'warehouse_files': {'end': end and end[5], 'max': col_max(samples, 5),
                                'quarter_max': [col_max(x, 5) for x in q]},
        }
        rss_q2, rss_q4 = col_max(q[1], 1), col_max(q[3], 1)
        if rss_q2 and rss_q4:
            allowed = rss_q2 * (1 + self.args.rss_margin) + self.args.rss_slack_mib * 1024
            memory['rss_mib']['q4_allowed'] = mib(allowed)
            if rss_q4 > allowed:
                self.fail('memory grew after the warm-up', rss_q2_max_mib=mib(rss_q2), rss_q4_max_mib=mib(rss_q4),
                          allowed_mib=mib(allowed), rss_quarter_max_mib=memory['rss_mib']['quarter_max'],
                          warehouse_files_quarter_max=memory['warehouse_files']['quarter_max'])
        else:
            self.fail('too few memory samples to judge', samples=len(samples))
        fd_q2, fd_q4 = col_max(q[1], 3), col_max(q[3], 3)
        if fd_q2 and fd_q4:
            allowed = fd_q2 * 1.5 + 32
            memory['fds']['q4_allowed'] = allowed
            if fd_q4 > allowed:
                self.fail('descriptors grew after the warm-up', fds_q2_max=fd_q2, fds_q4_max=fd_q4, allowed=allowed)
        return memory

    def report(self, baseline, idle, verify, catalog, restart, actual_seconds, exit_code):
        memory = self.memory_summary(baseline, idle)
        latency = {}
        for kind in sorted(set(self.ok) | set(self.errors)):
            values = sorted(self.latencies[kind])
            latency[kind] = {'ok': self.ok[kind], 'errors': self.errors[kind],
                             **{name: percentile(values, p) and round(percentile(values, p), 1)
                                for name, p in (('p50', 50), ('p95', 95), ('p99', 99), ('max', 100))}}
        total = sum(self.ok.values()) + sum(self.errors.values())

        print()
        print(f'ran {actual_seconds:.0f} s, {total} statements ({total / max(actual_seconds, 1):.1f}/s), '
              f'{sum(self.ledger.acked_rows.values())} rows acknowledged')
        print(f'{"kind":<18} {"ok":>7} {"errors":>6} {"p50 ms":>9} {"p95 ms":>9} {"p99 ms":>9} {"max ms":>9}')
        for kind, v in latency.items():
            cells = [f'{v[p]:9.1f}' if v[p] is not None else f'{"-":>9}' for p in ('p50', 'p95', 'p99', 'max')]
            print(f'{kind:<18} {v["ok"]:>7} {v["errors"]:>6} ' + ' '.join(cells))
        per_kind = '; '.join(f'{", ".join(sorted(codes))} for {kind}' for kind, codes in EXPECTED_BY_KIND.items())
        print(f'errors by SQLSTATE: {dict(self.sqlstates) or "none"} '
              f'(expected: {", ".join(sorted(self.allowed)) or "none"}; {per_kind})')
        for state, example in self.error_examples.items():
            print(f'  {state}: {example}')
        r, f = memory['rss_mib'], memory['fds']
        print(f'RSS MiB: start {r["start"]} warm {r["warm"]} end {r["end"]} max {r["max"]} idle {r["idle_end"]} '
              f'quarters {r["quarter_max"]} (last allowed {r.get("q4_allowed")}), '
              f'slope {r["slope_after_warmup_mib_per_min"]} MiB/min; VmHWM {memory["hwm_mib"]} MiB')
        print(f'fds: start {f["start"]} warm {f["warm"]} end {f["end"]} max {f["max"]} idle {f["idle_end"]} '
              f'quarters {f["quarter_max"]} (last allowed {f.get("q4_allowed")}); threads {memory["threads"]}; '
              f'warehouse files {memory["warehouse_files"]}')
        if memory['sampling_gaps_s']:
            print(f'sampling gaps [at s, length s] (the host stalled): {memory["sampling_gaps_s"]}')
        for table, info in verify.items():
            print(f'{table}: {info}')
        if restart:
            print(f'after restart: {restart}')
        print(f'catalog: {catalog}; server log: {self.log_summary}')
        if self.failures:
            print(f'{len(self.failures)} FAILURES:')
            for entry in self.failures[:20]:
                print(f'  - {json.dumps(entry, default=str)[:800]}')
        passed = not self.failures
        if passed and not self.args.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            print(f'data directory and server log kept in {self.root}')
        result = {
            'passed': passed, 'clients': self.args.clients, 'seconds': self.args.seconds, 'seed': self.args.seed,
            'memory_limit': self.args.memory_limit, 'elapsed_s': round(actual_seconds, 1),
            'statements': total, 'acked_rows': dict(self.ledger.acked_rows),
            'latency_ms': latency, 'errors_by_sqlstate': dict(self.sqlstates), 'memory': memory,
            'tables': verify, 'restart': restart, 'catalog': catalog, 'server_log': self.log_summary,
            'server_exit': exit_code,
            'failure_count': len(self.failures), 'failures': self.failures[:10],
        }
        print('RESULT ' + json.dumps(result, default=str, separators=(',', ':')))
        return 0 if passed else 1


class Client(threading.Thread):
    """One connection running the weighted mix until the deadline."""

    def __init__(self, soak, index):
        super().__init__(name=f'client-{index}', daemon=True)
        self.soak = soak
        self.index = index
        self.rng = random.Random(soak.args.seed * 1000 + index)
        self.settings = SETTING_BUNDLES[index % len(SETTING_BUNDLES)]
        self.conn = None
        self.current = None
        self.own = f'soak_own_{index:02d}'
        self.own_content = None        # (count, sum of ids) of the own table, when known
        self.live = []                 # own temporary tables that exist, oldest first
        self.exists = set()            # own tables that must exist
        self.absent = set()            # own tables that must not exist (dropped, or CREATE failed)
        self.tables_in_doubt = set()   # a CREATE or DROP whose connection dropped
        self.next_table = 0
        self.kinds = list(soak.mix)
        self.weights = [soak.mix[k] for k in self.kinds]

    def mark(self, name, exists):
        for group in (self.exists, self.absent, self.tables_in_doubt):
            group.discard(name)
        {True: self.exists, False: self.absent, None: self.tables_in_doubt}[exists].add(name)

    def table_ddl(self, kind, name, sql, creates):
        """Runs a CREATE or DROP of one of this client's tables and tracks whether it exists:
        a statement that returned an error must have changed nothing."""
        try:
            result = self.execute(kind, sql)
        except StatementError:
            self.mark(name, not creates)
            raise
        except ConnectionLost:
            self.mark(name, None)
            raise
        self.mark(name, creates)
        return result

    # -- statements ----------------------------------------------------------------------

    def execute(self, kind, sql, params=None):
        """Runs one statement, times it and returns (cursor, rows or None). Raises
        StatementError on an SQL error and ConnectionLost when the connection is gone."""
        self.current = (kind, sql, time.monotonic())
        started = time.perf_counter()
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall() if cur.description else None
        except psycopg.Error as e:
            self.on_error(kind, sql, e)
        finally:
            self.current = None
        self.soak.record_ok(kind, time.perf_counter() - started)
        return cur, rows

    def on_error(self, kind, sql, e):
        if self.conn.broken or self.conn.closed or e.sqlstate is None:
            with self.soak.lock:
                self.soak.errors[kind] += 1
                self.soak.sqlstates['connection lost'] += 1
            if not self.soak.server_gone and not self.soak.stop.is_set():
                self.soak.fail('connection lost', client=self.index, kind=kind, sql=short(sql),
                               error=f'{type(e).__name__}: {str(e)[:300]}')
            raise ConnectionLost() from e
        self.soak.record_error(kind, sql, e.sqlstate, str(e))
        raise StatementError(e.sqlstate) from e

    def check(self, condition, what, **details):
        if not condition:
            self.soak.fail(what, client=self.index, **details)
        return condition

    def connect(self, kind='connect'):
        started = time.perf_counter()
        try:
            self.conn = self.soak.connect(self.settings)
        except psycopg.Error as e:
            message = str(e)
            sqlstate = getattr(e, 'sqlstate', None) or ('53300' if 'too many clients' in message else None)
            with self.soak.lock:
                self.soak.errors[kind] += 1
                self.soak.sqlstates[sqlstate or 'connection refused'] += 1
            if not self.soak.server_gone:
                self.soak.fail('could not connect', client=self.index, sqlstate=sqlstate, message=message[:300])
            return False
        self.soak.record_ok(kind, time.perf_counter() - started)
        return True

    def cancel(self):
        try:
            self.conn.cancel()
        except Exception:
            pass

    def run(self):
        soak = self.soak
        if not self.connect():
            return
        try:
            self.create_own()
        except StatementError:
            pass
        except ConnectionLost:
            self.reconnect_after_loss()
        while not soak.stop.is_set() and time.monotonic() < soak.deadline:
            kind = self.rng.choices(self.kinds, self.weights)[0]
            try:
                getattr(self, 'do_' + kind)()
            except StatementError:
                pass
            except ConnectionLost:
                if not self.reconnect_after_loss():
                    break
            except Exception as e:  # a bug in this script, or a result of an unexpected shape
                soak.fail('client raised', client=self.index, kind=kind, error=f'{type(e).__name__}: {e}')
        try:
            self.conn.close()
        except Exception:
            pass

    def reconnect_after_loss(self):
        try:
            self.conn.close()
        except Exception:
            pass
        if self.soak.server_gone or self.soak.stop.is_set():
            return False
        return self.connect()

    # -- writes to the shared tables -------------------------------------------------------

    def insert(self, kind, table, n, run):
        """Allocates n fresh ids, runs the statement, settles the batch by its outcome."""
        batch, lo, hi = self.soak.ledger.allocate(table, n)
        try:
            count = run(lo, hi)
        except StatementError:
            self.soak.ledger.settle(batch, 'failed')
            raise
        except ConnectionLost:
            self.soak.ledger.settle(batch, 'in_doubt')
            raise
        self.soak.ledger.settle(batch, 'acked')
        self.check(count == n, 'insert reported a wrong row count', kind=kind, table=table, expected=n, reported=count)

    def batch_size(self, big=False):
        n = int(self.rng.paretovariate(1.2) * (20 if big else 5))
        return max(1, min(n, 2000 if big else 400))

    def pick_table(self):
        return self.rng.choices(*INSERT_TABLES)[0]

    def do_insert_values(self):
        table = self.pick_table()

        def run(lo, hi):
            values = ', '.join("({}, {}, '{}', {!r})".format(*row_of(table, i)) for i in range(lo, hi))
            cur, _ = self.execute('insert_values', f'INSERT INTO {table} VALUES {values}')
            return cur.rowcount
        self.insert('insert_values', table, self.batch_size(), run)

    def do_insert_params(self):
        table = self.pick_table()
        n = min(self.batch_size(), 200)

        def run(lo, hi):
            params = [x for i in range(lo, hi) for x in row_of(table, i)]
            sql = f'INSERT INTO {table} (id, k, v, amount) VALUES ' + ', '.join(['(%s, %s, %s, %s)'] * (hi - lo))
            cur, _ = self.execute('insert_params', sql, params)
            return cur.rowcount
        self.insert('insert_params', table, n, run)

    def do_copy_in(self):
        table = self.pick_table()
        binary = self.rng.random() < 0.5
        sql = f'COPY {table} (id, k, v, amount) FROM STDIN' + (' (FORMAT BINARY)' if binary else '')

        def run(lo, hi):
            self.current = ('copy_in', sql, time.monotonic())
            started = time.perf_counter()
            try:
                with self.conn.cursor() as cur:
                    with cur.copy(sql) as copy:
                        if binary:
                            copy.set_types(['int8', 'int8', 'text', 'float8'])
                        for i in range(lo, hi):
                            copy.write_row(row_of(table, i))
                    count = cur.rowcount
            except psycopg.Error as e:
                self.on_error('copy_in', sql, e)
            finally:
                self.current = None
            self.soak.record_ok('copy_in', time.perf_counter() - started)
            return count
        self.insert('copy_in', table, self.batch_size(big=True), run)

    def do_insert_select(self):
        table = self.pick_table()
        prefix = SHARED[table][0]

        def run(lo, hi):
            sql = (f"INSERT INTO {table} SELECT id, (id * {KEY_MULTIPLIER}) % {KEYS}, "
                   f"concat('{prefix}', CAST(id AS STRING)), CAST(id % 1000 AS DOUBLE) * 0.5 FROM range({lo}, {hi})")
            cur, _ = self.execute('insert_select', sql)
            return cur.rowcount
        self.insert('insert_select', table, self.batch_size(big=True), run)

    def do_optimize(self):
        table = self.rng.choice(list(SHARED))
        cur, _ = self.execute('optimize', f'OPTIMIZE {table}')
        self.check(cur.statusmessage.startswith('OPTIMIZE'), 'OPTIMIZE returned an odd tag', tag=cur.statusmessage)

    # -- reads -------------------------------------------------------------------------------

    def fill(self, template):
        r = self.rng
        return template.format(k=r.randrange(KEYS), k2=r.randrange(KEYS), k3=r.randrange(KEYS),
                               x=r.randrange(KEYS // 20), r50=r.randrange(50))

    def do_join(self):
        self.execute('join', self.fill(self.rng.choice(JOINS)))

    def do_aggregate(self):
        self.execute('aggregate', self.fill(self.rng.choice(AGGREGATES)))

    def do_explain(self, kind='explain', keyword='EXPLAIN'):
        sql = f'{keyword} ' + self.fill(self.rng.choice(JOINS + AGGREGATES))
        cur, rows = self.execute(kind, sql)
        self.check(rows and len(rows) == 1 and rows[0][0].startswith('== Physical Plan =='),
                   f'{keyword} returned an odd plan', sql=short(sql), rows=str(rows)[:300])

    def do_explain_formatted(self):
        self.do_explain('explain_formatted', 'EXPLAIN FORMATTED')

    def do_point_lookup(self):
        """Rows acknowledged before the query are all visible; nothing else is."""
        table = self.rng.choice(list(SHARED))
        ledger = self.soak.ledger
        ids = ledger.sample_acked(table, self.rng, self.rng.randint(1, 5))
        if not ids:
            return
        keys = sorted({key_of(i) for i in ids})
        sql = f'SELECT id, k, v, amount FROM {table} WHERE k ' + (
            f'= {keys[0]}' if len(keys) == 1 else f'IN ({", ".join(map(str, keys))})')
        _, rows = self.execute('point_lookup', sql)
        got = [r[0] for r in rows]
        self.check(len(got) == len(set(got)), 'point lookup returned duplicate rows', table=table, sql=short(sql),
                   duplicates=[i for i, n in collections.Counter(got).items() if n > 1][:10])
        missing = sorted(set(ids) - set(got))
        self.check(not missing, 'acknowledged rows not visible to a later query', table=table, sql=short(sql),
                   missing=missing[:10])
        for row in rows:
            if not self.check(row_ok(table, row) and row[1] in keys, 'point lookup returned a wrong row',
                              table=table, sql=short(sql), row=list(row)):
                break
            owner = ledger.lookup(row[0])
            if not self.check(owner is not None and owner[0] == table and owner[1] != 'failed',
                              'point lookup returned a row nobody inserted (or of a failed INSERT)',
                              table=table, sql=short(sql), row=list(row), owner=owner):
                break

    def do_count_bounds(self):
        """count(*) sees at least every row acknowledged before and at most every row attempted after."""
        table = self.rng.choice(list(SHARED))
        ledger = self.soak.ledger
        with ledger.lock:
            low = ledger.acked_rows[table]
        _, rows = self.execute('count_bounds', f'SELECT count(*) FROM {table}')
        with ledger.lock:
            high = ledger.allocated_rows[table]
        self.check(low <= rows[0][0] <= high, 'count(*) outside what was acknowledged / attempted',
                   table=table, count=rows[0][0], acked_before=low, attempted_after=high)

    def do_large_select(self):
        table = self.rng.choice(list(SHARED))
        if self.rng.random() < 0.5:
            sql = f'SELECT id, k, v, amount FROM {table} WHERE k < {self.rng.randrange(500, 2500)}'
        else:
            sql = f'SELECT id, k, v, amount FROM {table} ORDER BY id DESC LIMIT {self.rng.randrange(5000, 30000)}'
        _, rows = self.execute('large_select', sql)
        bad = [list(r) for r in rows if not row_ok(table, r)]
        self.check(not bad, 'large select returned wrong rows', table=table, sql=sql, examples=bad[:5])
        ids = [r[0] for r in rows]
        self.check(len(ids) == len(set(ids)), 'large select returned duplicate rows', table=table, sql=sql)

    def do_catalog(self):
        choice = self.rng.randrange(3)
        if choice == 0:
            _, rows = self.execute('catalog', 'SHOW TABLES')
            listed = {r[1] for r in rows}
            expected = set(SHARED) | self.exists
            self.check(expected <= listed and not self.absent & listed,
                       'SHOW TABLES disagrees with this client\'s own DDL',
                       missing=sorted(expected - listed), listed_but_dropped_or_failed=sorted(self.absent & listed))
        elif choice == 1:
            self.execute('catalog', "SELECT c.relname, a.attname, t.typname FROM pg_class c "
                                    "JOIN pg_attribute a ON a.attrelid = c.oid JOIN pg_type t ON t.oid = a.atttypid "
                                    "WHERE c.relname LIKE 'soak%' AND a.attnum > 0 ORDER BY 1, a.attnum")
        else:
            _, rows = self.execute('catalog', f'DESCRIBE TABLE EXTENDED {self.rng.choice(list(SHARED))}')
            self.check(rows, 'DESCRIBE returned nothing')

    # -- the client's own tables -------------------------------------------------------------

    def create_own(self):
        clauses = 'CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS' if self.index % 2 == 0 else ''
        self.table_ddl('create_table', self.own, f'CREATE TABLE {self.own} ({COLUMNS}) USING parquet {clauses}', True)
        self.own_content = (0, None)

    def do_overwrite(self):
        """INSERT OVERWRITE of the client's own table: afterwards it holds exactly what was
        written; after a failed one, exactly what it held before."""
        if self.own not in self.exists:
            if self.own not in self.tables_in_doubt:
                self.create_own()
            return
        if self.rng.random() < 0.6:
            lo = self.rng.randrange(10 ** 9)
            n = self.rng.randrange(1, 5000)
            sql = (f"INSERT OVERWRITE TABLE {self.own} SELECT id, id % 97, concat('o', CAST(id AS STRING)), "
                   f"CAST(id AS DOUBLE) FROM range({lo}, {lo + n})")
            expected = (n, sum(range(lo, lo + n)))
        else:
            sql = (f'INSERT OVERWRITE {self.own} SELECT id, k, v, amount FROM soak_events '
                   f'WHERE k % 64 = {self.rng.randrange(64)}')
            expected = None
        try:
            cur, _ = self.execute('overwrite', sql)
        except StatementError:
            if self.own_content is not None:
                _, rows = self.execute('own_check', f'SELECT count(*), sum(id) FROM {self.own}')
                self.check(tuple(rows[0]) == self.own_content, 'a failed INSERT OVERWRITE changed the table',
                           sql=short(sql), before=list(self.own_content), after=list(rows[0]))
            raise
        except ConnectionLost:
            self.own_content = None
            raise
        written = cur.rowcount
        _, rows = self.execute('own_check', f'SELECT count(*), sum(id) FROM {self.own}')
        count, total = rows[0]
        if expected:
            self.check(written == expected[0] and (count, total) == expected,
                       'INSERT OVERWRITE left other rows than it wrote', sql=short(sql), reported=written,
                       expected_count_sum=list(expected), found_count_sum=[count, total])
        else:
            self.check(written == count, 'INSERT OVERWRITE left other rows than it reported',
                       sql=short(sql), reported=written, found=count)
        self.own_content = (count, total)

    def do_ddl(self):
        if len(self.live) < 3 and (not self.live or self.rng.random() < 0.5):
            self.create_temporary()
        else:
            name = self.live.pop(0)
            sql = f'DROP TABLE {name}' if self.rng.random() < 0.5 else f'DROP TABLE IF EXISTS {name}'
            try:
                self.table_ddl('drop_table', name, sql, False)
            except StatementError:
                self.live.insert(0, name)
                raise

    def create_temporary(self):
        name = f'soak_tmp_{self.index:02d}_{self.next_table}'
        self.next_table += 1
        variant = self.rng.randrange(4)
        if variant == 3:
            kind, sql = 'ctas', (f'CREATE TABLE {name} USING parquet CLUSTERED BY (k) INTO {self.rng.randint(1, 16)} '
                                 f'BUCKETS AS SELECT id, k, v FROM soak_events WHERE k < {self.rng.randrange(50, 500)}')
        elif variant == 0:
            kind, sql = 'create_table', (f'CREATE TABLE {name} (id BIGINT, k BIGINT, v STRING) USING parquet '
                                         f'CLUSTERED BY (k) SORTED BY (k) INTO {self.rng.randint(1, 16)} BUCKETS')
        elif variant == 1:
            kind, sql = 'create_table', (f'CREATE TABLE {name} (id BIGINT, k BIGINT, p INT) USING parquet '
                                         f'PARTITIONED BY (p) CLUSTERED BY (k) INTO 4 BUCKETS')
        else:
            kind, sql = 'create_table', f'CREATE TABLE {name} (id BIGINT, k BIGINT, v STRING) USING parquet'
        self.table_ddl(kind, name, sql, True)
        self.live.append(name)
        if variant in (0, 1, 2):
            n = self.rng.randrange(1, 3000)
            third = 'CAST(id % 3 AS INT)' if variant == 1 else "CAST(id AS STRING)"
            cur, _ = self.execute('insert_own', f'INSERT INTO {name} SELECT id, id % 101, {third} FROM range(0, {n})')
            _, rows = self.execute('own_check', f'SELECT count(*) FROM {name}')
            self.check(cur.rowcount == n and rows[0][0] == n, 'new table does not hold what was inserted',
                       table=name, inserted=n, reported=cur.rowcount, found=rows[0][0])

    def do_reconnect(self):
        try:
            self.conn.close()
        except Exception:
            pass
        if not self.connect('reconnect'):
            raise ConnectionLost()


class Compactor(Client):
    """Keeps every shared table under --compact-above files with OPTIMIZE, one at a time."""

    def run(self):
        soak = self.soak
        if not self.connect():
            return
        while not soak.stop.is_set() and time.monotonic() < soak.deadline:
            for table in SHARED:
                if soak.count_files(table) <= soak.args.compact_above:
                    continue
                try:
                    self.execute('compaction', f'OPTIMIZE {table}')
                except StatementError:
                    pass
                except ConnectionLost:
                    if not self.reconnect_after_loss():
                        return
            soak.stop.wait(1)
        self.conn.close()


def parse_mix(text):
    mix = {}
    for part in text.split(','):
        kind, _, weight = part.partition('=')
        if kind.strip() not in KINDS:
            raise argparse.ArgumentTypeError(f'unknown statement kind {kind!r}')
        mix[kind.strip()] = float(weight or 1)
    return mix


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--binary', required=True, help='the bucketsql executable')
    parser.add_argument('--clients', type=int, default=32, help='client threads, one connection each')
    parser.add_argument('--seconds', type=float, default=600, help='how long the clients run')
    parser.add_argument('--seed', type=int, default=1, help='seeds every client\'s choices')
    parser.add_argument('--memory-limit', help="passed to `serve --memory-limit`, e.g. 1GiB (allows SQLSTATE 53200)")
    parser.add_argument('--allow-sqlstate', action='append', metavar='CODE', help='an SQLSTATE that is not a failure')
    parser.add_argument('--mix', type=parse_mix, metavar='KIND=W,…',
                        help=f'statement kinds and weights instead of the default mix ({", ".join(KINDS)})')
    parser.add_argument('--compact-above', type=int, default=200, metavar='FILES',
                        help='OPTIMIZE a shared table once it holds more files than this (0: never)')
    parser.add_argument('--sample-interval', type=float, default=1.0, help='seconds between memory samples')
    parser.add_argument('--rss-margin', type=float, default=0.25,
                        help='last-quarter RSS may exceed the second quarter\'s by this fraction …')
    parser.add_argument('--rss-slack-mib', type=float, default=64, help='… plus this many MiB')
    parser.add_argument('--grace', type=float, default=180,
                        help='seconds a statement may still run after the end before it counts as hung')
    parser.add_argument('--no-restart-check', dest='restart_check', action='store_false',
                        help='skip restarting the server and checking the rows again')
    parser.add_argument('--keep', action='store_true', help='keep the data directory and log even after a pass')
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        parser.error(f'{args.binary} is not executable')
    soak = Soak(args)
    try:
        code = soak.run()
    finally:
        soak.stop.set()
        if soak.server and soak.server.poll() is None:
            soak.server.kill()
    sys.exit(code)


if __name__ == '__main__':
    main()

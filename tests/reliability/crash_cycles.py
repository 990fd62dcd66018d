"""Crash-cycle harness: kill -9 the bucketsql server while it writes, restart it, and check
that every write is all-or-nothing and that the data directory is exactly what the metastore
says it holds.

Run it with an interpreter that has psycopg 3:

    python tests/reliability/crash_cycles.py --binary target/release/bucketsql \\
        --cycles 50 --seed 1 [--data-dir DIR] [--full-disk] [--keep]

The server runs as `BINARY serve --listen 127.0.0.1:0 --data-dir DIR --password PW` (the port
it bound is read from its log; the password keeps other clients on this machine out) on one
data directory kept across cycles. Three tables exist at all times (recreated when dropped):
`b` bucketed, `p` partitioned by `d` and bucketed, `pl` plain; CTAS adds more. Every row
carries the id of the write that produced it (`w`) and its position in that write (`n`), and
its bucket key is `k = (n * 7919 + w) % 100000`.

Each cycle picks, from the seeded generator, one kind of write and runs one to three such
statements on a client thread: INSERT … SELECT, INSERT OVERWRITE (whole table; dynamic
partitions; one partition, with `PARTITION (d='…')` when the server accepts it), CTAS
(bucketed, partitioned or plain), OPTIMIZE, COPY … FROM STDIN, DROP TABLE; every kind once per
six cycles. The server is killed with SIGKILL: before the statement reaches it, at a random
point of the statements' expected duration (learnt from earlier cycles), as soon as a new data
file shows up in a table directory (the write is moving its files into place and has not
committed), or right after the last acknowledgement. Then the server is restarted on the same
data directory and these checks run:

- start-up: the server comes back and accepts connections (and no log shows a panic);
- contents: per table, `count(*)` and `sum(n)` per (partition, write id) equal the model of
  every acknowledged write; the one statement in flight at the kill is either fully applied
  or fully absent (for OPTIMIZE, whose rows do not change, judged by the file list: all old
  files or all new ones); an acknowledged DROP leaves no table, a CTAS holds all its rows;
- files: `metastore.sqlite` (opened read-only after the restart's clean-up) lists for every
  table exactly the files under its directory: no file or directory in the warehouse that
  no committed file needs (staging directories, files of unfinished writes, directories of
  dropped tables or emptied partitions), no committed file missing, sizes as recorded, and
  no pending or retired records left;
- buckets: every data file is read with DuckDB (a separate interpreter, `--duckdb-python`):
  its row count equals the metastore's, every row of a bucket file has
  `pmod(hash(k), 8)` (as the server computes it, for all 100000 keys, once per run) equal to
  the bucket id in its name, and rows are sorted on k (SORTED BY).

`--full-disk` then mounts a 64 MiB tmpfs (needs the right to mount; without it the run
fails) and fills it with writes until one fails: the
error must be PostgreSQL's 53100 disk_full, the server must still
answer, nothing acknowledged may be lost and no file of the failed write may remain; after a
DROP TABLE frees space, a write must succeed, also after a restart.

The run prints one line per cycle, a summary and, last, `RESULT {json}`. It exits 1 when any
check failed. Choices depend only on --seed; where the kills land depends on timing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from random import Random

import psycopg

KEYS = 100_000
BUCKETS = 8
KEY_SQL = f"(id * 7919 + {{w}}) % {KEYS}"
BASE_TABLES = {"b": "bucketed", "p": "partitioned", "pl": "plain"}
COLUMNS = "k BIGINT, v STRING, w BIGINT, n BIGINT"
CLEAN_DISK_ERRORS = {"53100"}
DEFAULT_DUCKDB_PYTHON = "~/.cache/bucketsql-target/tmp/python-random-queries/bin/python"
ROW_COUNTS = (30_000, 100_000, 250_000, 500_000)
WRITE_KINDS = ("insert", "overwrite", "ctas", "optimize", "copy", "drop")
# Whole table (static mode), the partitions written (dynamic mode), one partition.
OVERWRITES = (("overwrite", "b"), ("overwrite", "pl"), ("overwrite", "p"), ("overwrite_dynamic", "p"),
              ("overwrite_partition", "p"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LISTENING = re.compile(r"bucketsql is listening address=127\.0\.0\.1:(\d+)")


# --------------------------------------------------------------------------------------------
# The server process


class ServerFailed(Exception):
    pass


class Server:
    """One data directory, served by one process at a time, started and killed at will."""

    def __init__(self, binary: str, data_dir: Path, log_dir: Path):
        self.binary = binary
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.password = secrets.token_hex(12)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.starts = 0
        self.log_path: Path | None = None

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        self.log_path = self.log_dir / f"server-{self.starts:03}.log"
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(self.data_dir),
                 "--password", self.password],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = LISTENING.search(self.log_text())
            if match:
                self.port = int(match.group(1))
                break
            if self.proc.poll() is not None:
                raise ServerFailed(f"server exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            time.sleep(0.02)
        else:
            self.kill()
            raise ServerFailed(f"server did not listen within {timeout:.0f}s:\n{self.log_tail()}")
        with self.connect() as conn:
            conn.execute("SELECT 1").fetchone()

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", password=self.password,
                               dbname="postgres", autocommit=True, connect_timeout=10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return ANSI.sub("", self.log_path.read_text(errors="replace"))

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


# --------------------------------------------------------------------------------------------
# What the tables should hold

Contents = dict  # (partition, write id) -> (row count, sum of n)


@dataclass
class Table:
    layout: str  # bucketed | partitioned | plain
    contents: Contents = field(default_factory=dict)


Model = dict  # table name -> Table


def copy_model(model: Model) -> Model:
    return {name: Table(t.layout, dict(t.contents)) for name, t in model.items()}


@dataclass
class Write:
    """One statement of a cycle, what it should do to the model and what became of it."""

    wid: int
    kind: str  # insert | overwrite | overwrite_dynamic | overwrite_partition | ctas | optimize | copy | drop
    table: str
    rows: int = 0
    layout: str = ""  # the table's layout (for CTAS, the new table's)
    partitions: tuple[int, int] = (0, 1)  # rows go to d = 'p{first + n % count}'
    started: float | None = None
    finished: float | None = None
    acked: bool = False
    error: str | None = None
    sqlstate: str | None = None

    def partition_of(self, n: int) -> str:
        first, count = self.partitions
        return f"p{first + n % count}"

    def produced(self) -> Contents:
        """(partition, w) -> (count, sum of n) of the rows this write produces."""
        if self.layout != "partitioned":
            return {("", self.wid): (self.rows, self.rows * (self.rows - 1) // 2)}
        first, count = self.partitions
        out = {}
        for residue in range(min(count, self.rows)):
            c = (self.rows - residue + count - 1) // count
            out[(f"p{first + residue}", self.wid)] = (c, c * residue + count * c * (c - 1) // 2)
        return out

    def apply(self, model: Model) -> Model:
        model = copy_model(model)
        new = self.produced()
        if self.kind in ("insert", "copy"):
            model[self.table].contents.update(new)
        elif self.kind == "overwrite":
            model[self.table].contents = new
        elif self.kind in ("overwrite_dynamic", "overwrite_partition"):
            written = {d for d, _ in new}
            kept = {key: v for key, v in model[self.table].contents.items() if key[0] not in written}
            model[self.table].contents = {**kept, **new}
        elif self.kind == "ctas":
            model[self.table] = Table(self.layout, new)
        elif self.kind == "drop":
            del model[self.table]
        return model  # optimize changes no row

    def describe(self) -> str:
        what = {"ctas": "CTAS", "drop": "DROP", "optimize": "OPTIMIZE", "copy": "COPY"}.get(self.kind, self.kind.upper())
        size = f" {self.rows} rows" if self.rows else ""
        return f"w{self.wid} {what} {self.table}{size}"


def select_sql(write: Write, with_partition: bool = True) -> str:
    """The write's rows; without the partition column for `PARTITION (d='…')`."""
    cols = [f"{KEY_SQL.format(w=write.wid)} AS k", "md5(CAST(id AS STRING)) AS v",
            f"CAST({write.wid} AS BIGINT) AS w", "id AS n"]
    if write.layout == "partitioned" and with_partition:
        first, count = write.partitions
        cols.append(f"concat('p', CAST({first} + id % {count} AS STRING)) AS d")
    return f"SELECT {', '.join(cols)} FROM range({write.rows})"


def create_sql(name: str, layout: str, as_select: str | None = None) -> str:
    clauses = {
        "bucketed": f"CLUSTERED BY (k) SORTED BY (k) INTO {BUCKETS} BUCKETS",
        "partitioned": f"PARTITIONED BY (d) CLUSTERED BY (k) SORTED BY (k) INTO {BUCKETS} BUCKETS",
        "plain": "",
    }[layout]
    if as_select is not None:
        return f"CREATE TABLE {name} USING parquet {clauses} AS {as_select}"
    columns = COLUMNS + (", d STRING" if layout == "partitioned" else "")
    return f"CREATE TABLE {name} ({columns}) USING parquet {clauses}"


def copy_chunks(write: Write, chunk: int = 20_000):
    """COPY text rows, generated as the rows of `select_sql` would be (v differs, unchecked)."""
    partitioned = write.layout == "partitioned"
    for start in range(0, write.rows, chunk):
        lines = []
        for n in range(start, min(start + chunk, write.rows)):
            line = f"{(n * 7919 + write.wid) % KEYS}\tc{n}\t{write.wid}\t{n}"
            lines.append(f"{line}\t{write.partition_of(n)}\n" if partitioned else line + "\n")
        yield "".join(lines).encode()


def write_sql(write: Write, partition_clause: bool = False) -> str:
    """The statement of a write; `partition_clause` when the server takes `PARTITION (d='…')`."""
    if write.kind == "insert":
        return f"INSERT INTO {write.table} {select_sql(write)}"
    if write.kind in ("overwrite", "overwrite_dynamic"):
        return f"INSERT OVERWRITE TABLE {write.table} {select_sql(write)}"
    if write.kind == "overwrite_partition":
        if partition_clause:
            partition = f"PARTITION (d='{write.partition_of(0)}')"
            return f"INSERT OVERWRITE TABLE {write.table} {partition} {select_sql(write, with_partition=False)}"
        return f"INSERT OVERWRITE TABLE {write.table} {select_sql(write)}"
    if write.kind == "ctas":
        return create_sql(write.table, write.layout, select_sql(write))
    if write.kind == "optimize":
        return f"OPTIMIZE {write.table}"
    if write.kind == "drop":
        return f"DROP TABLE {write.table}"
    if write.kind == "copy":
        columns = "k, v, w, n, d" if write.layout == "partitioned" else "k, v, w, n"
        return f"COPY {write.table} ({columns}) FROM STDIN"
    raise ValueError(write.kind)


def execute_write(conn: psycopg.Connection, write: Write, partition_clause: bool = False) -> None:
    sql = write_sql(write, partition_clause)
    if write.kind.startswith("overwrite"):
        # Spark's partitionOverwriteMode decides what an overwrite of a partitioned table replaces.
        dynamic = write.kind == "overwrite_dynamic" or (write.kind == "overwrite_partition" and not partition_clause)
        conn.execute(f"SET spark.sql.sources.partitionOverwriteMode = {'dynamic' if dynamic else 'static'}")
    if write.kind == "copy":
        with conn.cursor() as cur:
            with cur.copy(sql) as copy:
                for chunk in copy_chunks(write):
                    copy.write(chunk)
    else:
        conn.execute(sql)


def read_contents(conn: psycopg.Connection) -> Model:
    """Every table the server shows, with its rows per (partition, write id)."""
    names = [row[1] for row in conn.execute("SHOW TABLES").fetchall()]
    model = {}
    for name in names:
        columns = [row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (name,)).fetchall()]
        partitioned = "d" in columns
        d = "d" if partitioned else "''"
        rows = conn.execute(f"SELECT {d}, w, count(*), sum(n) FROM {name} GROUP BY 1, 2").fetchall()
        model[name] = Table("partitioned" if partitioned else "?",
                            {(str(part), int(w)): (int(c), int(s)) for part, w, c, s in rows})
    return model


def same_contents(a: Model, b: Model) -> bool:
    return a.keys() == b.keys() and all(a[name].contents == b[name].contents for name in a)


def contents_diff(expected: Model, actual: Model, limit: int = 6) -> str:
    out = []
    for name in sorted(expected.keys() | actual.keys()):
        if name not in actual:
            out.append(f"{name}: missing")
        elif name not in expected:
            out.append(f"{name}: unexpected table")
        else:
            e, a = expected[name].contents, actual[name].contents
            for key in sorted(e.keys() | a.keys()):
                if e.get(key) != a.get(key):
                    out.append(f"{name}{list(key)}: expected {e.get(key)}, found {a.get(key)}")
    return "; ".join(out[:limit]) + (f"; … {len(out) - limit} more" if len(out) > limit else "")


# --------------------------------------------------------------------------------------------
# Files on disk against the metastore

DUCKDB_CHECK = r"""
import duckdb, json, sys
req = json.load(sys.stdin)
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute("CREATE TABLE m AS SELECT * FROM read_csv(?, header=false, columns={'k': 'BIGINT', 'b': 'INTEGER'})",
            [req["map"]])
con.execute("CREATE TABLE f (path VARCHAR, bucket INTEGER)")
con.executemany("INSERT INTO f VALUES (?, ?)", req["files"])
QUERY = '''
SELECT r.filename, count(*),
       count(*) FILTER (WHERE f.bucket IS NOT NULL AND m.b IS DISTINCT FROM f.bucket),
       count(*) FILTER (WHERE f.bucket IS NOT NULL AND r.k < r.prev)
FROM (SELECT filename, k, lag(k) OVER (PARTITION BY filename ORDER BY file_row_number) AS prev
      FROM read_parquet(?, filename = true, file_row_number = true, hive_partitioning = false,
                        union_by_name = true)) r
JOIN f ON f.path = r.filename LEFT JOIN m ON m.k = r.k
GROUP BY r.filename
'''
out, unreadable = {}, {}
def check(paths):
    for name, rows, misplaced, unsorted in con.execute(QUERY, [paths]).fetchall():
        out[name] = [rows, misplaced, unsorted]
paths = [p for p, _ in req["files"]]
try:
    check(paths)
except duckdb.Error:
    for path in paths:
        try:
            check([path])
        except duckdb.Error as e:
            unreadable[path] = str(e).splitlines()[0]
for path in paths:
    if path not in out and path not in unreadable:
        out[path] = [0, 0, 0]
print("\n" + json.dumps({"files": out, "unreadable": unreadable}))
"""


@dataclass
class FileReport:
    stray_files: list[str] = field(default_factory=list)
    stray_dirs: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sizes, leftover records, unreadable files
    bucket_violations: list[str] = field(default_factory=list)
    unsorted: list[str] = field(default_factory=list)
    row_mismatches: list[str] = field(default_factory=list)


def bucket_of_name(name: str) -> int | None:
    match = re.search(r"_(\d+)(?:\..*)?$", name)
    return int(match.group(1)) if match else None


class FileChecker:
    def __init__(self, data_dir: Path, duckdb_python: str, bucket_map: Path):
        self.data_dir = data_dir
        self.duckdb_python = duckdb_python
        self.bucket_map = bucket_map
        self.checked: set[tuple[str, int]] = set()  # files are immutable: read each once

    def committed(self) -> tuple[dict, list, list]:
        """{table: (location, num_buckets, [(path, bucket, rows, bytes)])}, pending, retired."""
        db = sqlite3.connect(f"file:{self.data_dir / 'metastore.sqlite'}?mode=ro", uri=True)
        try:
            tables = {}
            for tid, name, location, buckets in db.execute("SELECT id, name, location, num_buckets FROM tables"):
                files = db.execute(
                    "SELECT path, bucket_id, row_count, byte_size FROM data_files WHERE table_id = ?", (tid,)
                ).fetchall()
                tables[name] = (Path(location), buckets, files)
            pending = [r[0] for r in db.execute("SELECT path FROM pending_files")]
            retired = [r[0] for r in db.execute("SELECT path FROM retired_files")]
            return tables, pending, retired
        finally:
            db.close()

    def check(self) -> tuple[FileReport, dict]:
        report = FileReport()
        tables, pending, retired = self.committed()
        warehouse = self.data_dir / "warehouse"
        needed_dirs = {warehouse, warehouse / "default"}
        committed: dict[Path, tuple] = {}
        for name, (location, buckets, files) in tables.items():
            needed_dirs.add(location)
            for path, bucket, rows, size in files:
                full = location / path
                committed[full] = (name, buckets, bucket, rows, size)
                parent = full.parent
                while parent != location and location in parent.parents:
                    needed_dirs.add(parent)
                    parent = parent.parent
        for path in pending:
            report.problems.append(f"pending record left after start-up: {path}")
        for path in retired:
            report.problems.append(f"retired record left after start-up: {path}")

        on_disk_files, on_disk_dirs = set(), set()
        for root, dirs, files in os.walk(warehouse):
            on_disk_dirs.add(Path(root))
            on_disk_files.update(Path(root) / f for f in files)
        report.stray_files = sorted(str(p) for p in on_disk_files - committed.keys())
        report.stray_dirs = sorted(
            str(p) + ("" if any(f.is_relative_to(p) for f in on_disk_files) else " (empty)")
            for p in on_disk_dirs - needed_dirs)
        report.missing = sorted(str(p) for p in committed.keys() - on_disk_files)

        to_read = []
        for full, (name, buckets, bucket, rows, size) in sorted(committed.items()):
            if full not in on_disk_files:
                continue
            actual_size = full.stat().st_size
            if actual_size != size:
                report.problems.append(f"{full}: {actual_size} bytes, metastore says {size}")
            if buckets not in (None, BUCKETS):
                report.problems.append(f"{full}: table {name} has {buckets} buckets, the check knows {BUCKETS}")
            if buckets is not None and bucket_of_name(full.name) != bucket:
                report.problems.append(f"{full}: bucket {bucket} in the metastore, not the name's")
            if (str(full), actual_size) not in self.checked:
                to_read.append((full, buckets, bucket, rows, actual_size))
        if to_read:
            self.read_files(to_read, report)
        return report, tables

    def read_files(self, files: list, report: FileReport) -> None:
        request = {"map": str(self.bucket_map),
                   "files": [[str(f), bucket if buckets else None] for f, buckets, bucket, _, _ in files]}
        proc = subprocess.run([self.duckdb_python, "-c", DUCKDB_CHECK], input=json.dumps(request),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            report.problems.append(f"DuckDB check failed: {proc.stderr.strip().splitlines()[-1:]}")
            return
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        for path, error in answer["unreadable"].items():
            report.problems.append(f"{path}: unreadable Parquet: {error}")
        for full, buckets, bucket, rows, size in files:
            found = answer["files"].get(str(full))
            if found is None:
                continue
            count, misplaced, unsorted = found
            if count != rows:
                report.row_mismatches.append(f"{full}: {count} rows, metastore says {rows}")
            if misplaced:
                report.bucket_violations.append(f"{full}: {misplaced} of {count} rows not in bucket {bucket}")
            if unsorted:
                report.unsorted.append(f"{full}: {unsorted} rows out of k order")
            if count == rows and not misplaced and not unsorted:
                self.checked.add((str(full), size))


# --------------------------------------------------------------------------------------------
# The crash cycles


@dataclass
class Stats:
    cycles: int = 0
    kills: int = 0
    kill_moments: dict = field(
        default_factory=lambda: {"before_statement": 0, "mid_statement": 0, "mid_publish": 0, "after_ack": 0})
    writes_started: int = 0
    acknowledged_verified: int = 0
    unacked: dict = field(default_factory=lambda: {"applied": 0, "absent": 0, "partial": 0})
    stray_files: set = field(default_factory=set)
    stray_dirs: set = field(default_factory=set)
    missing_files: set = field(default_factory=set)
    bucket_violations: set = field(default_factory=set)
    unsorted_files: set = field(default_factory=set)
    row_count_mismatches: set = field(default_factory=set)
    failures: list = field(default_factory=list)
    notes: list = field(default_factory=list)


class CrashCycles:
    def __init__(self, args, work: Path, data_dir: Path):
        self.args = args
        self.rng = Random(args.seed)
        self.server = Server(args.binary, data_dir, work)
        self.work = work
        self.model: Model = {}
        self.next_wid = 1
        self.next_ctas = 1
        self.deck: list[str] = []
        self.seconds_per_row = {}  # learnt from acknowledged writes, per kind
        self.static_partition_clause = False
        self.stats = Stats()
        self.files: FileChecker | None = None
        self.reported: set = set()

    def fail(self, message: str) -> None:
        self.stats.failures.append(message)
        print(f"  FAIL {message}", flush=True)

    def wid(self) -> int:
        self.next_wid += 1
        return self.next_wid - 1

    def pick(self, options):
        """One element, from exactly one draw of the generator (so later draws do not depend
        on how many options there were)."""
        return options[int(self.rng.random() * len(options))]

    # -- set-up ------------------------------------------------------------------------------

    def setup(self) -> None:
        self.server.start()
        with self.server.connect() as conn:
            bucket_map = self.work / "bucket_map.csv"
            write_bucket_map(conn, bucket_map)
            self.files = FileChecker(self.server.data_dir, self.args.duckdb_python, bucket_map)
            self.ensure_base_tables(conn)
            try:
                conn.execute("INSERT OVERWRITE TABLE p PARTITION (d='p9') SELECT 1, 'x', 0, 0 FROM range(0)")
                self.static_partition_clause = True
            except psycopg.Error as e:
                self.stats.notes.append(
                    f"INSERT OVERWRITE … PARTITION (d='…') is refused ({e.sqlstate}: {str(e).strip()}); "
                    "single-partition overwrites run in dynamic mode instead")

    def ensure_base_tables(self, conn) -> None:
        """Creates the base tables that do not exist (at the start, or dropped), with some rows."""
        for name, layout in BASE_TABLES.items():
            if name not in self.model:
                conn.execute(create_sql(name, layout))
                self.model[name] = Table(layout)
                write = Write(self.wid(), "insert", name, 20_000, layout, partitions=(0, 3))
                execute_write(conn, write)
                self.model = write.apply(self.model)

    # -- one cycle ---------------------------------------------------------------------------

    def plan(self) -> list[Write]:
        """The next cycle's statements: one to three writes of one kind."""
        if not self.deck:  # every kind once per six cycles, in a seeded order
            self.deck = list(WRITE_KINDS)
            self.rng.shuffle(self.deck)
        kind = self.deck.pop()
        count = 1 + int(self.rng.random() * 3) if kind in ("insert", "overwrite", "copy") else 1
        writes = []
        for _ in range(count):
            rows = self.pick(ROW_COUNTS)
            partitions = (int(self.rng.random() * 4), 1 + int(self.rng.random() * 3))
            if kind == "ctas":
                table, layout = f"ctas_{self.next_ctas}", self.pick(["bucketed", "partitioned", "plain"])
                self.next_ctas += 1
                writes.append(Write(self.wid(), "ctas", table, rows, layout, partitions))
                continue
            if kind == "overwrite":
                variant, table = self.pick(OVERWRITES)
                if variant == "overwrite_partition":
                    partitions = (partitions[0], 1)
            elif kind == "drop":
                variant, table, rows = "drop", self.pick(sorted(self.model)), 0
            else:
                variant, table = kind, self.pick(sorted(BASE_TABLES))
                if kind == "optimize":
                    rows = 0
            writes.append(Write(self.wid(), variant, table, rows, self.model[table].layout, partitions))
        return writes

    def run_writes(self, conn, writes: list[Write], go: threading.Event, done: threading.Event) -> None:
        go.wait()
        try:
            for write in writes:
                write.started = time.monotonic()
                try:
                    execute_write(conn, write, self.static_partition_clause)
                    write.acked = True
                except psycopg.Error as e:
                    write.error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    write.sqlstate = e.sqlstate
                    return
                finally:
                    write.finished = time.monotonic()
        finally:
            done.set()

    def work_rows(self, write: Write) -> int:
        """Rows a statement handles: OPTIMIZE and DROP those already in the table."""
        existing = sum(c for c, _ in self.model[write.table].contents.values()) if write.table in self.model else 0
        return max(write.rows or existing, 10_000)

    def expected_seconds(self, writes: list[Write]) -> float:
        return sum(self.work_rows(w) * self.seconds_per_row.get(w.kind, 1e-6) for w in writes)

    def cycle(self, number: int) -> bool:
        """Runs one cycle; False when the run cannot go on (the server does not come back)."""
        with self.server.connect() as conn:
            self.ensure_base_tables(conn)
        writes = self.plan()
        moment = self.pick(["before"] + ["during"] * 5 + ["publish"] * 2 + ["after"] * 2)
        if moment == "publish" and writes[0].kind == "drop":  # a DROP moves no file
            moment = "during"
        fraction = self.rng.random()
        before_files = self.table_files()

        conn = self.server.connect()
        go, done = threading.Event(), threading.Event()
        published = False
        client = threading.Thread(target=self.run_writes, args=(conn, writes, go, done), daemon=True)
        client.start()
        if moment == "before":  # the statement finds the server gone
            self.server.kill()
            kill_at = time.monotonic()
            go.set()
        else:
            go.set()
            if moment == "during":
                done.wait(fraction * 1.1 * self.expected_seconds(writes))
            elif moment == "publish":
                published = self.wait_for_publish(writes, before_files, done)
            else:
                done.wait(120)
                time.sleep(fraction * 0.05)
            kill_at = time.monotonic()
            self.server.kill()
        self.stats.kills += 1
        if "panicked" in self.server.log_text():
            self.fail(f"cycle {number}: the server panicked (log {self.server.log_path})")
        client.join(60)
        conn.close()
        if client.is_alive():
            self.fail(f"cycle {number}: the client did not return within 60s of the kill")

        self.stats.writes_started += sum(w.started is not None for w in writes)
        for w in writes:
            if w.started is None or w.finished is None:
                continue
            # Learn how long a row takes: from acknowledged statements, and as a lower bound
            # from those the kill interrupted.
            per_row = (min(w.finished, kill_at) - w.started) / self.work_rows(w)
            old = self.seconds_per_row.get(w.kind, per_row)
            if w.acked:
                self.seconds_per_row[w.kind] = 0.5 * old + 0.5 * per_row
            elif w.sqlstate is None:
                self.seconds_per_row[w.kind] = max(old, per_row)
            if w.sqlstate is not None and w.finished is not None and w.finished < kill_at:
                self.fail(f"cycle {number}: {w.describe()} failed before the kill: {w.sqlstate} {w.error}")
        in_flight = next((w for w in writes if not w.acked and w.started is not None
                          and w.started <= kill_at and (w.finished is None or w.finished >= kill_at)), None)
        if in_flight is not None:
            observed = "mid_publish" if moment == "publish" and published else "mid_statement"
        elif all(w.acked for w in writes):
            observed = "after_ack"
        else:
            observed = "before_statement"
        self.stats.kill_moments[observed] += 1
        # A statement that was sent but not acknowledged may have committed, whenever the kill
        # landed, so every unacknowledged statement that started is judged all-or-nothing.
        unacked = next((w for w in writes if not w.acked and w.started is not None), None)

        try:
            self.server.start()
        except ServerFailed as e:
            self.fail(f"cycle {number}: the server did not restart after the kill: {e}")
            return False
        outcome = self.verify(number, writes, unacked, before_files)
        acked = sum(w.acked for w in writes)
        summary = ", ".join(w.describe() + self.fate(w, kill_at) for w in writes)
        after = f"; unacked w{unacked.wid} {outcome} after restart" if unacked else ""
        print(f"cycle {number}: {summary}; kill {moment} -> {observed}; acked {acked}/{len(writes)}{after}",
              flush=True)
        self.stats.cycles += 1
        return True

    def wait_for_publish(self, writes: list[Write], before_files: dict, done: threading.Event) -> bool:
        """Waits until a data file no table lists appears outside the staging directory of a
        table being written (the write is moving its files into place, before its commit), or
        until the writes are done. True in the first case."""
        deadline = time.monotonic() + 120
        tables = {w.table for w in writes}
        warehouse = self.server.data_dir / "warehouse" / "default"
        known = {warehouse / name / path for name, paths in before_files.items() for path in paths}
        while not done.is_set() and time.monotonic() < deadline:
            for name in tables:
                for root, dirs, files in os.walk(warehouse / name):
                    if "_temporary" in dirs:
                        dirs.remove("_temporary")
                    if any(f.endswith(".parquet") and Path(root, f) not in known for f in files):
                        return True
            time.sleep(0.001)
        return False

    @staticmethod
    def fate(write: Write, kill_at: float) -> str:
        if write.started is None:
            return " (not sent)"
        took = f"{(write.finished or kill_at) - write.started:.2f}s"
        return f" (acked in {took})" if write.acked else f" (unacked, killed after {took})"

    # -- checks after a restart --------------------------------------------------------------

    def table_files(self) -> dict[str, frozenset]:
        tables, _, _ = self.files.committed()
        return {name: frozenset(f[0] for f in files) for name, (_, _, files) in tables.items()}

    def verify(self, number: int, writes: list[Write], unacked: Write | None, before_files: dict) -> str | None:
        """Checks the server's state after a restart; returns what became of the unacknowledged
        write (applied, absent or partial), if there was one."""
        acked_model = self.model
        for w in writes:
            if w.acked:
                acked_model = w.apply(acked_model)
        with_unacked = unacked.apply(acked_model) if unacked is not None else None
        with self.server.connect() as conn:
            actual = read_contents(conn)
        files_now = self.table_files()

        has_acked = same_contents(actual, acked_model)
        has_unacked = with_unacked is not None and same_contents(actual, with_unacked)
        if unacked is None:
            outcome = None
        elif unacked.kind == "optimize":  # the rows are the same either way: judge by the file list
            outcome = self.optimize_outcome(unacked.table, before_files, files_now) if has_acked else "partial"
        else:
            outcome = "absent" if has_acked else "applied" if has_unacked else "partial"

        replay = f"cycle {number}, seed {self.args.seed}"
        if has_acked or has_unacked:
            self.stats.acknowledged_verified += sum(w.acked for w in writes)
            self.model = with_unacked if outcome == "applied" else acked_model
        else:
            expected = acked_model if unacked is None else with_unacked
            what = "acknowledged writes are not intact" if unacked is None else \
                "the rows are neither those with nor those without the unacknowledged write"
            self.fail(f"{replay}: {what}: {contents_diff(expected, actual)}")
            self.model = {name: Table(acked_model.get(name, table).layout, table.contents)
                          for name, table in actual.items()}
        if unacked is not None:
            self.stats.unacked[outcome] += 1
            if outcome == "partial":
                self.fail(f"{replay}: unacknowledged {unacked.describe()} was left partly applied")
        for w in writes:
            if w.acked and w.kind == "optimize":
                self.check_optimized(replay, w, before_files, files_now)
        self.check_files(replay)
        return outcome

    def optimize_outcome(self, table: str, before: dict, now: dict) -> str:
        old, new = before.get(table, frozenset()), now.get(table, frozenset())
        if new == old:
            return "absent"
        return "applied" if not (old & new) else "partial"

    def check_optimized(self, replay: str, write: Write, before: dict, now: dict) -> None:
        old, new = before.get(write.table, frozenset()), now.get(write.table, frozenset())
        if old and old & new:
            self.fail(f"{replay}: acknowledged {write.describe()} left {len(old & new)} of its old files listed")
        if write.layout != "plain":
            slots = [(str(Path(p).parent), bucket_of_name(Path(p).name)) for p in new]
            if len(slots) != len(set(slots)):
                self.fail(f"{replay}: after acknowledged {write.describe()} a bucket has several files")

    def check_files(self, replay: str) -> None:
        report, tables = self.files.check()
        shown = set(self.model)
        if set(tables) != shown:
            self.fail(f"{replay}: metastore tables {sorted(tables)} differ from the model {sorted(shown)}")
        groups = [("stray file", report.stray_files, self.stats.stray_files),
                  ("stray directory", report.stray_dirs, self.stats.stray_dirs),
                  ("missing file", report.missing, self.stats.missing_files),
                  ("bucket violation", report.bucket_violations, self.stats.bucket_violations),
                  ("unsorted file", report.unsorted, self.stats.unsorted_files),
                  ("row count mismatch", report.row_mismatches, self.stats.row_count_mismatches),
                  ("file problem", report.problems, set())]
        for label, found, seen in groups:
            new = [f for f in found if (label, f) not in self.reported]
            seen.update(found)
            if new:
                self.reported.update((label, f) for f in new)
                shown_paths = ", ".join(new[:4]) + (f", … {len(new) - 4} more" if len(new) > 4 else "")
                self.fail(f"{replay}: {len(new)} new {label}(s): {shown_paths}")

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.setup()
            for number in range(1, self.args.cycles + 1):
                if not self.cycle(number):
                    break
        except ServerFailed as e:
            self.fail(f"server: {e}")
        finally:
            self.server.kill()


# --------------------------------------------------------------------------------------------
# Full disk


def write_bucket_map(conn: psycopg.Connection, path: Path) -> None:
    """Every key's bucket, as the server computes it."""
    rows = conn.execute(f"SELECT id, pmod(hash(id), {BUCKETS}) FROM range({KEYS})").fetchall()
    path.write_text("".join(f"{k},{b}\n" for k, b in rows))


def full_disk(args, work: Path) -> dict:
    """Fills a small filesystem with INSERT, then COPY, then CTAS until each fails, checking
    after each failure that the error is clean and nothing else changed; then frees space."""
    mount_point = work / "small-fs"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        reason = (mounted.stderr or mounted.stdout).strip() or f"mount exited with {mounted.returncode}"
        # Asked for and not run is a failure, not a pass.
        failure = f"cannot mount a 64 MiB tmpfs for --full-disk: {reason}"
        return {"status": "unavailable", "reason": failure, "failures": [failure]}
    result = {"status": "ran", "filesystem_mib": 64, "fills": [], "failures": []}
    server = Server(args.binary, mount_point / "data", work)
    server.starts = 100  # its logs follow the cycles' ones
    bucket_map = work / "bucket_map.csv"
    rng = Random(args.seed)
    model: Model = {}
    wids = iter(range(1_000_000, 2_000_000))

    def fail(message: str) -> None:
        result["failures"].append(message)
        print(f"  FAIL full disk: {message}", flush=True)

    def fill(conn: psycopg.Connection, kind: str) -> None:
        nonlocal model
        for attempt in range(40):
            table = f"fill_ctas_{attempt}" if kind == "ctas" else "filler"
            write = Write(next(wids), kind, table, 400_000 + int(rng.random() * 200_000), "bucketed")
            try:
                execute_write(conn, write)
                model = write.apply(model)
            except psycopg.Error as e:
                used = round(shutil.disk_usage(mount_point).used / 2**20, 1)
                message = str(e).strip()
                result["fills"].append({"kind": kind, "acked_before_error": attempt, "sqlstate": e.sqlstate,
                                        "message": message, "used_mib_after_error": used})
                print(f"full disk: {kind} #{attempt + 1} failed with {e.sqlstate}: {message}", flush=True)
                if e.sqlstate not in CLEAN_DISK_ERRORS:
                    fail(f"{kind} on a full disk failed with {e.sqlstate}, not 53100: {message}")
                return
        fail(f"40 {kind} writes did not fill the filesystem")

    reported = set()

    def check(stage: str) -> None:
        if not server.alive():
            raise ServerFailed(f"the server died ({stage}):\n{server.log_tail()}")
        with server.connect() as conn:
            conn.execute("SELECT 1").fetchone()
            actual = read_contents(conn)
            if not bucket_map.exists():
                write_bucket_map(conn, bucket_map)
        if not same_contents(actual, model):
            fail(f"{stage}: contents differ: {contents_diff(model, actual)}")
        report, _ = FileChecker(server.data_dir, args.duckdb_python, bucket_map).check()
        for label, found in (("stray file", report.stray_files), ("stray directory", report.stray_dirs),
                             ("missing file", report.missing), ("bucket violation", report.bucket_violations),
                             ("row count mismatch", report.row_mismatches), ("file problem", report.problems)):
            new = [f for f in found if (label, f) not in reported]
            reported.update((label, f) for f in new)
            if new:
                fail(f"{stage}: {len(new)} new {label}(s): {', '.join(new[:4])}")

    try:
        server.start()
        with server.connect() as conn:
            for name, layout in (("keep_b", "bucketed"), ("keep_p", "partitioned"), ("filler", "bucketed")):
                conn.execute(create_sql(name, layout))
                model[name] = Table(layout)
            for name in ("keep_b", "keep_p"):
                write = Write(next(wids), "insert", name, 50_000, model[name].layout, (0, 3))
                execute_write(conn, write)
                model = write.apply(model)
        for kind in ("insert", "copy", "ctas"):
            with server.connect() as conn:
                fill(conn, kind)
            check(f"after the failed {kind}")
        with server.connect() as conn:
            for name in sorted(model):
                if name == "filler" or name.startswith("fill_ctas_"):
                    conn.execute(f"DROP TABLE {name}")
                    del model[name]
            write = Write(next(wids), "insert", "keep_b", 50_000, "bucketed")
            try:
                execute_write(conn, write)
                model = write.apply(model)
                result["write_after_freeing_space"] = "ok"
            except psycopg.Error as e:
                result["write_after_freeing_space"] = f"{e.sqlstate}: {str(e).strip()}"
                fail(f"a write after DROP TABLE freed space failed: {e.sqlstate} {e}")
        check("after freeing space")
        server.kill()
        server.start()
        check("after a restart")
    except (ServerFailed, psycopg.Error) as e:
        fail(f"{type(e).__name__}: {e}")
    finally:
        server.kill()
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
    return result


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="the bucketsql executable")
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, help="data directory (must be empty or absent; default: a temporary one)")
    parser.add_argument("--full-disk", action="store_true", help="also fill a 64 MiB tmpfs (needs mount rights)")
    parser.add_argument("--duckdb-python", default=os.path.expanduser(DEFAULT_DUCKDB_PYTHON),
                        help="a Python with the duckdb package, to read the Parquet files")
    parser.add_argument("--keep", action="store_true", help="keep the working directory even when all passed")
    args = parser.parse_args()
    args.binary = str(Path(args.binary).resolve())
    logging.getLogger("psycopg").setLevel(logging.ERROR)  # a COPY cut by the kill logs a warning

    work = Path(tempfile.mkdtemp(prefix="bucketsql-crash-"))
    data_dir = (args.data_dir or work / "data").resolve()
    if data_dir.exists() and any(data_dir.iterdir()):
        parser.error(f"--data-dir {data_dir} is not empty")
    print(f"seed {args.seed}, {args.cycles} cycles, data directory {data_dir}, logs in {work}", flush=True)

    started = time.monotonic()
    harness = CrashCycles(args, work, data_dir)
    harness.run()
    stats = harness.stats
    disk = full_disk(args, work) if args.full_disk else {"status": "not requested"}
    failures = stats.failures + [f"full disk: {f}" for f in disk.get("failures", [])]

    result = {
        "seed": args.seed,
        "cycles": stats.cycles,
        "kills": stats.kills,
        "kill_moments": stats.kill_moments,
        "writes_started": stats.writes_started,
        "acknowledged_writes_verified": stats.acknowledged_verified,
        "unacknowledged": stats.unacked,
        "stray_files": len(stats.stray_files),
        "stray_dirs": len(stats.stray_dirs),
        "missing_files": len(stats.missing_files),
        "bucket_violations": len(stats.bucket_violations),
        "unsorted_files": len(stats.unsorted_files),
        "row_count_mismatches": len(stats.row_count_mismatches),
        "full_disk": {k: v for k, v in disk.items() if k != "failures"},
        "notes": stats.notes,
        "seconds": round(time.monotonic() - started, 1),
        "failures": failures,
    }
    print()
    print(f"{stats.cycles} cycles, {stats.kills} kills ({', '.join(f'{k} {v}' for k, v in stats.kill_moments.items())})")
    print(f"acknowledged writes verified: {stats.acknowledged_verified}; unacknowledged: "
          + ", ".join(f"{k} {v}" for k, v in stats.unacked.items()))
    print(f"stray files {len(stats.stray_files)}, stray directories {len(stats.stray_dirs)}, missing files "
          f"{len(stats.missing_files)}, bucket violations {len(stats.bucket_violations)}")
    if args.full_disk:
        print(f"full disk: {disk['status']}" + (f" ({disk['reason']})" if "reason" in disk else ""))
    for note in stats.notes:
        print(f"note: {note}")
    print(f"{len(failures)} failure(s)" + (f"; working directory kept: {work}" if failures else ""))
    if not failures and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

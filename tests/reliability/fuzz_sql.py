#!/usr/bin/env python3
"""Fuzz bucketsql's SQL front end with random valid and malformed statements over psycopg 3.

What it does
------------
Starts ``BINARY serve --listen 127.0.0.1:PORT --data-dir TMP --memory-limit 1GiB`` on a free
port, creates a bucketed table (``CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS``), a second
one with 8 buckets, a partitioned and a plain table with a few hundred rows (NULLs, negative
keys, odd Unicode), and then sends ``--statements N`` statements generated from ``--seed``:

* valid ones: selects, joins of every kind (with hints), aggregates, GROUPING SETS / ROLLUP /
  CUBE, window functions, set operations, subqueries and CTEs, EXPLAIN in every mode, SET /
  SHOW / RESET of ``spark.sql.*`` settings, SHOW / DESCRIBE, and CREATE / INSERT / INSERT
  OVERWRITE / CTAS / DROP / OPTIMIZE / ANALYZE on scratch tables;
* malformed or hostile ones: valid statements truncated at a random point or with tokens
  swapped, deleted or duplicated; deep nesting of parentheses, CASE, functions, subqueries,
  UNION ALL chains; very long ``1+1+…`` and ``AND`` chains; huge literals (1e400, 40-digit
  and 1000-digit integers, 1 MB strings, 10 000-character identifiers); huge IN lists; odd
  Unicode (RTL overrides, combining marks, emoji, noncharacters) and invalid UTF-8 byte
  sequences; ``repeat('x', 1000000000)``, ``lpad('x', 2147483647, 'y')``, huge ranges, CUBEs
  of many columns, thousands of columns, cross joins of many tables.

Each connection runs ``SET statement_timeout = '5s'``; statements alternate between the simple
query protocol and prepared execution (psycopg ``prepare=True``: Parse/Bind/Execute), and the
connection is replaced every 250 statements. Every statement must come back with a result
or with an error whose SQLSTATE has a sensible class. A failure is:

* an error with SQLSTATE class XX (internal error), or with no SQLSTATE, or with a class that
  is no PostgreSQL error class (00/01/02 success and warning classes and 08 included);
* a dropped connection (the client reconnects and carries on);
* no answer within ``--timeout`` seconds (a hang: the client closes its socket and waits for
  the server to go idle before going on; a statement shape that hung twice is skipped after);
* the server dying (it is restarted on the same data directory, and the run goes on);
* a result the client cannot read as UTF-8 text.

Statements holding NUL bytes cannot be sent by psycopg (libpq strings end at NUL); they are
counted and skipped (``fuzz_protocol.py`` sends NULs in raw Query messages). Statements with
invalid UTF-8 go as bytes; PostgreSQL answers 22021, and any other answer is counted as a
note, not a failure here (``fuzz_protocol.py`` checks it).

At the end the server process must be alive and a new connection must answer ``SELECT 1``.
The server runs under ``RLIMIT_DATA`` (``--server-data-limit``, 8 GiB): a statement whose memory
runs away makes the server fail an allocation (counted as a death) instead of the host's OOM
killer picking a victim.
Failures are grouped by symptom, SQLSTATE and message prefix, each group with its shortest
statement.

Run
---
    python3 tests/reliability/fuzz_sql.py --binary target/release/bucketsql --seed 1 \\
        --statements 10000

``--only-statement I`` reruns statement I of the seed's sequence alone (after the same
setup); ``--verbose`` prints every statement's outcome. The last line of output is
``RESULT {json}``; the exit status is 1 if anything failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass

from fuzz_server import Server, print_panics

try:
    import psycopg
except ImportError:  # pragma: no cover
    sys.exit("fuzz_sql.py needs psycopg 3 (pip install psycopg[binary])")

STATEMENT_TIMEOUT = "5s"
RECYCLE_EVERY = 250
# PostgreSQL's SQLSTATE classes that an error may carry. Not here: 00 (success), 01 (warning),
# 02 (no data), 08 (connection exception: a statement's error is not one) and XX (internal).
SENSIBLE_CLASSES = {
    "03", "09", "0A", "0B", "0F", "0L", "0P", "0Z", "20", "21", "22", "23", "24", "25", "26", "27", "28",
    "2B", "2D", "2F", "34", "38", "39", "3B", "3D", "3F", "40", "42", "44", "53", "54", "55", "57", "58",
    "72", "F0", "HV", "P0",
}

# ---------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------


@dataclass
class Stmt:
    index: int
    family: str  # 'valid' or 'hostile'
    template: str  # the generator that made it
    sql: object  # str, or bytes (invalid UTF-8)
    prepared: bool
    recipe: str = ""  # a short Python expression that rebuilds a huge statement

    def text(self) -> str:
        return self.sql if isinstance(self.sql, str) else self.sql.decode("utf-8", "backslashreplace")

    def short(self, limit: int = 300) -> str:
        text = self.text()
        if len(text) <= limit:
            return text
        return f"{text[: limit - 80]} …[{len(text)} chars]… {text[-60:]}"

    def repro(self, limit: int = 600) -> str:
        how = "prepared (Parse/Bind/Execute)" if self.prepared else "simple query"
        if self.recipe and len(self.text()) > limit:
            return f"[{how}] {self.recipe}"
        if isinstance(self.sql, bytes):
            return f"[{how}, bytes] {self.sql if len(self.sql) <= limit else self.sql[:limit]!r}"
        return f"[{how}] {self.short(limit)}"


TABLES = ["bk", "bk8", "pt", "pl"]
SCRATCH = [f"scratch_{i}" for i in range(6)]
ODD_TEXT = [
    "\u202eevil\u202c", "e\u0301\u0301\u0301", "\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
    "\ufeffbom", "\uffff", "\U0010ffff", "\u2028\u2029", "\u0085", "\uff11\uff12\uff13", "\u0645\u0631\u062d\u0628\u0627",
    "\u05e9\u05dc\u05d5\u05dd", "\u0130stanbul", "stra\u00dfe", "\ufb01", "\u00a0nbsp", "a\u0000b", "\u200b", "Z\u0351\u0352\u0353",
    "\U0001d4af", "\u4e2d\u6587", "o'k", "back\\slash", "%_", "\t\r\n", "\U000e0041",
]
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc0\x80", b"\xc3", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
                b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\x80", b"\xc3\x28", b"\xe0\x80\xaf"]
SETTINGS = {
    "spark.sql.autoBroadcastJoinThreshold": ["-1", "10485760", "0", "1", "10MB", "'1k'"],
    "spark.sql.shuffle.partitions": ["1", "2", "4", "8", "16", "200"],
    "spark.sql.sources.bucketing.enabled": ["true", "false"],
    "spark.sql.bucketing.coalesceBucketsInJoin.enabled": ["true", "false"],
    "spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio": ["2", "4", "1"],
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": ["true", "false"],
    "spark.sql.join.preferSortMergeJoin": ["true", "false"],
    "spark.sql.requireAllClusterKeysForCoPartition": ["true", "false"],
    "spark.sql.adaptive.enabled": ["true", "false"],
    "spark.sql.adaptive.coalescePartitions.enabled": ["true", "false"],
    "spark.sql.adaptive.skewJoin.enabled": ["true", "false"],
    "spark.sql.adaptive.localShuffleReader.enabled": ["true", "false"],
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": ["1", "1024", "64MB"],
    "spark.sql.legacy.bucketedTableScan.outputOrdering": ["true", "false"],
    "spark.sql.sources.v2.bucketing.enabled": ["true", "false"],
    "spark.sql.sources.partitionOverwriteMode": ["static", "dynamic", "STATIC"],
    "spark.sql.defaultSizeInBytes": ["1", "1000000", "9223372036854775807"],
}
BAD_SETTING_VALUES = ["-1", "0", "abc", "''", "1e400", "99999999999999999999", "true false", "NULL", "2147483648",
                      "'\U0001F600'", "-9223372036854775808", "100000"]


class Gen:
    """Random SQL over the fuzz tables; every choice comes from `self.r`."""

    def __init__(self, r: random.Random):
        self.r = r

    def pick(self, seq):
        return self.r.choice(seq)

    # -- expressions over one alias (columns k BIGINT, v STRING, d DOUBLE)
    def num(self, a: str, depth: int = 0) -> str:
        r = self.r
        leaf = [f"{a}.k", f"{a}.d", str(r.randint(-100, 100)), f"{r.uniform(-1e3, 1e3):.3f}", f"{a}.k"]
        if depth > 2 or r.random() < 0.45:
            return self.pick(leaf)
        x = self.num(a, depth + 1)
        y = self.num(a, depth + 1)
        return self.pick([
            f"({x} {self.pick(['+', '-', '*'])} {y})", f"({x} / NULLIF({y}, 0))", f"abs({x})", f"pmod({a}.k, {r.randint(1, 9)})",
            f"hash({a}.k)", f"coalesce({a}.k, {r.randint(0, 9)})", f"length({self.string(a, depth + 1)})",
            f"CASE WHEN {self.pred(a, depth + 1)} THEN {x} ELSE {y} END", f"round({a}.d, {r.randint(0, 3)})",
            f"CAST({x} AS {self.pick(['BIGINT', 'DOUBLE', 'INT', 'DECIMAL(20,4)'])})", f"greatest({x}, {y})",
        ])

    def string(self, a: str, depth: int = 0) -> str:
        r = self.r
        lit = "'" + self.pick(["a", "b", "x", "", "abc", "\u00e9t\u00e9", "\U0001F600"]).replace("'", "''") + "'"
        if depth > 2 or r.random() < 0.5:
            return self.pick([f"{a}.v", f"{a}.v", lit])
        s = self.string(a, depth + 1)
        return self.pick([
            f"concat({s}, {lit})", f"upper({s})", f"lower({s})", f"substr({s}, {r.randint(-3, 3)}, {r.randint(0, 4)})",
            f"CAST({a}.k AS STRING)", f"coalesce({s}, 'null')", f"lpad({s}, {r.randint(0, 8)}, '*')", f"trim({s})",
            f"reverse({s})", f"concat_ws('-', {s}, {s})", f"({s} || {lit})", f"repeat({s}, {r.randint(0, 3)})",
        ])

    def pred(self, a: str, depth: int = 0) -> str:
        r = self.r
        if depth > 2 or r.random() < 0.5:
            return self.pick([
                f"{a}.k {self.pick(['=', '<', '>', '<=', '>=', '<>'])} {r.randint(-20, 120)}",
                f"{a}.v LIKE '{self.pick(['a%', '%b', '_', '%'])}'", f"{a}.k IN ({', '.join(str(r.randint(-5, 60)) for _ in range(r.randint(1, 6)))})",
                f"{a}.k BETWEEN {r.randint(-10, 40)} AND {r.randint(30, 120)}", f"{a}.v IS NULL", f"{a}.d IS NOT NULL",
                f"{a}.k <=> NULL", f"{a}.d > {r.uniform(-100, 100):.2f}", f"{a}.v = {self.pick(['a', 'b', 'x'])!r}",
                f"{self.num(a, depth + 1)} > {self.num(a, depth + 1)}",
            ])
        return self.pick([
            f"({self.pred(a, depth + 1)} AND {self.pred(a, depth + 1)})",
            f"({self.pred(a, depth + 1)} OR {self.pred(a, depth + 1)})", f"NOT ({self.pred(a, depth + 1)})",
        ])

    def table(self):
        return self.pick(TABLES)

    # -- queries
    def select(self, allow_order=True) -> str:
        r = self.r
        kind = self.pick(["plain", "plain", "agg", "join", "join", "window", "grouping", "subquery", "cte", "setop", "derived"])
        t = self.table()
        limit = f" LIMIT {r.randint(0, 50)}" if allow_order and r.random() < 0.4 else ""
        if kind == "plain":
            if r.random() < 0.15:
                cols = "*"
            else:
                cols = ", ".join(f"{self.pick([self.num('a'), self.string('a'), 'a.k', 'a.v', 'a.d'])} AS c{n}" for n in range(r.randint(1, 4)))
            where = f" WHERE {self.pred('a')}" if r.random() < 0.7 else ""
            order = f" ORDER BY 1{self.pick(['', ' DESC', ' NULLS FIRST'])}" if allow_order and r.random() < 0.4 and "*" not in cols else ""
            return f"SELECT {self.pick(['', 'DISTINCT '])}{cols} FROM {t} a{where}{order}{limit}"
        if kind == "agg":
            key = self.pick(["a.v", "a.k", "pmod(a.k, 5)", "a.v, a.k"])
            aggs = ", ".join(self.pick(["count(*)", "sum(a.d)", "avg(a.k)", "min(a.v)", "max(a.d)", "count(DISTINCT a.v)",
                                        "sum(a.k) FILTER (WHERE a.k > 0)", "stddev(a.d)", "approx_distinct(a.k)"])
                             for _ in range(r.randint(1, 3)))
            having = f" HAVING count(*) > {r.randint(0, 3)}" if r.random() < 0.3 else ""
            return f"SELECT {key}, {aggs} FROM {t} a WHERE {self.pred('a')} GROUP BY {key}{having}{limit}"
        if kind == "join":
            u = self.table()
            how = self.pick(["JOIN", "INNER JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN", "LEFT SEMI JOIN",
                             "LEFT ANTI JOIN", "CROSS JOIN", "JOIN"])
            hint = self.pick(["", "", "/*+ BROADCAST(b) */ ", "/*+ MERGE(a, b) */ ", "/*+ SHUFFLE_HASH(b) */ ",
                              "/*+ SHUFFLE_REPLICATE_NL(b) */ "])
            on = "" if how == "CROSS JOIN" else f" ON a.k = b.k{self.pick(['', ' AND a.v = b.v', f' AND {self.pred(chr(98))}'])}"
            cols = "a.k, a.v" if "SEMI" in how or "ANTI" in how else self.pick(["a.k, b.v", "count(*)", "a.k, b.d, a.v"])
            group = " GROUP BY a.k, b.v" if cols == "a.k, b.v" and r.random() < 0.3 else ""
            if cols == "count(*)":
                group, limit = "", ""
            return f"SELECT {hint}{cols} FROM {t} a {how} {u} b{on} WHERE {self.pred('a')}{group}{limit}"
        if kind == "window":
            fn = self.pick(["row_number()", "rank()", "dense_rank()", f"ntile({r.randint(1, 5)})", "sum(a.d)", "count(*)",
                            f"lag(a.k, {r.randint(1, 3)})", "lead(a.v)", "first_value(a.k)", "avg(a.d)", "max(a.k)"])
            part = self.pick(["", "PARTITION BY a.v ", "PARTITION BY pmod(a.k, 3) "])
            frame = self.pick(["", "", " ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
                               " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", " RANGE BETWEEN 2 PRECEDING AND 2 FOLLOWING"])
            if fn in ("row_number()", "rank()", "dense_rank()") or fn.startswith(("ntile", "lag", "lead")):
                frame = ""
            return f"SELECT a.k, a.v, {fn} OVER ({part}ORDER BY a.k{frame}) AS w FROM {t} a WHERE {self.pred('a')}{limit}"
        if kind == "grouping":
            how = self.pick(["GROUPING SETS ((a.v), (a.k), ())", "ROLLUP (a.v, a.k)", "CUBE (a.v, a.k)",
                             "GROUPING SETS ((a.v, a.k), (a.v))", "ROLLUP (a.k, a.v)", "GROUPING SETS ((a.k), ())"])
            return f"SELECT a.v, a.k, count(*), sum(a.d) FROM {t} a WHERE {self.pred('a')} GROUP BY {how}{limit}"
        if kind == "subquery":
            u = self.table()
            return self.pick([
                f"SELECT a.k FROM {t} a WHERE a.k IN (SELECT b.k FROM {u} b WHERE {self.pred('b')}){limit}",
                f"SELECT a.k FROM {t} a WHERE NOT EXISTS (SELECT 1 FROM {u} b WHERE b.k = a.k){limit}",
                f"SELECT a.k, (SELECT max(b.d) FROM {u} b) AS m FROM {t} a WHERE {self.pred('a')}{limit}",
                f"SELECT a.k FROM {t} a WHERE a.d > (SELECT avg(b.d) FROM {u} b WHERE b.v = a.v){limit}",
            ])
        if kind == "cte":
            return (f"WITH c AS (SELECT a.k, a.v, a.d FROM {t} a WHERE {self.pred('a')}) "
                    f"SELECT c.v, count(*) FROM c c JOIN {self.table()} b ON c.k = b.k GROUP BY c.v{limit}")
        if kind == "setop":
            op = self.pick(["UNION ALL", "UNION", "EXCEPT", "INTERSECT", "EXCEPT ALL", "INTERSECT ALL"])
            return f"SELECT a.k FROM {t} a WHERE {self.pred('a')} {op} SELECT b.k FROM {self.table()} b WHERE {self.pred('b')}"
        return f"SELECT x.k, x.n FROM (SELECT a.k, {self.num('a')} AS n FROM {t} a WHERE {self.pred('a')}) x WHERE x.n IS NOT NULL{limit}"

    def rows(self, n: int) -> str:
        r = self.r
        out = []
        for _ in range(n):
            k = "NULL" if r.random() < 0.05 else str(r.randint(-20, 200))
            v = "NULL" if r.random() < 0.05 else "'" + self.pick(["a", "b", "x", "y", "\u00e9", "\U0001F600"]) + "'"
            d = "NULL" if r.random() < 0.05 else f"{r.uniform(-1000, 1000):.3f}"
            out.append(f"({k}, {v}, {d})")
        return ", ".join(out)

    def ddl(self) -> str:
        r = self.r
        s = self.pick(SCRATCH)
        kind = self.pick(["create", "create", "insert", "insert", "insert_select", "overwrite", "drop", "ctas", "maint", "describe"])
        if kind == "create":
            layout = self.pick([
                "", f" CLUSTERED BY (k) INTO {r.randint(1, 16)} BUCKETS", f" CLUSTERED BY (k) SORTED BY (k) INTO {r.randint(1, 16)} BUCKETS",
                " PARTITIONED BY (v)", f" PARTITIONED BY (v) CLUSTERED BY (k) INTO {r.randint(1, 8)} BUCKETS",
                f" CLUSTERED BY (k, v) INTO {r.randint(1, 8)} BUCKETS", " CLUSTERED BY (k) INTO 100000 BUCKETS",
                " CLUSTERED BY (k) INTO 0 BUCKETS", " CLUSTERED BY (k) INTO 100001 BUCKETS", " CLUSTERED BY (nope) INTO 2 BUCKETS",
                " CLUSTERED BY (k) SORTED BY (k DESC) INTO 2 BUCKETS", " PARTITIONED BY (k) CLUSTERED BY (k) INTO 2 BUCKETS",
            ])
            return f"CREATE TABLE {self.pick(['', 'IF NOT EXISTS '])}{s} (k BIGINT, v STRING, d DOUBLE) USING parquet{layout}"
        if kind == "insert":
            # Named columns: a partitioned scratch table stores its partition column last.
            return f"INSERT INTO {s} (k, v, d) VALUES {self.rows(r.randint(1, 30))}"
        if kind == "insert_select":
            return f"INSERT INTO {s} (k, v, d) SELECT a.k, a.v, a.d FROM {self.table()} a WHERE {self.pred('a')}"
        if kind == "overwrite":
            return f"INSERT OVERWRITE TABLE {s} SELECT a.k, a.v, a.d FROM {self.table()} a WHERE {self.pred('a')}"
        if kind == "drop":
            return f"DROP TABLE {self.pick(['', 'IF EXISTS '])}{s}"
        if kind == "ctas":
            layout = self.pick(["", f" CLUSTERED BY (k) INTO {r.randint(1, 8)} BUCKETS", " PARTITIONED BY (v)"])
            return f"CREATE TABLE {s} USING parquet{layout} AS SELECT a.k, a.v, a.d FROM {self.table()} a WHERE {self.pred('a')}"
        if kind == "maint":
            return self.pick([f"OPTIMIZE {s}", f"ANALYZE TABLE {s} COMPUTE STATISTICS", f"REFRESH TABLE {s}",
                              f"MSCK REPAIR TABLE {s}", f"SHOW PARTITIONS {s}", f"SELECT count(*), sum(k) FROM {s}"])
        return self.pick([f"DESCRIBE {s}", f"DESCRIBE TABLE EXTENDED {s}", f"SHOW CREATE TABLE {s}"])

    def session(self) -> str:
        key = self.pick(list(SETTINGS))
        return self.pick([
            f"SET {key} = {self.pick(SETTINGS[key])}", f"SET {key}={self.pick(SETTINGS[key])}", f"SET {key}", f"SHOW {key}",
            f"RESET {key}", "SET", f"SELECT current_setting('{key}')", f"SET {key} = {self.pick(BAD_SETTING_VALUES)}",
            f"SET spark.sql.no_such_setting_{self.r.randint(0, 9)} = 1",
        ])

    def show(self) -> str:
        t = self.table()
        return self.pick([
            "SHOW TABLES", "SHOW TABLES IN default", f"DESCRIBE {t}", f"DESCRIBE TABLE EXTENDED {t}", f"SHOW CREATE TABLE {t}",
            "SHOW PARTITIONS pt", "SELECT relname FROM pg_catalog.pg_class ORDER BY 1 LIMIT 5",
            f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{t}'", "SELECT version()",
            "SHOW spark.sql.shuffle.partitions", "BEGIN", "COMMIT", "ROLLBACK", "SELECT * FROM pg_catalog.pg_settings LIMIT 3",
            f"SELECT count(*) FROM {t}", f"ANALYZE TABLE {t} COMPUTE STATISTICS",
        ])

    def explain(self) -> str:
        return f"EXPLAIN {self.pick(['', 'FORMATTED ', 'EXTENDED ', 'COST ', 'CODEGEN ', 'ANALYZE '])}{self.select()}"

    def valid(self):
        kind = self.r.choices(["select", "ddl", "session", "show", "explain"], [60, 14, 8, 8, 10])[0]
        return kind, getattr(self, kind)()

    # -- hostile statements: (template, sql, recipe)
    def tokens(self, sql: str) -> list:
        return re.findall(r"'(?:[^']|'')*'|\"[^\"]*\"|\w+|\s+|.", sql, re.S)

    def mutate(self):
        r = self.r
        _, sql = self.valid()
        toks = self.tokens(sql)
        words = [i for i, t in enumerate(toks) if not t.isspace()]
        op = self.pick(["truncate", "truncate", "swap", "delete", "duplicate", "insert", "mix"])
        if op == "truncate" or len(words) < 2:
            return "mutated:truncate", sql[: r.randint(0, max(len(sql) - 1, 0))], ""
        for _ in range(r.randint(1, 3) if op == "mix" else 1):
            words = [i for i, t in enumerate(toks) if not t.isspace()]
            if len(words) < 2:
                break
            what = self.pick(["swap", "delete", "duplicate", "insert"]) if op == "mix" else op
            i, j = r.sample(words, 2)
            if what == "swap":
                toks[i], toks[j] = toks[j], toks[i]
            elif what == "delete":
                toks[i] = ""
            elif what == "duplicate":
                toks[i] = toks[i] + " " + toks[i]
            else:
                toks[i] = toks[i] + " " + self.pick(["(", ")", ",", "SELECT", "FROM", "WHERE", "NULL", "'", "\"", ";", "*",
                                                     "JOIN", "ON", "AS", "BY", "--", "/*", "$1", "::", "[", "}", "OVER", "CASE"])
        return f"mutated:{op}", "".join(toks), ""

    def nesting(self):
        n = self.pick([10, 100, 500, 998, 999, 1000, 1001, 1500, 5000, 20000, 100000])
        kind = self.pick(["parens", "case", "function", "subquery", "scalar", "union", "not", "minus", "concat", "in_sub", "from_parens"])
        if kind == "parens":
            return "deep:parens", "SELECT " + "(" * n + "1" + ")" * n, f"'SELECT ' + '(' * {n} + '1' + ')' * {n}"
        if kind == "case":
            return ("deep:case", "SELECT " + "CASE WHEN k > 0 THEN " * n + "1" + " ELSE 0 END" * n + " FROM bk",
                    f"'SELECT ' + 'CASE WHEN k > 0 THEN ' * {n} + '1' + ' ELSE 0 END' * {n} + ' FROM bk'")
        if kind == "function":
            return "deep:function", "SELECT " + "abs(" * n + "-1" + ")" * n, f"'SELECT ' + 'abs(' * {n} + '-1' + ')' * {n}"
        if kind == "subquery":
            n = min(n, 20000)
            return ("deep:subquery", "SELECT * FROM " + "(SELECT * FROM " * n + "bk" + ") s" * n,
                    f"'SELECT * FROM ' + '(SELECT * FROM ' * {n} + 'bk' + ') s' * {n}")
        if kind == "scalar":
            n = min(n, 20000)
            return "deep:scalar_subquery", "SELECT " + "(SELECT " * n + "1" + ")" * n, f"'SELECT ' + '(SELECT ' * {n} + '1' + ')' * {n}"
        if kind == "union":
            n = min(n, 20000)
            return ("deep:union_all", " UNION ALL ".join(["SELECT 1"] * n), f"' UNION ALL '.join(['SELECT 1'] * {n})")
        if kind == "not":
            return "deep:not", "SELECT " + "NOT " * n + "true", f"'SELECT ' + 'NOT ' * {n} + 'true'"
        if kind == "minus":
            return "deep:unary_minus", "SELECT " + "- " * n + "1", f"'SELECT ' + '- ' * {n} + '1'"
        if kind == "concat":
            return "deep:concat", "SELECT " + " || ".join(["'a'"] * n), f"'SELECT ' + ' || '.join([\"'a'\"] * {n})"
        if kind == "in_sub":
            n = min(n, 20000)
            return ("deep:in_subquery", "SELECT 1 WHERE 1 IN " + "(SELECT 1 WHERE 1 IN " * n + "(1)" + ")" * n,
                    f"'SELECT 1 WHERE 1 IN ' + '(SELECT 1 WHERE 1 IN ' * {n} + '(1)' + ')' * {n}")
        return "deep:from_parens", "SELECT * FROM " + "(" * n + "bk" + ")" * n, f"'SELECT * FROM ' + '(' * {n} + 'bk' + ')' * {n}"

    def long_expr(self):
        n = self.pick([100, 999, 1000, 1001, 5000, 10000, 50000, 200000])
        kind = self.pick(["plus", "and", "or", "mul", "cols", "in_or"])
        if kind == "plus":
            return "long:1+1+...", "SELECT " + "+".join(["1"] * n), f"'SELECT ' + '+'.join(['1'] * {n})"
        if kind == "and":
            return "long:AND chain", "SELECT count(*) FROM bk WHERE " + " AND ".join(["k = k"] * n), \
                f"'SELECT count(*) FROM bk WHERE ' + ' AND '.join(['k = k'] * {n})"
        if kind == "or":
            return "long:OR chain", "SELECT count(*) FROM bk WHERE " + " OR ".join(f"k = {i}" for i in range(n)), \
                f"'SELECT count(*) FROM bk WHERE ' + ' OR '.join(f'k = {{i}}' for i in range({n}))"
        if kind == "mul":
            return "long:1*1*...", "SELECT " + "*".join(["1"] * n), f"'SELECT ' + '*'.join(['1'] * {n})"
        if kind == "cols":
            n = min(n, 20000)
            return "long:many columns", "SELECT " + ", ".join(["k"] * n) + " FROM bk LIMIT 1", \
                f"'SELECT ' + ', '.join(['k'] * {n}) + ' FROM bk LIMIT 1'"
        return "long:IN or", "SELECT count(*) FROM bk WHERE k IN (1) " + "OR k IN (1) " * n, \
            f"'SELECT count(*) FROM bk WHERE k IN (1) ' + 'OR k IN (1) ' * {n}"

    def huge_literal(self):
        r = self.r
        choice = r.randrange(16)
        if choice == 0:
            lit = self.pick(["1e400", "-1e400", "1e-400", "1E+308", "1.7976931348623157e309", "4.9e-325", "0e99999999999"])
            return "literal:float", f"SELECT {lit}", ""
        if choice == 1:
            lit = "".join(str(r.randrange(10)) for _ in range(40))
            return "literal:40 digits", f"SELECT {lit}, -{lit}, {lit} + 1, CAST({lit} AS BIGINT)", ""
        if choice == 2:
            n = self.pick([100, 1000, 100000])
            return "literal:huge integer", "SELECT " + "9" * n, f"'SELECT ' + '9' * {n}"
        if choice == 3:
            n = self.pick([400, 5000])
            return "literal:long decimal", "SELECT 0." + "0" * n + "1", f"'SELECT 0.' + '0' * {n} + '1'"
        if choice == 4:
            n = self.pick([1 << 20, 4 << 20])
            return "literal:1MB string", f"SELECT length('{'x' * n}')", f"\"SELECT length('\" + 'x' * {n} + \"')\""
        if choice == 5:
            n = 1 << 20
            return ("literal:1MB string insert", f"INSERT INTO {self.pick(SCRATCH)} VALUES (1, '{'y' * n}', 1.0)",
                    f"\"INSERT INTO scratch_N VALUES (1, '\" + 'y' * {n} + \"', 1.0)\"")
        if choice == 6:
            n = self.pick([64, 1000, 10000, 100000])
            return "literal:long identifier", f"SELECT 1 AS {'a' * n}", f"'SELECT 1 AS ' + 'a' * {n}"
        if choice == 7:
            n = self.pick([64, 1000, 10000])
            return "literal:long table name", f"CREATE TABLE {'t' * n} (a INT)", f"'CREATE TABLE ' + 't' * {n} + ' (a INT)'"
        if choice == 8:
            return "literal:overflow", self.pick([
                "SELECT 9223372036854775807 + 1", "SELECT -9223372036854775808 - 1", "SELECT abs(-9223372036854775808)",
                "SELECT CAST(2147483648 AS INT)", "SELECT CAST('99999999999999999999' AS BIGINT)", "SELECT 1 / 0", "SELECT 1 % 0",
                "SELECT pmod(1, 0)", "SELECT CAST(1e400 AS DOUBLE)", "SELECT 2147483647 * 2147483647 * 2147483647",
                "SELECT CAST(-9223372036854775808 AS BIGINT) / -1", "SELECT CAST(1 AS DECIMAL(38, 38))",
                "SELECT CAST(1 AS DECIMAL(39, 0))", "SELECT CAST(1 AS DECIMAL(0, 0))", "SELECT CAST(12345 AS DECIMAL(3, 1))",
                "SELECT power(10, 400)", "SELECT exp(1000)", "SELECT ln(0)", "SELECT sqrt(-1)", "SELECT log(-1)",
            ]), ""
        if choice == 9:
            return "literal:dates", self.pick([
                "SELECT DATE '9999-12-31' + 1", "SELECT CAST('2024-13-45' AS DATE)", "SELECT TIMESTAMP '0001-01-01 00:00:00'",
                "SELECT date_add(DATE '9999-12-31', 2147483647)", "SELECT CAST('99999-01-01' AS TIMESTAMP)",
                "SELECT DATE '-0001-01-01'", "SELECT make_date(2024, 2, 30)", "SELECT to_timestamp(1e20)",
                "SELECT interval '2147483647 days' + interval '2147483647 days'", "SELECT CAST('infinity' AS TIMESTAMP)",
                "SELECT date_add(DATE '2020-01-01', -2147483648)", "SELECT CAST(9223372036854775807 AS TIMESTAMP)",
            ]), ""
        if choice == 10:
            return "literal:functions", self.pick([
                "SELECT repeat('ab', -1)", "SELECT substr('abc', -2147483648, 2147483647)", "SELECT substr('abc', 2147483647)",
                "SELECT * FROM range(0, 10, 0)", "SELECT lpad('x', -1, 'y')", "SELECT lpad('x', 5, '')",
                "SELECT split_part('a,b', ',', 0)", "SELECT chr(-1)", "SELECT chr(1114112)", "SELECT left('abc', -2147483648)",
                "SELECT pmod(-9223372036854775808, -1)", "SELECT hash()", "SELECT date_add()", "SELECT concat_ws()",
                "SELECT * FROM range(-9223372036854775808, 9223372036854775807, 4611686018427387904)",
                "SELECT * FROM generate_series(1, 3, 0)", "SELECT regexp_replace('a', '(', 'b')", "SELECT 'a' ~ '('",
                "SELECT ntile(0) OVER (ORDER BY k) FROM bk", "SELECT lag(k, -1) OVER (ORDER BY k) FROM bk",
                "SELECT nth_value(k, 0) OVER (ORDER BY k) FROM bk", "SELECT $1", "SELECT $0", "SELECT $65536",
                "SELECT k FROM bk LIMIT -1", "SELECT k FROM bk LIMIT 9223372036854775807 OFFSET 9223372036854775807",
                "SELECT k FROM bk ORDER BY 5", "SELECT k FROM bk GROUP BY 0", "SELECT * FROM bk TABLESAMPLE (200 PERCENT)",
            ]), ""
        if choice == 11:
            return "literal:bucket math", self.pick([
                "SELECT pmod(hash(NULL), 4)", "SELECT hash(1, 'a', 2.0, NULL, DATE '2020-01-01', true)",
                "SELECT hash(" + ", ".join(["k"] * 500) + ") FROM bk LIMIT 1", "SELECT pmod(hash(k), 0) FROM bk",
            ]), ""
        if choice == 12:
            n = self.pick([10, 100, 1000])
            return "literal:many VALUES rows", "SELECT count(*) FROM (VALUES " + ", ".join(f"({i})" for i in range(n)) + ") t(a)", ""
        if choice == 13:
            return "literal:odd casts", self.pick([
                "SELECT CAST('abc' AS BIGINT)", "SELECT CAST('' AS DOUBLE)", "SELECT CAST('NaN' AS DOUBLE) = CAST('NaN' AS DOUBLE)",
                "SELECT CAST('1e400' AS DOUBLE)", "SELECT CAST(X'FF' AS STRING)", "SELECT CAST('\U0001F600' AS BINARY)",
                "SELECT CAST(NULL AS STRUCT<a: INT>)", "SELECT CAST(ARRAY(1, 2) AS STRING)", "SELECT CAST(k AS BOOLEAN) FROM bk",
                "SELECT CAST('tru' AS BOOLEAN)", "SELECT CAST(1 AS VOID)", "SELECT CAST(1 AS VARCHAR(-1))", "SELECT CAST(1 AS no_such_type)",
            ]), ""
        if choice == 14:
            return "literal:null bytes", self.pick(["SELECT 'a\x00b'", "SELECT length('\x00')", "SELECT 1 -- \x00",
                                                    "SELECT \x00", "INSERT INTO scratch_0 VALUES (1, 'x\x00y', 1.0)"]), ""
        return "literal:escapes", self.pick([
            "SELECT E'\\x00'", "SELECT E'\\u0000'", "SELECT U&'\\0000'", "SELECT E'\\xff\\xfe'", "SELECT E'\\ud800'",
            "SELECT U&'\\D800'", "SELECT 'it''s', \"weird \"\" name\"", "SELECT X'GG'", "SELECT B'102'", "SELECT $$dollar$$",
            "SELECT $tag$ unterminated", "SELECT 'unterminated", "SELECT \"unterminated", "SELECT 1 /* unterminated",
        ]), ""

    def in_list(self):
        n = self.pick([1000, 10000, 65536, 100000, 300000])
        kind = self.pick(["int", "str", "not", "mixed", "dup"])
        if kind == "int":
            return "in-list:int", "SELECT count(*) FROM bk WHERE k IN (" + ", ".join(str(i) for i in range(n)) + ")", \
                f"'SELECT count(*) FROM bk WHERE k IN (' + ', '.join(str(i) for i in range({n})) + ')'"
        if kind == "str":
            return "in-list:string", "SELECT count(*) FROM pl WHERE v IN (" + ", ".join(f"'s{i}'" for i in range(n)) + ")", \
                f"'SELECT count(*) FROM pl WHERE v IN (' + ', '.join(f\"'s{{i}}'\" for i in range({n})) + ')'"
        if kind == "not":
            return "in-list:not in", "SELECT count(*) FROM pt WHERE k NOT IN (" + ", ".join(str(i) for i in range(n)) + ")", \
                f"'SELECT count(*) FROM pt WHERE k NOT IN (' + ', '.join(str(i) for i in range({n})) + ')'"
        if kind == "mixed":
            return "in-list:mixed types", "SELECT count(*) FROM bk WHERE k IN (" + ", ".join(
                self.pick(["1", "'a'", "NULL", "1.5", "true"]) for _ in range(min(n, 10000))) + ")", ""
        return "in-list:duplicates", "SELECT count(*) FROM bk8 WHERE k IN (" + ", ".join(["7"] * n) + ")", \
            f"'SELECT count(*) FROM bk8 WHERE k IN (' + ', '.join(['7'] * {n}) + ')'"

    def unicode(self):
        odd = self.pick(ODD_TEXT)
        quoted = odd.replace("'", "''")
        if self.r.random() < 0.3:
            bad = self.pick(INVALID_UTF8)
            return "unicode:invalid UTF-8", self.pick([
                b"SELECT '" + bad + b"'", b"SELECT length('a" + bad + b"')", b"SELECT 1 -- " + bad, b"SELECT " + bad,
                b"SELECT 1 AS \"" + bad + b"\"", b"SELECT count(*) FROM bk WHERE v = '" + bad + b"'",
                b"INSERT INTO scratch_1 VALUES (1, '" + bad + b"', 1.0)",
            ]), ""
        ident = odd.replace('"', '""')
        return "unicode:odd text", self.pick([
            f"SELECT '{quoted}'", f"SELECT length('{quoted}'), upper('{quoted}'), lower('{quoted}'), reverse('{quoted}')",
            f"SELECT substr('{quoted}', 2, 1), lpad('{quoted}', 10, '{quoted}')", f"SELECT 1 AS \"{ident}\"",
            f"SELECT count(*) FROM bk WHERE v LIKE '%{quoted}%'", f"CREATE TABLE \"{ident}\" (a INT)",
            f"CREATE TABLE {odd} (a INT)", f"SELECT * FROM \"{ident}\"", f"SELECT hash('{quoted}')",
            f"INSERT INTO {self.pick(SCRATCH)} VALUES (1, '{quoted}', 2.0)", f"SELECT '{quoted}' {odd}",
            f"SET spark.sql.shuffle.partitions = '{quoted}'", f"SELECT CAST('{quoted}' AS BIGINT)",
        ]), ""

    def expensive(self):
        n = self.r.randint(5, 9)
        tables = ", ".join(f"{self.pick(TABLES)} t{i}" for i in range(n))
        return self.r.choices([
            ("expensive:repeat 1e9 length", "SELECT length(repeat('x', 1000000000))", ""),
            ("expensive:repeat 1e9", "SELECT repeat('x', 1000000000)", ""),
            ("expensive:lpad 2^31-1", "SELECT lpad('x', 2147483647, 'y')", ""),
            ("expensive:rpad 2^31-1 length", "SELECT length(rpad('x', 2147483647, 'y'))", ""),
            ("expensive:nested repeat", "SELECT length(repeat(repeat('x', 100000), 100000))", ""),
            ("expensive:repeat over rows", "SELECT length(repeat(v, 10000000)) FROM bk", ""),
            ("expensive:huge range", "SELECT count(*) FROM range(100000000000)", ""),
            ("expensive:huge range sum", "SELECT sum(id) FROM range(9223372036854775807)", ""),
            ("expensive:generate_series", "SELECT count(*) FROM generate_series(1, 100000000000)", ""),
            ("expensive:cross join many tables", f"SELECT count(*) FROM {tables}", ""),
            ("expensive:cross join rows", f"SELECT * FROM {tables} LIMIT 10", ""),
            ("expensive:cube of many columns", "SELECT count(*) FROM bk GROUP BY CUBE(" + ", ".join(
                f"k + {i}" for i in range(self.pick([12, 16, 20, 30]))) + ")", ""),
            ("expensive:self join explosion", "SELECT count(*) FROM bk a JOIN bk b ON a.v = b.v JOIN bk c ON b.v = c.v "
             "JOIN bk d ON c.v = d.v JOIN bk e ON d.v = e.v", ""),
            ("expensive:window over range", "SELECT max(r) FROM (SELECT row_number() OVER (ORDER BY id DESC) r FROM range(50000000)) x", ""),
            ("expensive:distinct range", "SELECT count(DISTINCT id) FROM range(300000000)", ""),
            ("expensive:sort big strings", "SELECT max(s) FROM (SELECT repeat(CAST(id AS STRING), 1000) s FROM range(2000000) ORDER BY s) x", ""),
        ], [3, 1, 1, 1, 2, 2, 2, 2, 2, 4, 2, 2, 2, 1, 1, 1])[0]

    def hostile(self):
        kind = self.r.choices(["mutate", "nesting", "long_expr", "huge_literal", "in_list", "unicode", "expensive"],
                              [40, 14, 8, 16, 6, 12, 4])[0]
        return getattr(self, kind)()


def generate(seed: int, count: int):
    """The seed's statements (independent of what the server answers)."""
    master = random.Random(seed)
    for i in range(count):
        g = Gen(random.Random(master.getrandbits(64)))
        if g.r.random() < 0.55:
            template, sql = g.valid()
            family, recipe = "valid", ""
            template = f"valid:{template}"
        else:
            template, sql, recipe = g.hostile()
            family = "hostile"
        yield Stmt(i, family, template, sql, prepared=g.r.random() < 0.35, recipe=recipe)


def setup_statements(seed: int) -> list:
    g = Gen(random.Random(seed ^ 0x5EED))
    stmts = [
        "CREATE TABLE bk (k BIGINT, v STRING, d DOUBLE) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS",
        "CREATE TABLE bk8 (k BIGINT, v STRING, d DOUBLE) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS",
        "CREATE TABLE pt (k BIGINT, v STRING, d DOUBLE, p STRING) USING parquet PARTITIONED BY (p)",
        "CREATE TABLE pl (k BIGINT, v STRING, d DOUBLE) USING parquet",
    ]
    for t in ("bk", "bk8", "pl"):
        for _ in range(2):  # two writes: two files per bucket
            stmts.append(f"INSERT INTO {t} VALUES {g.rows(60)}")
    for p in ("p1", "p2", "\u00e9t\u00e9"):
        stmts.append(f"INSERT INTO pt SELECT k, v, d, '{p}' FROM bk8 WHERE k % 3 = {len(p) % 3}")
    stmts.append("INSERT INTO pl VALUES (NULL, NULL, NULL), (0, '', CAST('NaN' AS DOUBLE)), "
                 "(-9223372036854775808, '\U0001F600\u202e', CAST('Infinity' AS DOUBLE))")
    return stmts


# ---------------------------------------------------------------------------------------
# Running statements
# ---------------------------------------------------------------------------------------


class Watchdog:
    """Closes the socket of a statement that runs past its deadline (the client's bound)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.deadline = None
        self.fd = None
        self.fired = False
        threading.Thread(target=self._run, daemon=True).start()

    def arm(self, fd: int, seconds: float):
        with self.cond:
            self.fd, self.deadline, self.fired = fd, time.monotonic() + seconds, False
            self.cond.notify()

    def disarm(self) -> bool:
        with self.cond:
            self.deadline = None
            return self.fired

    def _run(self):
        with self.cond:
            while True:
                if self.deadline is None:
                    self.cond.wait()
                    continue
                remaining = self.deadline - time.monotonic()
                if remaining > 0:
                    self.cond.wait(remaining)
                    continue
                try:
                    s = socket.socket(fileno=os.dup(self.fd))
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
                self.fired, self.deadline = True, None


def connect(port: int):
    conn = psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True,
                           connect_timeout=10, sslmode="disable")
    conn.prepared_max = 10_000  # no DEALLOCATE between our statements
    conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    return conn


def fresh_select1(port: int):
    """None if a new connection answers SELECT 1, else the reason."""
    try:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True,
                             connect_timeout=10, sslmode="disable") as c:
            row = c.execute("SELECT 1").fetchone()
            return None if row == (1,) else f"SELECT 1 returned {row!r}"
    except Exception as e:  # noqa: BLE001 - any failure to answer is the finding
        return f"{type(e).__name__}: {str(e).strip()[:200]}"


@dataclass
class Outcome:
    status: str  # 'ok' | 'error' | 'fail' | 'skipped'
    sqlstate: str | None = None
    message: str = ""
    symptom: str = ""
    seconds: float = 0.0
    rows: int = 0


def check_result_text(cur) -> str:
    """A complaint if any text value of the (small) result is not valid UTF-8."""
    res = cur.pgresult
    if res is None or res.ntuples > 2000:
        return ""
    for r in range(res.ntuples):
        for c in range(res.nfields):
            if res.fformat(c) != 0:
                continue
            value = res.get_value(r, c)
            if value is not None:
                try:
                    bytes(value).decode("utf-8")
                except UnicodeDecodeError:
                    return f"row {r} column {c} is not valid UTF-8: {bytes(value)[:40]!r}"
    return ""


def execute(conn, stmt: Stmt, watchdog: Watchdog, timeout: float) -> Outcome:
    started = time.monotonic()
    fd = conn.fileno()
    watchdog.arm(fd, timeout)
    try:
        cur = conn.execute(stmt.sql, prepare=stmt.prepared)
        rows = cur.pgresult.ntuples if cur.pgresult is not None else 0
        bad_text = check_result_text(cur)
        fired = watchdog.disarm()
        elapsed = time.monotonic() - started
        if fired:
            return Outcome("fail", symptom="hang (no answer within the time bound)", seconds=elapsed)
        if bad_text:
            return Outcome("fail", symptom="result is not valid UTF-8", message=bad_text, seconds=elapsed)
        return Outcome("ok", seconds=elapsed, rows=rows)
    except psycopg.Error as e:
        fired = watchdog.disarm()
        elapsed = time.monotonic() - started
        message = (e.diag.message_primary or str(e)).strip()
        if fired:
            return Outcome("fail", message=message, symptom="hang (no answer within the time bound)", seconds=elapsed)
        if conn.broken or conn.closed:
            return Outcome("fail", message=message, symptom="connection dropped", seconds=elapsed)
        code = e.sqlstate
        if not code:
            return Outcome("fail", message=message, symptom="error without SQLSTATE", seconds=elapsed)
        if code.startswith("XX"):
            return Outcome("fail", code, message, symptom="internal error (class XX)", seconds=elapsed)
        if code[:2] not in SENSIBLE_CLASSES:
            return Outcome("fail", code, message, symptom=f"error with SQLSTATE class {code[:2]}", seconds=elapsed)
        return Outcome("error", code, message, seconds=elapsed)
    except Exception as e:  # noqa: BLE001 - e.g. the client could not encode or decode something
        watchdog.disarm()
        return Outcome("fail", message=f"{type(e).__name__}: {e}", symptom="client-side exception", seconds=time.monotonic() - started)


def normalize(message: str) -> str:
    message = " ".join(message.split())
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "…", message)
    text = re.sub(r"\d+", "N", text)
    return text[:70]


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def default_binary() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("BUCKETSQL_BINARY", os.path.join(root, "target", "release", "bucketsql"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=default_binary(), help="the bucketsql executable")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--statements", type=int, default=500, help="number of fuzz statements")
    ap.add_argument("--timeout", type=float, default=15.0,
                    help="client-side bound per statement in seconds (statement_timeout is 5 s)")
    ap.add_argument("--idle-wait", type=float, default=180.0, help="after a hang, wait up to this long for the server to go idle")
    ap.add_argument("--only-statement", type=int, default=None, help="run only statement I of the seed's sequence")
    ap.add_argument("--server-data-limit", type=float, default=8.0,
                    help="GiB of data segment (RLIMIT_DATA) the server may map, to protect the host (0: no limit)")
    ap.add_argument("--max-deaths", type=int, default=200, help="stop after the server died this many times")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and server log")
    ap.add_argument("--verbose", action="store_true", help="print every statement's outcome")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        ap.error(f"not an executable: {args.binary}")

    server = Server(args.binary, "fuzz-sql", keep=args.keep, data_limit=int(args.server_data_limit * (1 << 30)))
    watchdog = Watchdog()
    started = time.monotonic()
    failures = []  # (Stmt, Outcome)
    by_status = collections.Counter()
    by_family = collections.Counter()
    error_codes = collections.Counter()
    valid_errors = {}  # (SQLSTATE, message prefix) -> [count, shortest Stmt, message]
    notes = collections.Counter()
    hung_templates = collections.Counter()
    last_failure = None  # index of the latest failing statement
    deaths = 0
    final_ok = False
    panics = collections.Counter()
    peak_rss = 0.0
    conn = None
    try:
        server.start()
        print(f"server pid {server.pid} on 127.0.0.1:{server.port}, data {server.data_dir}", flush=True)
        print(f"binary {server.build}", flush=True)
        conn = connect(server.port)
        for sql in setup_statements(args.seed):
            conn.execute(sql)
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        print(f"tables: {counts}", flush=True)

        total = args.statements if args.only_statement is None else args.only_statement + 1
        for stmt in generate(args.seed, total):
            if args.only_statement is not None and stmt.index != args.only_statement:
                continue
            if stmt.index and stmt.index % 1000 == 0:
                print(f"... {stmt.index} statements, {len(failures)} failed, {time.monotonic() - started:.0f}s", flush=True)
            if (stmt.index % RECYCLE_EVERY == 0 and stmt.index) or conn is None or conn.closed or conn.broken:
                if conn is not None:
                    conn.close()
                conn = None
                try:
                    conn = connect(server.port)
                except psycopg.Error as e:
                    dead = server.wait_dead(3)
                    deaths += dead
                    symptom = "could not reconnect" + ("; server died" if dead else "")
                    after = f" (after statement #{last_failure} failed)" if last_failure is not None else ""
                    failures.append((stmt, Outcome("fail", message=f"{str(e)[:200]} | server {server.exit_status()}{after}",
                                                   symptom=symptom)))
                    server.restart()
                    conn = connect(server.port)
            if "\x00" in stmt.text():
                notes["skipped: NUL byte in the statement (psycopg cannot send it)"] += 1
                by_status["skipped"] += 1
                continue
            if hung_templates[stmt.template] >= 2:
                notes[f"skipped: {stmt.template} (hung twice already)"] += 1
                by_status["skipped"] += 1
                continue
            out = execute(conn, stmt, watchdog, args.timeout)
            by_family[(stmt.family, out.status)] += 1
            by_status[out.status] += 1
            if out.status == "error":
                error_codes[out.sqlstate] += 1
                if stmt.family == "valid":
                    entry = valid_errors.setdefault((out.sqlstate, normalize(out.message)), [0, stmt, out.message])
                    entry[0] += 1
                    if len(stmt.text()) < len(entry[1].text()):
                        entry[1], entry[2] = stmt, out.message
            if isinstance(stmt.sql, bytes) and out.sqlstate != "22021":
                notes["invalid UTF-8 answered without 22021 (PostgreSQL: 22021)"] += 1
            if args.verbose:
                print(f"#{stmt.index} {stmt.template} {'P' if stmt.prepared else 'S'} {out.status} {out.sqlstate or ''} "
                      f"{out.symptom} {out.message[:100]!r} {out.seconds:.2f}s :: {stmt.short(160)!r}", flush=True)
            if out.status == "ok" and re.search(r"\bRESET\b|statement_timeout", stmt.text(), re.I):
                try:  # the statement may have reset our bound
                    conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
                except psycopg.Error:
                    pass
            if out.status != "fail":
                continue
            # A failure: find out whether the server survived, and get back to a usable state.
            last_failure = stmt.index
            peak_rss = max(peak_rss, server.rss_mib())
            if out.symptom.startswith("hang"):
                hung_templates[stmt.template] += 1
            if out.symptom.startswith(("hang", "connection dropped")) or conn.broken or conn.closed:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                conn = None
                if out.symptom.startswith("hang"):
                    rss = server.rss_mib()
                    waited = server.wait_idle(args.idle_wait)
                    out.message += f" (server still busy for {waited:.0f}s; RSS {rss:.0f} MiB)"
                if server.wait_dead(3):
                    deaths += 1
                    out.symptom += "; server died"
                    out.message += f" | server {server.exit_status()}; log ends: {server.log_tail(300)!r}"
                    print(f"#{stmt.index}: the server died ({stmt.template}, {server.exit_status()}); restarting", flush=True)
                    failures.append((stmt, out))
                    if deaths > args.max_deaths:
                        print(f"the server died more than {args.max_deaths} times; stopping")
                        break
                    server.restart()
                    continue
            failures.append((stmt, out))
        peak_rss = max(peak_rss, server.rss_mib())
        if conn is not None:
            conn.close()
            conn = None
        alive = server.alive()
        err = fresh_select1(server.port) if alive else "the server is not running"
        final_ok = alive and err is None
        if not final_ok:
            failures.append((None, Outcome("fail", symptom="final check", message=f"alive={alive}: {err}")))
        panics = server.panics()
    except Exception as e:  # noqa: BLE001 - report what happened, then the summary
        traceback.print_exc()
        failures.append((None, Outcome("fail", symptom="fuzzer aborted", message=f"{type(e).__name__}: {e}")))
        panics = server.panics()
    finally:
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        server.cleanup()

    # ---- summary
    elapsed = time.monotonic() - started
    executed = sum(by_family.values())
    print()
    print(f"{executed} statements executed (seed {args.seed}) in {elapsed:.0f}s; "
          f"server started {server.starts} time(s), died {deaths} time(s)")
    for family in ("valid", "hostile"):
        parts = ", ".join(f"{s} {by_family[(family, s)]}" for s in ("ok", "error", "fail"))
        print(f"  {family:8} {parts}")
    print("  errors by SQLSTATE: " + ", ".join(f"{c} {n}" for c, n in error_codes.most_common(25)))
    for note, n in sorted(notes.items()):
        print(f"  note: {n}x {note}")
    if valid_errors:
        print("  errors from generated valid statements (not failures; engine limits or generator mistakes):")
        for (code, _), (n, stmt, message) in sorted(valid_errors.items(), key=lambda x: -x[1][0])[:12]:
            print(f"    {n:4d}x {code} {message[:110]!r}  e.g. {stmt.short(180)}")
    groups = collections.OrderedDict()
    for stmt, out in failures:
        # Errors group by their message; hangs, drops and deaths (whose message is the
        # client's) by the statement shape that caused them.
        if out.sqlstate:
            detail = normalize(out.message)
        elif stmt is not None:
            detail = f"statement shape {stmt.template}"
        else:
            detail = out.message[:200]
        key = (out.symptom, out.sqlstate or "-", detail)
        g = groups.setdefault(key, {"count": 0, "stmt": None, "out": out, "templates": collections.Counter()})
        g["count"] += 1
        if stmt is not None:
            g["templates"][stmt.template] += 1
            if g["stmt"] is None or len(stmt.text()) < len(g["stmt"].text()):
                g.update(stmt=stmt, out=out)
    print()
    if groups:
        print(f"FAILURES: {len(failures)} in {len(groups)} groups (symptom | SQLSTATE | message prefix or statement shape)")
        for (symptom, code, prefix), g in sorted(groups.items(), key=lambda x: -x[1]["count"]):
            print(f"  [{g['count']}x] {symptom} | {code} | {prefix}")
            stmt, out = g["stmt"], g["out"]
            if stmt is not None:
                print(f"      shortest: #{stmt.index} {stmt.template}: {stmt.repro()}")
                print(f"      answer: {out.sqlstate or ''} {out.message[:300]!r} after {out.seconds:.1f}s")
                print(f"      templates: {dict(g['templates'].most_common(6))}")
                print(f"      rerun: --seed {args.seed} --only-statement {stmt.index}")
            else:
                print(f"      {out.message[:300]}")
    else:
        print("no failures")
    print_panics(panics, 15)
    result = {
        "ok": not failures,
        "seed": args.seed,
        "binary": server.build,
        "statements": args.statements if args.only_statement is None else 1,
        "executed": executed,
        "ok_results": by_status["ok"],
        "errors": by_status["error"],
        "skipped": by_status["skipped"],
        "failed": len(failures),
        "groups": [{"symptom": s, "sqlstate": c, "message": p, "count": g["count"]} for (s, c, p), g in groups.items()],
        "server_deaths": deaths,
        "alive_and_serving_at_end": final_ok,
        "server_panics": sum(panics.values()),
        "peak_rss_mib_seen": round(peak_rss),
        "seconds": round(elapsed, 1),
    }
    print("RESULT " + json.dumps(result, ensure_ascii=False))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

"""Apache Spark and bucketsql read each other's bucketed tables.

Direction 1: a table written by bucketsql, registered in Spark with the same bucket spec over
the same directory, is read by Spark as bucketed (a join on the key needs no Exchange) and
gives the rows bucketsql gives. Direction 2: a table written by Spark's `bucketBy` and
registered in bucketsql with `LOCATION` gives the rows Spark gives. In both directions every
row sits in the file whose name carries its bucket id, and bucketsql's `hash` is Spark's.

Usage: spark_roundtrip.py PORT WORKDIR (the server must allow LOCATION under WORKDIR)
"""

import os
import re
import sys
import time

import psycopg
from pyspark.sql import SparkSession

PORT = int(sys.argv[1])
WORKDIR = os.path.abspath(sys.argv[2])
BUCKETS = 8
SPEC = f"USING parquet CLUSTERED BY (k) SORTED BY (k) INTO {BUCKETS} BUCKETS"
JOIN = "SELECT o.k, o.v, t.w FROM ours o JOIN theirs t ON o.k = t.k"
AGGREGATES = "SELECT count(*), count(k), sum(k % 1000), min(k), max(k), count(DISTINCT {c}), min({c}), max({c}) FROM {t}"
HASHES = "SELECT k, {c}, hash(k), hash({c}), hash(k, {c}) FROM {t}"

# Spark's driver otherwise binds to the host's first non-loopback address.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
started = time.monotonic()
spark = (
    SparkSession.builder.master("local[2]")
    .appName("bucketsql-roundtrip")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.memory", "1g")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", os.path.join(WORKDIR, "spark-warehouse"))
    .config("spark.sql.shuffle.partitions", "4")
    # A broadcast join or adaptive re-planning would hide whether the bucketed scans line up.
    .config("spark.sql.autoBroadcastJoinThreshold", "-1")
    .config("spark.sql.adaptive.enabled", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
spark_started = time.monotonic() - started
conn = psycopg.connect(host="127.0.0.1", port=PORT, user="postgres", dbname="postgres", autocommit=True)


def ours_rows(sql):
    return sorted(conn.execute(sql).fetchall(), key=repr)


def spark_rows(sql):
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


def ours_location(table):
    rows = conn.execute(f"DESCRIBE EXTENDED {table}").fetchall()
    location = [r[1] for r in rows if r[0] == "Location"]
    assert len(location) == 1 and location[0].startswith("file:/"), rows
    return location[0][len("file:"):]


def spark_location(table):
    rows = spark.sql(f"DESCRIBE EXTENDED {table}").collect()
    location = [r.data_type for r in rows if r.col_name == "Location"]
    assert len(location) == 1 and location[0].startswith("file:/"), rows
    return location[0][len("file:"):]


def spark_file_buckets(table, column):
    """(bucket id in the file name, k, column) for every row Spark reads from `table`, after
    checking that Spark's own `pmod(hash(k), n)` agrees with the file name."""
    out = []
    sql = f"SELECT input_file_name() AS f, pmod(hash(k), {BUCKETS}) AS b, k, {column} AS c FROM {table}"
    for r in spark.sql(sql).collect():
        m = re.search(r"_(\d+)\.c000", r.f)
        assert m, f"no bucket id in file name {r.f}"
        assert int(m.group(1)) == r.b, f"row k={r.k} has Spark bucket {r.b} but is in {r.f}"
        out.append((int(m.group(1)), r.k, r.c))
    assert {b for b, _, _ in out} == set(range(BUCKETS)), "expected rows in every bucket"
    return sorted(out, key=repr)


def check_same_buckets(table, column):
    """bucketsql's `pmod(hash(k), n)` names, for every row, the file Spark finds it in."""
    spark_side = spark_file_buckets(table, column)
    ours_side = ours_rows(f"SELECT pmod(hash(k), {BUCKETS}), k, {column} FROM {table}")
    assert spark_side == ours_side, diff(spark_side, ours_side)
    return len(spark_side)


def diff(a, b):
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    return f"{len(a)} vs {len(b)} rows; only in first: {sorted(only_a, key=repr)[:10]}; only in second: {sorted(only_b, key=repr)[:10]}"


def assert_same(sql_ours, sql_spark=None):
    ours, theirs = ours_rows(sql_ours), spark_rows(sql_spark or sql_ours)
    assert ours == theirs, f"{sql_ours}\n{diff(ours, theirs)}"
    return ours


# Direction 1: bucketsql writes, Spark reads as bucketed.
conn.execute(f"CREATE TABLE ours (k BIGINT, v STRING) {SPEC}")
conn.execute("INSERT INTO ours SELECT id, CAST(id AS STRING) FROM range(-200, 800)")
conn.execute("INSERT INTO ours SELECT id * 7, 'x' || CAST(id AS STRING) FROM range(300)")
conn.execute("INSERT INTO ours VALUES (NULL, 'no key'), (-9223372036854775808, 'min'), (9223372036854775807, 'max')")
conn.execute(
    f"CREATE TABLE theirs_copy {SPEC} AS SELECT id AS k, concat('w', CAST(id AS STRING)) AS w FROM range(-500, 1500)"
)
ours_dir = ours_location("ours")
spark.sql(f"CREATE TABLE ours (k BIGINT, v STRING) {SPEC} LOCATION '{ours_dir}'")
(
    spark.range(-500, 1500)
    .selectExpr("id AS k", "concat('w', CAST(id AS STRING)) AS w")
    .write.bucketBy(BUCKETS, "k")
    .sortBy("k")
    .saveAsTable("theirs")
)

plan = spark.sql(JOIN)._jdf.queryExecution().executedPlan().toString()
assert "SortMergeJoin" in plan, plan
assert "Exchange" not in plan, f"Spark shuffles for the join on the bucket key:\n{plan}"
assert plan.count("Bucketed: true") == 2, f"expected two bucketed scans:\n{plan}"
assert plan.count(f"SelectedBucketsCount: {BUCKETS} out of {BUCKETS}") == 2, plan

ours_count = len(assert_same("SELECT k, v FROM ours"))
assert_same(AGGREGATES.format(t="ours", c="v"))
assert_same(HASHES.format(t="ours", c="v"))
ours_bucketed = check_same_buckets("ours", "v")

# Direction 2: Spark writes, bucketsql reads.
theirs_dir = spark_location("theirs")
assert theirs_dir.startswith(WORKDIR + "/"), theirs_dir
conn.execute(f"CREATE TABLE theirs (k BIGINT, w STRING) {SPEC} LOCATION '{theirs_dir}'")
assert ours_location("theirs") == theirs_dir
theirs_count = len(assert_same("SELECT k, w FROM theirs"))
assert theirs_count == 2000, theirs_count
assert_same(AGGREGATES.format(t="theirs", c="w"))
assert_same(HASHES.format(t="theirs", c="w"))
theirs_bucketed = check_same_buckets("theirs", "w")

# The join in bucketsql, over its own copy of Spark's rows and over Spark's files, gives Spark's rows.
join_rows = spark_rows(JOIN)
assert len(join_rows) == 1000 + 215, len(join_rows)
for sql in (JOIN.replace("theirs", "theirs_copy"), JOIN):
    ours = ours_rows(sql)
    assert ours == join_rows, f"bucketsql: {sql}\n{diff(ours, join_rows)}"

# Spark's answers where DataFusion's own differ: sqrt below zero is NaN, a double meets a
# decimal literal as a double (NaN, infinities and 1e20 included), RLIKE finds a pattern, a
# literal with an exponent is a double.
assert_same(
    "SELECT isnan(sqrt(-1)), sqrt(CAST(6.25 AS DOUBLE)), "
    "CAST('NaN' AS DOUBLE) = 1.5, CAST('NaN' AS DOUBLE) < 1.5, CAST('Infinity' AS DOUBLE) > 2.25, "
    "CAST(1e20 AS DOUBLE) > 1.5, CAST(1e20 AS DOUBLE) + 1.5, 1.5 IN (CAST(1.5 AS DOUBLE), 2.5), "
    "CAST(2 AS DOUBLE) BETWEEN 1.5 AND 2.5, CAST(0.1 AS FLOAT) = 0.1, "
    "'abc' RLIKE 'b', 'abc' NOT RLIKE '^b', 'abc' REGEXP 'c$', 1e3 / 7, 2.5E-1 * 3"
)


# TRUNCATE TABLE and CREATE TABLE LIKE: the same statements in both catalogs give the same rows,
# partitions, table layout and errors. `{dir}` is a directory of each side's own.
def outcome(run, sql):
    try:
        return "ok", run(sql)
    except Exception as e:  # either engine's error, compared by SQLSTATE
        return "error", getattr(e, "sqlstate", None) or getattr(e, "getSqlState", lambda: None)()


def ours_outcome(sql):
    cur = conn.execute(sql)
    return sorted(cur.fetchall(), key=repr) if cur.description else []


LAYOUT = ("Type", "Provider", "Num Buckets", "Bucket Columns", "Sort Columns", "Statistics")
DDL = [
    "CREATE TABLE tr_b (k INT, v STRING) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS",
    "INSERT INTO tr_b SELECT id, CAST(id AS STRING) FROM range(10)",
    "ANALYZE TABLE tr_b COMPUTE STATISTICS",
    "TRUNCATE TABLE tr_b",
    "SELECT count(*) FROM tr_b",
    "INSERT INTO tr_b SELECT id, 'y' FROM range(3)",
    "SELECT k, v FROM tr_b",
    "CREATE TABLE tr_p (k INT, d STRING, h INT) USING parquet PARTITIONED BY (d, h)",
    "INSERT INTO tr_p VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 1), (4, 'b', 2)",
    "TRUNCATE TABLE tr_p PARTITION (d = 'a')",
    "SELECT * FROM tr_p",
    "SHOW PARTITIONS tr_p",
    "TRUNCATE TABLE tr_p PARTITION (h = 1)",
    "SELECT 1 FROM tr_p WHERE k = 3",
    "TRUNCATE TABLE tr_p PARTITION (d = 'no such value')",
    "SELECT * FROM tr_p",
    "SHOW PARTITIONS tr_p",
    "TRUNCATE TABLE tr_p PARTITION (x = 1)",
    "TRUNCATE TABLE tr_missing",
    "CREATE TABLE tr_e (k INT) USING parquet LOCATION '{dir}/tr_e'",
    "INSERT INTO tr_e VALUES (1)",
    "TRUNCATE TABLE tr_e",
    "SELECT * FROM tr_e",
    "CREATE TABLE lk_b LIKE tr_b",
    "INSERT INTO lk_b SELECT id, 'z' FROM range(5)",
    "SELECT k, v FROM lk_b",
    "CREATE TABLE lk_b LIKE tr_b",
    "CREATE TABLE IF NOT EXISTS lk_b LIKE tr_b",
    "CREATE TABLE lk_p LIKE tr_p",
    "INSERT INTO lk_p VALUES (9, 'c', 3)",
    "SHOW PARTITIONS lk_p",
    "CREATE TABLE lk_e LIKE tr_e LOCATION '{dir}/lk_e'",
    "CREATE TABLE lk_missing LIKE tr_missing",
    "CREATE TABLE ac_b (k INT, v STRING, p INT) USING parquet PARTITIONED BY (p) CLUSTERED BY (k) INTO 4 BUCKETS",
    "INSERT INTO ac_b VALUES (1, 'x', 7)",
    "ALTER TABLE ac_b ADD COLUMNS (c BIGINT COMMENT 'new', d DOUBLE)",
    "SELECT * FROM ac_b",
    "INSERT INTO ac_b VALUES (2, 'y', 5, 2.5, 7)",
    "SELECT k, v, c, d, p FROM ac_b WHERE c IS NULL",
    "ALTER TABLE ac_b ADD COLUMN f INT",
    "SELECT * FROM ac_b",
    "ALTER TABLE ac_b ADD COLUMNS (K INT)",
    "ALTER TABLE ac_b ADD COLUMNS (p INT)",
    "ALTER TABLE ac_b ADD COLUMNS (h INT, h INT)",
    "ALTER TABLE ac_missing ADD COLUMNS (g INT)",
    "DESCRIBE ac_b",
    "CREATE TABLE cx (id INT, tags ARRAY<STRING>, attrs MAP<STRING, INT>, pt STRUCT<x: INT, y: STRING>, s STRING) "
    "USING parquet CLUSTERED BY (id) INTO 2 BUCKETS",
    "DESCRIBE cx",
    "CREATE TABLE sl_e (k INT, v STRING) USING parquet LOCATION '{dir}/sl_e'",
    "INSERT INTO sl_e VALUES (1, 'a')",
    "CREATE TABLE sl_f (k INT, v STRING) USING parquet LOCATION '{dir}/sl_f'",
    "INSERT INTO sl_f VALUES (2, 'b'), (3, 'c')",
    "ALTER TABLE sl_e SET LOCATION '{dir}/sl_f'",
    "SELECT * FROM sl_e",
    "INSERT INTO sl_e VALUES (4, 'd')",
    "SELECT * FROM sl_e",
    "REFRESH TABLE sl_f",
    "SELECT * FROM sl_f",
    "ALTER TABLE sl_missing SET LOCATION '{dir}/sl_f'",
    "CREATE TABLE rn_a LIKE tr_b",
    "INSERT INTO rn_a SELECT id, 'r' FROM range(6)",
    "ALTER TABLE rn_a RENAME TO rn_b",
    "SELECT k, v FROM rn_b",
    "SELECT * FROM rn_a",
    "INSERT INTO rn_b SELECT id, 's' FROM range(2)",
    "SELECT k, v FROM rn_b WHERE k < 3",
    "ALTER TABLE rn_b RENAME TO tr_b",
    "ALTER TABLE rn_b RENAME TO rn_b",
    "ALTER TABLE rn_missing RENAME TO rn_x",
    "ALTER TABLE rn_b RENAME TO other_schema.rn_b",
    "ALTER TABLE rn_b RENAME COLUMN k TO kk",
    "CREATE TABLE rn_q LIKE tr_p",
    "INSERT INTO rn_q VALUES (1, 'a', 1), (2, 'b', 2)",
    "ALTER TABLE default.rn_q RENAME TO default.rn_p",
    "SHOW PARTITIONS rn_p",
    "SELECT * FROM rn_p",
    "CREATE TABLE rn_f (k INT, v STRING) USING parquet LOCATION '{dir}/rn_f'",
    "INSERT INTO rn_f VALUES (1, 'e')",
    "ALTER TABLE rn_f RENAME TO RN_E",
    "SELECT * FROM rn_e",
    "SHOW TABLES LIKE 'rn_*'",
    "SHOW TABLES IN default 'TR_*|lk_b'",
]
for side in ("ours", "spark"):
    os.makedirs(os.path.join(WORKDIR, f"ddl-{side}"))
for sql in DDL:
    ours = outcome(ours_outcome, sql.format(dir=os.path.join(WORKDIR, "ddl-ours")))
    theirs = outcome(spark_rows, sql.format(dir=os.path.join(WORKDIR, "ddl-spark")))
    assert ours == theirs, f"{sql}: bucketsql {ours}, Spark {theirs}"
for table in ("tr_b", "lk_b", "tr_p", "lk_p", "tr_e", "lk_e", "rn_b", "rn_p", "rn_e"):
    layouts = [
        {row[0]: row[1] for row in run(f"DESCRIBE EXTENDED {table}") if row[0] in LAYOUT}
        for run in (ours_rows, spark_rows)
    ]
    assert layouts[0] == layouts[1], f"DESCRIBE EXTENDED {table}: bucketsql {layouts[0]}, Spark {layouts[1]}"
# A renamed managed table's files are in its new name's directory, an external one's where they were.
for table, directory in (("rn_b", "rn_b"), ("rn_p", "rn_p"), ("rn_e", "rn_f")):
    for run in (ours_rows, spark_rows):
        location = next(row[1] for row in run(f"DESCRIBE EXTENDED {table}") if row[0] == "Location")
        assert os.path.basename(location) == directory, f"{table} is at {location}"
assert not os.path.exists(os.path.join(os.path.dirname(ours_location("rn_b")), "rn_a")), "rn_a's directory is gone"
# Spark gives these refusals no SQLSTATE; bucketsql's is 0A000, as for other operations not allowed.
for refused in ("TRUNCATE TABLE tr_b PARTITION (k = 1)", "ALTER TABLE ac_b ADD COLUMNS (e INT NOT NULL)"):
    assert outcome(ours_outcome, refused) == ("error", "0A000"), refused
    assert outcome(spark_rows, refused)[0] == "error", refused
# A managed table keeps its files in the warehouse: bucketsql refuses to point it elsewhere.
moved = "ALTER TABLE tr_b SET LOCATION '{}'".format(os.path.join(WORKDIR, "ddl-ours", "sl_f"))
assert outcome(ours_outcome, moved) == ("error", "0A000"), moved
# The columns added, their comment, and every type, as Spark prints the table.
for table in ("ac_b", "cx"):
    ddl = [run(f"SHOW CREATE TABLE {table}")[0][0] for run in (ours_rows, spark_rows)]
    assert ddl[0] == ddl[1], f"SHOW CREATE TABLE {table}: bucketsql {ddl[0]}, Spark {ddl[1]}"

version = spark.version
conn.close()
spark.stop()
print(
    f"Spark {version} (session in {spark_started:.1f}s): read bucketsql's table as bucketed "
    f"({ours_count} rows, {ours_bucketed} in their named bucket, {len(join_rows)} joined rows without Exchange); "
    f"bucketsql read Spark's table ({theirs_count} rows, {theirs_bucketed} in their named bucket); "
    f"total {time.monotonic() - started:.1f}s"
)

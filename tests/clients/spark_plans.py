#!/usr/bin/env python3
"""Writes real Spark plans and rows for the planner rules past the classic examples.

Runs a local Spark (pyspark, as ``tests/spark.rs`` installs it), creates the tables below,
and for every case prints its name, the settings it runs under, the query, the number of
rows and an order-free checksum of them (``sum(hash(columns))``, columns named after it), and Spark's
``EXPLAIN FORMATTED`` text (for an adaptive case, also its final plan once run, after
``-- after running:``); and for statements Spark refuses, the statement and Spark's reason. ``tests/plans.rs`` replays each case over the wire and compares
the plan's shape and the rows with what this wrote.

    python tests/clients/spark_plans.py > tests/data/spark-plans-rules.txt

Every query names its columns apart (no two alike), so the checksum can name them.
"""

import os
import re
import sys
import tempfile

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

ADAPTIVE = ("spark.sql.adaptive.enabled", "true")
BROADCAST_10MB = ("spark.sql.autoBroadcastJoinThreshold", "10MB")
SEMI_AND_ANTI_BELOW_A_JOIN = (
    "SELECT x.j, f.z FROM k1 x JOIN flat f ON x.j = f.b "
    "WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k AND y.m <> x.j) "
    "AND NOT EXISTS (SELECT 1 FROM k4 z WHERE z.k = x.k AND z.p <> x.j)"
)

# Each statement is also run, as written, by tests/plans.rs.
SETUP = [
    "CREATE TABLE ab1 USING parquet CLUSTERED BY (a, b) INTO 8 BUCKETS AS "
    "SELECT id % 100 AS a, id % 7 AS b, id AS v FROM range(1000)",
    "CREATE TABLE ab2 USING parquet CLUSTERED BY (a, b) INTO 8 BUCKETS AS "
    "SELECT id % 100 AS a, id % 7 AS b, id AS w FROM range(1000)",
    "CREATE TABLE ab3 USING parquet CLUSTERED BY (b, a) INTO 8 BUCKETS AS "
    "SELECT id % 50 AS a, id % 7 AS b, id AS u FROM range(700)",
    "CREATE TABLE flat USING parquet AS SELECT id % 100 AS a, id % 7 AS b, id AS z FROM range(500)",
    "CREATE TABLE k1 USING parquet CLUSTERED BY (k) INTO 8 BUCKETS AS SELECT id AS k, id % 10 AS j FROM range(1000)",
    "CREATE TABLE k2 USING parquet CLUSTERED BY (k) INTO 8 BUCKETS AS SELECT id * 2 AS k, id % 5 AS m FROM range(600)",
    "CREATE TABLE k4 USING parquet CLUSTERED BY (k) INTO 4 BUCKETS AS SELECT id AS k, id % 3 AS p FROM range(400)",
    "CREATE TABLE k16 USING parquet CLUSTERED BY (k) INTO 16 BUCKETS AS SELECT id AS k, id % 4 AS q FROM range(1600)",
    "CREATE TABLE ks1 USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS AS "
    "SELECT id % 300 AS k, id AS s FROM range(0, 900, 1, 1)",
    "CREATE TABLE ks2 USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS AS "
    "SELECT id % 200 AS k, id AS t FROM range(0, 600, 1, 1)",
    # Plain tables of one file (one write task) and of many small files, for file splitting.
    "CREATE TABLE one_file USING parquet AS SELECT id AS c, id % 97 AS g, CAST(id AS STRING) AS s "
    "FROM range(0, 200000, 1, 1)",
    "CREATE TABLE many_files USING parquet AS SELECT id % 300 AS h, id AS v FROM range(0, 3000, 1, 12)",
    "CREATE TABLE small USING parquet AS SELECT id AS g, id * 2 AS w FROM range(0, 50, 1, 1)",
    # Sorted buckets of two files each (a CTAS, then an INSERT), and DATE and TIMESTAMP keys.
    "CREATE TABLE ks3 USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS AS "
    "SELECT id % 300 AS k, id AS r FROM range(0, 900, 1, 1)",
    "INSERT INTO ks3 SELECT id % 300 AS k, id AS r FROM range(900, 1200, 1, 1)",
    "CREATE TABLE td USING parquet CLUSTERED BY (d) INTO 8 BUCKETS AS "
    "SELECT date_add(DATE '2024-01-01', CAST(id % 60 AS INT)) AS d, id AS v FROM range(600)",
    "CREATE TABLE tt USING parquet CLUSTERED BY (ts) INTO 8 BUCKETS AS "
    "SELECT CAST(date_add(DATE '2024-01-01', CAST(id % 48 AS INT)) AS TIMESTAMP) AS ts, id AS v FROM range(480)",
    # Tables after DDL: made LIKE a bucketed one, renamed with a column added, truncated and filled again.
    "CREATE TABLE kl LIKE k4",
    "INSERT INTO kl SELECT id AS k, id % 5 AS p FROM range(200)",
    "CREATE TABLE kr USING parquet CLUSTERED BY (k) INTO 4 BUCKETS AS SELECT id AS k, id % 9 AS e FROM range(300)",
    "ALTER TABLE kr RENAME TO kn",
    "ALTER TABLE kn ADD COLUMNS (f BIGINT)",
    "INSERT INTO kn SELECT id AS k, id % 9 AS e, id AS f FROM range(300, 400)",
    "CREATE TABLE kt USING parquet CLUSTERED BY (k) INTO 4 BUCKETS AS SELECT id AS k, id AS o FROM range(100)",
    "TRUNCATE TABLE kt",
    "INSERT INTO kt SELECT id AS k, id * 3 AS o FROM range(50)",
]

# (name, settings, query): joins and aggregates over keys listed in another order than the
# bucket columns (Spark's EnsureRequirements.reorderJoinKeys).
CASES = [
    ("R1 join keys in the reverse order of the bucket columns", [],
     "SELECT x.v, y.w FROM ab1 x JOIN ab2 y ON x.b = y.b AND x.a = y.a"),
    ("R1 join keys in bucket order", [],
     "SELECT x.v, y.w FROM ab1 x JOIN ab2 y ON x.a = y.a AND x.b = y.b"),
    ("R1 right side bucketed in the other order", [],
     "SELECT x.v, y.u FROM ab1 x JOIN ab3 y ON x.a = y.a AND x.b = y.b"),
    ("R1 reversed keys against a plain table", [],
     "SELECT x.v, f.z FROM ab1 x JOIN flat f ON x.b = f.b AND x.a = f.a"),
    ("R1 reversed keys in a left outer join", [],
     "SELECT x.v, y.w FROM ab1 x LEFT JOIN ab2 y ON x.b = y.b AND x.a = y.a"),
    # Bucket pruning only on the bucket column itself (FileSourceStrategy); grouping by it
    # keeps the scan bucketed, so the selected buckets show.
    ("R7 a literal on the bucket column prunes", [], "SELECT k, count(*) AS n FROM k1 WHERE k = 5 GROUP BY k"),
    ("R7 IN and IS NULL on the bucket column prune", [],
     "SELECT k, count(*) AS n FROM k1 WHERE k IN (5, 6, 7, 8) OR k IS NULL GROUP BY k"),
    ("R7 a cast of the bucket column does not prune", [],
     "SELECT k, count(*) AS n FROM k1 WHERE CAST(k AS DOUBLE) = 5.0 GROUP BY k"),
    ("R7 a narrowing cast of the bucket column does not prune", [],
     "SELECT k, count(*) AS n FROM k1 WHERE CAST(k AS INT) = 5 GROUP BY k"),
    ("R7 a narrowing cast compared with a list does not prune", [],
     "SELECT k, count(*) AS n FROM k1 WHERE CAST(k AS SMALLINT) IN (5, 6) GROUP BY k"),
    ("R7 an expression over the bucket column does not prune", [],
     "SELECT k, count(*) AS n FROM k1 WHERE k + 1 = 6 GROUP BY k"),
    # Joins without equi-keys when nothing may be broadcast (JoinSelection).
    ("R8 a cross join", [], "SELECT k1.j, f.z FROM k1 CROSS JOIN flat f WHERE f.z < 3"),
    # (k1.k IS NOT NULL written out: Spark would infer it from the condition, we do not yet.)
    ("R8 an inner non-equi join", [],
     "SELECT k1.j, f.z FROM k1 JOIN flat f ON k1.k < f.z WHERE f.z < 3 AND k1.k IS NOT NULL"),
    ("R8 a left non-equi join", [],
     "SELECT k1.j, f.z FROM k1 LEFT JOIN flat f ON k1.k < f.z AND f.z < 3 WHERE k1.k < 4"),
    ("R8 a full outer non-equi join builds the smaller side", [],
     "SELECT k1.j, f.z FROM k1 FULL JOIN (SELECT z FROM flat WHERE z < 3) f ON k1.k < f.z"),
    ("R8 a non-equi join infers isnotnull on both sides", [],
     "SELECT k1.j, f.z FROM k1 JOIN flat f ON k1.k + 1 < f.z WHERE f.z < 3"),
    # Chains of joins over different bucket counts (EnsureRequirements' ShuffleSpec choice).
    ("R2 8, 8 and 4 buckets", [],
     "SELECT x.j, y.m, z.p FROM k1 x JOIN k2 y ON x.k = y.k JOIN k4 z ON x.k = z.k"),
    ("R2 16, 8 and 4 buckets", [],
     "SELECT x.q, y.j, z.p FROM k16 x JOIN k1 y ON x.k = y.k JOIN k4 z ON y.k = z.k"),
    ("R2 4 and 16 buckets, then a plain table", [],
     "SELECT x.p, y.q, f.z FROM k4 x JOIN k16 y ON x.k = y.k JOIN flat f ON y.k = f.a"),
    # Union's output partitioning (UnionExec.outputPartitioning).
    ("R3 a union of tables bucketed alike, grouped by the key", [],
     "SELECT k, count(*) AS n FROM (SELECT k FROM k1 UNION ALL SELECT k FROM k2) u GROUP BY k"),
    ("R3 a union of 8 and 4 buckets, grouped by the key", [],
     "SELECT k, count(*) AS n FROM (SELECT k FROM k1 UNION ALL SELECT k FROM k4) u GROUP BY k"),
    ("R3 a union of tables bucketed alike, joined on the key", [],
     "SELECT u.k, y.m FROM (SELECT k FROM k1 UNION ALL SELECT k FROM k2) u JOIN k2 y ON u.k = y.k"),
    # Optimizer rewrites that decide the physical shape.
    ("R4 NOT IN a subquery", [], "SELECT k, j FROM k1 WHERE k NOT IN (SELECT p FROM k4)"),
    ("R4 NOT IN a small subquery, broadcast allowed", [("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "SELECT k, j FROM k1 WHERE k NOT IN (SELECT p FROM k4)"),
    ("R4 EXCEPT", [], "SELECT k FROM k1 EXCEPT SELECT k FROM k2"),
    ("R4 INTERSECT", [], "SELECT k FROM k1 INTERSECT SELECT k FROM k4"),
    ("R4 count distinct with another aggregate, grouped", [],
     "SELECT j, count(DISTINCT k) AS dk, sum(k) AS sk FROM k1 GROUP BY j"),
    ("R4 count distinct with another aggregate, grouped by a plain table's column", [],
     "SELECT b, count(DISTINCT a) AS da, max(z) AS mz FROM flat GROUP BY b"),
    ("R4 count distinct with a count, ungrouped", [],
     "SELECT count(DISTINCT j) AS dj, count(*) AS n FROM k1"),
    ("R4 ROLLUP on the bucket column", [], "SELECT k, sum(j) AS s FROM k1 GROUP BY ROLLUP(k)"),
    # Global ORDER BY without LIMIT: range partitioning, then a sort per partition.
    ("R5 ORDER BY on a bucketed table", [], "SELECT k, j FROM k1 ORDER BY j, k"),
    ("R5 ORDER BY descending on a plain table", [], "SELECT a, z FROM flat ORDER BY z DESC"),
    ("R5 ORDER BY, adaptive", [ADAPTIVE], "SELECT a, z FROM flat ORDER BY a DESC, z"),
    # Exchange reuse (ReuseExchangeAndSubquery).
    ("R6 a self-join of one aggregate", [],
     "WITH c AS (SELECT j, count(*) AS n FROM k1 GROUP BY j) SELECT x.j, y.n FROM c x JOIN c y ON x.j = y.j"),
    ("R6 a CTE used twice in a union, adaptive", [ADAPTIVE],
     "WITH c AS (SELECT a, sum(z) AS s FROM flat GROUP BY a) "
     "SELECT a, s FROM c WHERE s > 1000 UNION ALL SELECT a, s FROM c WHERE s < 500"),
    ("R6 a broadcast used twice", [("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "WITH s AS (SELECT a, z FROM flat WHERE z < 50) "
     "SELECT k1.j, s.z FROM k1 JOIN s ON k1.k = s.a UNION ALL SELECT k4.p, s.z FROM k4 JOIN s ON k4.k = s.a"),
    ("R6 a broadcast used twice, adaptive", [ADAPTIVE, ("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "WITH s AS (SELECT a, z FROM flat WHERE z < 50) "
     "SELECT k1.j, s.z FROM k1 JOIN s ON k1.k = s.a UNION ALL SELECT k4.p, s.z FROM k4 JOIN s ON k4.k = s.a"),
    ("R6 a CTE used twice in a union", [],
     "WITH c AS (SELECT a, sum(z) AS s FROM flat GROUP BY a) "
     "SELECT a, s FROM c WHERE s > 1000 UNION ALL SELECT a, s FROM c WHERE s < 500"),
    # Sorts under a sort-merge join over sorted buckets (bucketedTableScan.outputOrdering).
    ("R9 one bucket selected from sorted tables", [],
     "SELECT x.s, y.t FROM ks1 x JOIN ks2 y ON x.k = y.k WHERE x.k = 5"),
    ("R9 sorted tables", [], "SELECT x.s, y.t FROM ks1 x JOIN ks2 y ON x.k = y.k"),
    ("R9 one bucket selected, legacy output ordering", [("spark.sql.legacy.bucketedTableScan.outputOrdering", "true")],
     "SELECT x.s, y.t FROM ks1 x JOIN ks2 y ON x.k = y.k WHERE x.k = 5"),
    # Expressions in operators' arguments, as Spark prints them.
    ("R10 casts and arithmetic", [],
     "SELECT CAST(j AS INT) + 1 AS ji, k * 2 AS kk FROM k1 WHERE j + 1 > 3 AND CAST(k AS STRING) <> '7'"),
    ("R10 keys computed for a join", [],
     "SELECT x.j, f.z FROM k1 x JOIN flat f ON x.k + 1 = f.a AND CAST(x.j AS INT) = f.b"),
    # A plain scan is UnknownPartitioning however few splits it reads (FilePartition packs a
    # small file into one), so an exchange is planned over a single file too, and over a
    # broadcast join that streams one.
    ("S1 one file grouped", [], "SELECT g, count(*) AS n FROM one_file GROUP BY g"),
    ("S1 one file counted", [], "SELECT count(*) AS n, sum(c) AS total FROM one_file"),
    ("S1 one file sorted", [], "SELECT c, s FROM one_file WHERE c < 100 ORDER BY s"),
    ("S1 a broadcast join streaming one file, grouped on its key",
     [("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "SELECT f.g, count(*) AS n, sum(x.w) AS ws FROM one_file f JOIN small x ON f.g = x.g GROUP BY f.g"),
    ("S1 many small files grouped", [], "SELECT h, sum(v) AS total FROM many_files GROUP BY h"),
    ("S1 many small files joined to one file", [],
     "SELECT m.v, f.s FROM many_files m JOIN one_file f ON m.v = f.c"),
    ("S1 one file grouped, adaptive", [ADAPTIVE], "SELECT g, count(*) AS n FROM one_file GROUP BY g"),
    ("S1 a broadcast join streaming one file, adaptive",
     [ADAPTIVE, ("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "SELECT f.g, count(*) AS n FROM one_file f JOIN small x ON f.g = x.g GROUP BY f.g"),
    # Adaptive final plans: stages sized as Spark sizes them (UnsafeRow bytes), a join made a
    # broadcast at run time (and the bucketed scan it no longer needs), empty stages.
    ("F1 a small stage becomes a broadcast at run time, and the bucketed scan is no longer needed",
     [ADAPTIVE, ("spark.sql.autoBroadcastJoinThreshold", "1000")],
     "SELECT x.j, f.z FROM k1 x JOIN (SELECT a, z FROM flat WHERE z < 10) f ON x.k = f.a"),
    ("F1 a small stage of plain tables becomes a broadcast at run time",
     [ADAPTIVE, ("spark.sql.autoBroadcastJoinThreshold", "1000")],
     "SELECT m.v, f.z FROM many_files m JOIN (SELECT a, z FROM flat WHERE z < 20) f ON m.h = f.a"),
    ("F1 a stage just over the threshold stays a sort-merge join",
     [ADAPTIVE, ("spark.sql.autoBroadcastJoinThreshold", "1000")],
     "SELECT m.v, f.z FROM many_files m JOIN (SELECT a, z FROM flat WHERE z < 50) f ON m.h = f.a"),
    ("F1 an empty stage empties an inner join", [ADAPTIVE],
     "SELECT m.v, f.z FROM many_files m JOIN (SELECT a, z FROM flat WHERE z < 0) f ON m.h = f.a"),
    ("F1 an empty stage empties a grouped aggregate", [ADAPTIVE],
     "SELECT a, count(*) AS n FROM flat WHERE z < 0 GROUP BY a"),
    ("F1 an empty right side of a left outer join", [ADAPTIVE],
     "SELECT m.v, f.z FROM many_files m LEFT JOIN (SELECT a, z FROM flat WHERE z < 0) f ON m.h = f.a"),
    # Buckets of two files: Spark takes no scan as sorted by default, and under the legacy
    # setting only where every bucket has one file.
    ("F2 sorted buckets of two files joined", [], "SELECT x.r, y.s FROM ks3 x JOIN ks1 y ON x.k = y.k"),
    ("F2 sorted buckets of two files joined, legacy output ordering",
     [("spark.sql.legacy.bucketedTableScan.outputOrdering", "true")],
     "SELECT x.r, y.s FROM ks3 x JOIN ks1 y ON x.k = y.k"),
    ("F2 sorted buckets of two files joined to themselves, legacy output ordering",
     [("spark.sql.legacy.bucketedTableScan.outputOrdering", "true")],
     "SELECT x.r, y.r AS r2 FROM ks3 x JOIN ks3 y ON x.k = y.k WHERE x.r < 100"),
    ("F2 sorted buckets of two files joined, adaptive", [ADAPTIVE],
     "SELECT x.r, y.t FROM ks3 x JOIN ks2 y ON x.k = y.k"),
    # Chains of joins (EnsureRequirements across three and four joins).
    ("F3 four tables of 8, 8, 4 and 16 buckets", [],
     "SELECT x.j, y.m, z.p, w.q FROM k1 x JOIN k2 y ON x.k = y.k JOIN k4 z ON x.k = z.k JOIN k16 w ON x.k = w.k"),
    ("F3 the next join on the other side's key", [],
     "SELECT x.j, y.m, z.p FROM k1 x JOIN k2 y ON x.k = y.k JOIN k4 z ON y.k = z.k"),
    ("F3 a left outer join, then a join on its right side's key", [],
     "SELECT x.j, y.m, z.p FROM k1 x LEFT JOIN k2 y ON x.k = y.k JOIN k4 z ON y.k = z.k"),
    ("F3 a join on the bucket key, then on another column", [],
     "SELECT x.j, y.m, f.z FROM k1 x JOIN k2 y ON x.k = y.k JOIN flat f ON x.j = f.b"),
    ("F3 a plain table between bucketed tables", [],
     "SELECT x.p, f.z, y.q FROM k4 x JOIN flat f ON x.k = f.a JOIN k16 y ON f.a = y.k JOIN k1 w ON y.k = w.k"),
    # Aggregates: several distinct aggregates (Expand), distinct over the bucket key, grouping
    # expressions pulled out.
    ("F4 two distinct aggregates, grouped", [],
     "SELECT b, count(DISTINCT a) AS da, count(DISTINCT z) AS dz FROM flat GROUP BY b"),
    ("F4 two distinct aggregates and a plain one, ungrouped", [],
     "SELECT count(DISTINCT a) AS da, count(DISTINCT b) AS db, sum(z) AS sz FROM flat"),
    ("F4 two distinct aggregates and a count, over no rows", [],
     "SELECT count(DISTINCT a) AS da, count(DISTINCT b) AS db, count(*) AS n FROM flat WHERE z < 0"),
    ("F4 count distinct of the bucket key", [], "SELECT count(DISTINCT k) AS dk FROM k1"),
    ("F4 count distinct grouped by the bucket key", [],
     "SELECT k, count(DISTINCT j) AS dj FROM k1 GROUP BY k"),
    ("F4 count distinct of the bucket key, grouped", [],
     "SELECT j, count(DISTINCT k) AS dk FROM k1 GROUP BY j"),
    ("F4 grouped by an expression", [], "SELECT k % 10 AS g, count(*) AS n FROM k1 GROUP BY k % 10"),
    ("F4 grouped by an expression and a column", [],
     "SELECT j + 1 AS g, k, sum(j) AS s FROM k1 GROUP BY j + 1, k"),
    # Bucket pruning on DATE and TIMESTAMP keys.
    ("F5 a date on the bucket column prunes", [],
     "SELECT d, count(*) AS n FROM td WHERE d = DATE '2024-01-05' GROUP BY d"),
    ("F5 dates in a list prune", [],
     "SELECT d, count(*) AS n FROM td WHERE d IN (DATE '2024-01-05', DATE '2024-02-01') GROUP BY d"),
    ("F5 a timestamp on the bucket column prunes", [],
     "SELECT ts, count(*) AS n FROM tt WHERE ts = TIMESTAMP '2024-01-05 00:00:00' GROUP BY ts"),
    ("F5 timestamps in a list prune", [],
     "SELECT ts, count(*) AS n FROM tt WHERE ts IN (TIMESTAMP '2024-01-05 00:00:00', "
     "TIMESTAMP '2024-02-10 00:00:00') GROUP BY ts"),
    # Hints and nested-loop joins.
    ("F6 SHUFFLE_REPLICATE_NL", [],
     "SELECT /*+ SHUFFLE_REPLICATE_NL(f) */ x.p, f.z FROM k4 x JOIN flat f ON x.k = f.a"),
    ("F6 SHUFFLE_REPLICATE_NL without equi-keys", [],
     "SELECT /*+ SHUFFLE_REPLICATE_NL(x) */ x.j, f.z FROM k1 x JOIN flat f ON x.k < f.z WHERE f.z < 3"),
    ("F6 a cross join, broadcast allowed", [("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "SELECT x.p, s.w FROM k4 x CROSS JOIN small s WHERE s.w < 6"),
    ("F6 a cross join of two subqueries", [],
     "SELECT x.p, s.w FROM (SELECT p FROM k4 WHERE k < 3) x CROSS JOIN (SELECT w FROM small WHERE g < 2) s"),
    ("F6 a full outer non-equi join, broadcast allowed", [("spark.sql.autoBroadcastJoinThreshold", "10485760")],
     "SELECT x.p, s.w FROM k4 x FULL JOIN small s ON x.k < s.g"),
    ("F6 a full outer non-equi join with a broadcast hint", [],
     "SELECT /*+ BROADCAST(x) */ x.p, s.w FROM k4 x FULL JOIN small s ON x.k < s.g"),
    # Tables after DDL keep their bucketing.
    ("F7 a table made LIKE a bucketed one joins it", [], "SELECT x.p, y.p AS p2 FROM k4 x JOIN kl y ON x.k = y.k"),
    ("F7 a renamed table with an added column joins on its bucket key", [],
     "SELECT n.e, n.f, x.p FROM kn n JOIN k4 x ON n.k = x.k"),
    ("F7 an added column aggregated by the bucket key", [],
     "SELECT k, count(f) AS nf, max(e) AS me FROM kn GROUP BY k"),
    ("F7 a truncated table filled again joins", [], "SELECT t.o, x.p FROM kt t JOIN k4 x ON t.k = x.k"),
    # Subqueries become semi and anti joins after Spark infers filters: no isnotnull of their keys.
    ("F9 EXISTS with a condition", [],
     "SELECT k, j FROM k1 x WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k AND y.m <> x.j)"),
    ("F9 IN and NOT EXISTS", [],
     "SELECT a, z FROM flat f WHERE f.a IN (SELECT p FROM k4) AND NOT EXISTS (SELECT 1 FROM k2 y WHERE y.k = f.z)"),
    # Semi and anti joins move below joins to the side their condition reads.
    ("F9 EXISTS and NOT EXISTS on one side of a join", [], SEMI_AND_ANTI_BELOW_A_JOIN),
    ("F9 EXISTS on the right side of a join", [],
     "SELECT x.j, f.z FROM flat f JOIN k1 x ON x.j = f.b WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k)"),
    ("F9 EXISTS on the left side of a left outer join", [],
     "SELECT x.j, f.z FROM k1 x LEFT JOIN flat f ON x.j = f.b WHERE EXISTS (SELECT 1 FROM k4 z WHERE z.k = x.k)"),
    ("F9 EXISTS reading both sides of a join stays above it", [],
     "SELECT x.j, f.z FROM k1 x JOIN flat f ON x.j = f.b WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k AND y.m = f.a)"),
    ("F9 IN a subquery on one side of a join", [],
     "SELECT x.j, f.z FROM k1 x JOIN flat f ON x.j = f.b WHERE x.k IN (SELECT k FROM k4 WHERE p = 1)"),
    ("F9 EXISTS and NOT EXISTS on one side of a join, adaptive", [ADAPTIVE], SEMI_AND_ANTI_BELOW_A_JOIN),
    ("F9 EXISTS on the right side of a left outer join stays above it", [],
     "SELECT x.j, f.z FROM flat f LEFT JOIN k1 x ON x.j = f.b WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k)"),
    ("F9 EXISTS on the right side of a right outer join", [],
     "SELECT x.j, f.z FROM flat f RIGHT JOIN k1 x ON x.j = f.b WHERE EXISTS (SELECT 1 FROM k2 y WHERE y.k = x.k)"),
    # A join whose other side is unique on its keys and unread above it stays an inner join.
    ("F10 a join to an aggregate grouped by its key", [],
     "SELECT f.z FROM flat f JOIN (SELECT a AS ga, max(z) AS mz FROM flat GROUP BY a) g ON f.a = g.ga AND f.z < g.mz"),
    ("F10 a filter inferred from a join condition reaches the scan under another join", [],
     "SELECT j.z FROM (SELECT f.a, f.z FROM flat f JOIN small s ON f.a = s.g) j "
     "JOIN (SELECT a AS ga, max(z) AS mz FROM flat GROUP BY a) g ON j.a = g.ga AND j.z < g.mz"),
    ("F10 a correlated scalar subquery, adaptive, broadcasting the smaller side", [ADAPTIVE, BROADCAST_10MB],
     "SELECT sum(f.z) AS total FROM flat f JOIN small s ON f.a = s.g "
     "WHERE f.z < (SELECT avg(x.v) FROM many_files x WHERE x.h = s.g)"),
    # Spark drops an outer join whose other side is unread and unique on its keys.
    ("F10 a left join to an aggregate grouped by its key goes", [],
     "SELECT f.z FROM flat f LEFT JOIN (SELECT a AS ga, max(z) AS mz FROM flat GROUP BY a) g ON f.a = g.ga"),
]

# (name, statement): DDL Spark refuses, with its reason.
REFUSED = [
    ("E1 a column list with AS SELECT", "CREATE TABLE refused1 (a BIGINT) USING parquet AS SELECT 1 AS a"),
    ("E1 repeated unnamed columns in AS SELECT", "CREATE TABLE refused2 USING parquet AS SELECT 1, 1"),
    ("E1 repeated names differing in case in AS SELECT", "CREATE TABLE refused3 USING parquet AS SELECT 1 AS a, 2 AS A"),
    ("E1 all columns partitioned", "CREATE TABLE refused4 (a INT) USING parquet PARTITIONED BY (a)"),
    ("E1 an unknown bucket column", "CREATE TABLE refused5 (a INT) USING parquet CLUSTERED BY (b) INTO 2 BUCKETS"),
]

BASE_SETTINGS = [
    ("spark.sql.autoBroadcastJoinThreshold", "-1"),
    ("spark.sql.adaptive.enabled", "false"),
]


def main():
    warehouse = tempfile.mkdtemp(prefix="spark-plans-")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bucketsql-spark-plans")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", os.path.join(warehouse, "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for statement in SETUP:
        spark.sql(statement)
    out = sys.stdout
    out.write(f"# Real output of Apache Spark {spark.version} (pyspark, local[2], in-memory catalog, UTC),\n")
    out.write("# written by tests/clients/spark_plans.py; every case also runs under:\n")
    for key, value in BASE_SETTINGS:
        out.write(f"#   SET {key} = {value}\n")
    out.write("# Setup:\n")
    for statement in SETUP:
        out.write(f"#   {statement}\n")
    for name, settings, query in CASES:
        spark.sql("RESET")
        for key, value in BASE_SETTINGS + settings:
            spark.conf.set(key, value)
        frame = spark.sql(query)
        columns = ", ".join(frame.columns)
        count, checksum = spark.sql(f"SELECT count(*), sum(hash({columns})) FROM ({query})").collect()[0]
        plan = spark.sql(f"EXPLAIN FORMATTED {query}").collect()[0][0]
        out.write(f"==================== {name}\n")
        for key, value in settings:
            out.write(f"SET {key} = {value}\n")
        out.write(f"{query}\n")
        # The sum of no rows is NULL, as SQL prints it.
        out.write(f"-- rows: {count} {'NULL' if checksum is None else checksum} ({columns})\n")
        out.write(plan.replace(warehouse, "{warehouse}").rstrip("\n") + "\n")
        if ADAPTIVE in settings:
            frame.collect()
            mode = spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
            final = frame._jdf.queryExecution().explainString(mode)
            out.write("-- after running:\n" + final.replace(warehouse, "{warehouse}").rstrip("\n") + "\n")
    for name, statement in REFUSED:
        try:
            spark.sql(statement)
            raise SystemExit(f"Spark accepted {statement}")
        except PySparkException as error:
            out.write(f"==================== {name}\n{statement}\n-- error: {reason(error)}\n")
    spark.stop()


def reason(error):
    """Spark's message without its error class, SQLSTATE and position."""
    text = next(line for line in str(error).splitlines() if line.strip())
    text = re.sub(r"^\[[A-Z_0-9.]+\] ", "", text)
    text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", text)
    return re.sub(r"\(line \d+, pos \d+\)$", "", text).strip()


if __name__ == "__main__":
    main()

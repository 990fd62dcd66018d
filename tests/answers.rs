//! Queries whose plans once moved rows wrongly, run over the wire with their expected rows
//! computed here from the generating formula, never from the server's own output.

use std::collections::{BTreeMap, BTreeSet};

use tokio_postgres::Client;

use crate::common::{TestServer, error_code, text_rows};

const ROWS: i64 = 2000;

/// `facts`: k = id % 7 (NULL for every 11th id), v = id, bucketed by k into 4 buckets.
async fn facts(client: &Client) {
    client
        .batch_execute(&format!(
            "CREATE TABLE facts (k INT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS; \
             INSERT INTO facts SELECT CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id % 7 AS INT) END, id FROM range({ROWS})"
        ))
        .await
        .unwrap();
}

fn fact_rows() -> impl Iterator<Item = (Option<i64>, i64)> {
    (0..ROWS).map(|id| ((id % 11 != 0).then_some(id % 7), id))
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

fn text(value: Option<i64>) -> String {
    value.map_or_else(|| "NULL".to_string(), |v| v.to_string())
}

/// Every setting that changes where rows move, one bundle at a time.
const SETTINGS: &[&str] = &[
    "RESET ALL",
    "SET spark.sql.shuffle.partitions = 3",
    "SET spark.sql.sources.bucketing.enabled = false",
    "SET spark.sql.autoBroadcastJoinThreshold = -1; SET spark.sql.adaptive.enabled = false",
];

#[tokio::test]
async fn grouping_sets_shuffle_on_the_keys_and_the_grouping_id() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let mut sums: BTreeMap<Option<i64>, i64> = BTreeMap::new();
    for (k, v) in fact_rows() {
        *sums.entry(k).or_default() += v;
    }
    let total: i64 = sums.values().sum();
    // ROLLUP(k): one row per k (NULL keys included), and the grand total with grouping id 1.
    let mut rollup: Vec<Vec<String>> = sums.iter().map(|(k, s)| vec![text(*k), s.to_string(), "0".into()]).collect();
    rollup.push(vec!["NULL".into(), total.to_string(), "1".into()]);
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        for (sql, expected) in [
            ("SELECT k, sum(v), grouping(k) FROM facts GROUP BY ROLLUP(k)", &rollup),
            ("SELECT k, sum(v), grouping(k) FROM facts GROUP BY CUBE(k)", &rollup),
            ("SELECT k, sum(v), grouping(k) FROM facts GROUP BY GROUPING SETS ((k), ())", &rollup),
        ] {
            assert_eq!(sorted(text_rows(&client, sql).await), sorted(expected.clone()), "{setting}: {sql}");
        }
        // After a join partitioned on k, too.
        let joined = text_rows(
            &client,
            "SELECT a.k, count(*) FROM facts a JOIN facts b ON a.k = b.k AND a.v = b.v GROUP BY ROLLUP(a.k)",
        )
        .await;
        let mut counts: BTreeMap<Option<i64>, i64> = BTreeMap::new();
        for (k, _) in fact_rows().filter(|(k, _)| k.is_some()) {
            *counts.entry(k).or_default() += 1;
        }
        let mut expected: Vec<Vec<String>> = counts.iter().map(|(k, c)| vec![text(*k), c.to_string()]).collect();
        expected.push(vec!["NULL".into(), counts.values().sum::<i64>().to_string()]);
        assert_eq!(sorted(joined), sorted(expected), "{setting}");
    }
    let plan = text_rows(&client, "EXPLAIN SELECT k, sum(v) FROM facts GROUP BY ROLLUP(k)").await.remove(0).remove(0);
    assert!(plan.contains("Expand"), "{plan}");
    assert!(plan.contains("spark_grouping_id"), "{plan}");
}

#[tokio::test]
async fn cartesian_products_run_over_many_partitions() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    client.batch_execute("SET spark.sql.autoBroadcastJoinThreshold = -1").await.unwrap();
    let plan =
        text_rows(&client, "EXPLAIN SELECT count(*) FROM facts a CROSS JOIN range(300) b").await.remove(0).remove(0);
    assert!(plan.contains("CartesianProduct"), "{plan}");
    let rows = text_rows(&client, "SELECT count(*), sum(a.v + b.id) FROM facts a CROSS JOIN range(300) b").await;
    let sum_v: i64 = fact_rows().map(|(_, v)| v).sum();
    let expected_sum = sum_v * 300 + ROWS * (0..300).sum::<i64>();
    assert_eq!(rows, vec![vec![(ROWS * 300).to_string(), expected_sum.to_string()]]);
}

#[tokio::test]
async fn ranking_results_are_int_and_shuffle_as_keys() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let sql = "SELECT r, count(*) FROM (SELECT rank() OVER (PARTITION BY k ORDER BY v) AS r FROM facts) x GROUP BY r";
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        let mut per_k: BTreeMap<Option<i64>, i64> = BTreeMap::new();
        let mut expected: BTreeMap<i64, i64> = BTreeMap::new();
        for (k, _) in fact_rows() {
            let rank = per_k.entry(k).or_default();
            *rank += 1;
            *expected.entry(*rank).or_default() += 1;
        }
        let expected: Vec<Vec<String>> = expected.iter().map(|(r, c)| vec![r.to_string(), c.to_string()]).collect();
        assert_eq!(sorted(text_rows(&client, sql).await), sorted(expected), "{setting}");
    }
    let typed = client.query_one("SELECT row_number() OVER (ORDER BY v) FROM facts LIMIT 1", &[]).await.unwrap();
    assert_eq!(typed.columns()[0].type_(), &tokio_postgres::types::Type::INT4);
}

#[tokio::test]
async fn a_users_computed_column_stays_in_a_join_on_it() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    client
        .batch_execute("CREATE TABLE small (k INT); INSERT INTO small SELECT CAST(id AS INT) FROM range(20)")
        .await
        .unwrap();
    let mut expected = Vec::new();
    for (k, v) in fact_rows().filter(|(_, v)| *v < 50) {
        if let Some(k) = k.filter(|k| (1..=20).contains(k)) {
            expected.push(vec![v.to_string(), (k - 1).to_string(), k.to_string()]);
        }
    }
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        let rows = text_rows(
            &client,
            "SELECT a.v, b.k, b.k2 FROM facts a JOIN (SELECT k, k + 1 AS k2 FROM small) b ON a.k = b.k2 WHERE a.v < 50",
        )
        .await;
        assert_eq!(sorted(rows), sorted(expected.clone()), "{setting}");
        // The side's columns renamed: the join's output keeps the new names.
        let renamed = text_rows(
            &client,
            "SELECT b.c0, count(*) FROM facts a JOIN (SELECT k AS c0, k + 1 AS c1 FROM small) b ON a.k = b.c1 \
             WHERE a.v < 50 GROUP BY b.c0",
        )
        .await;
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for row in &expected {
            *counts.entry(row[1].clone()).or_default() += 1;
        }
        let counts: Vec<Vec<String>> = counts.into_iter().map(|(k, n)| vec![k, n.to_string()]).collect();
        assert_eq!(sorted(renamed), sorted(counts), "{setting}");
    }
}

#[tokio::test]
async fn a_single_distinct_aggregate_keeps_the_decimal_sums_type() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let mut groups: BTreeMap<Option<i64>, (BTreeSet<i64>, i64)> = BTreeMap::new();
    for (k, v) in fact_rows() {
        let (distinct, sum) = groups.entry(k).or_default();
        distinct.insert(v % 3);
        *sum += v;
    }
    // sum(DECIMAL(14, 2)) is DECIMAL(24, 2) in Spark, compared as such in HAVING.
    let threshold = 259_500;
    let expected: Vec<Vec<String>> = groups
        .iter()
        .filter(|(_, (_, sum))| *sum > threshold)
        .map(|(k, (distinct, sum))| vec![text(*k), distinct.len().to_string(), format!("{sum}.00")])
        .collect();
    assert!(!expected.is_empty() && expected.len() < groups.len(), "the HAVING filter keeps some groups");
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        let sql = format!(
            "SELECT k, count(DISTINCT v % 3), sum(CAST(v AS DECIMAL(14,2))) FROM facts GROUP BY k \
             HAVING sum(CAST(v AS DECIMAL(14,2))) > {threshold}"
        );
        assert_eq!(sorted(text_rows(&client, &sql).await), sorted(expected.clone()), "{setting}");
    }
}

#[tokio::test]
async fn a_failing_cast_in_a_filter_still_fails() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE words (s STRING); INSERT INTO words VALUES ('1'), ('two'), (NULL)")
        .await
        .unwrap();
    assert_eq!(error_code(&client, "SELECT * FROM words WHERE CAST(s AS INT) > 0").await, "22018");
    let plan =
        text_rows(&client, "EXPLAIN FORMATTED SELECT * FROM words WHERE CAST(s AS INT) > 0").await.remove(0).remove(0);
    // Spark adds isnotnull(s) in front of the cast's predicate and keeps the predicate.
    let condition = plan.lines().find(|l| l.starts_with("Condition")).unwrap_or_default();
    assert!(condition.contains(" as int) > 0)"), "the cast's predicate is gone:\n{plan}");
    // A narrowing cast that does not fit fails in `IS NOT NULL` too, which implies isnotnull(k)
    // but does not replace the cast.
    client.batch_execute("CREATE TABLE wide (k BIGINT); INSERT INTO wide VALUES (1), (5670903214)").await.unwrap();
    let err = client.batch_execute("SELECT * FROM wide WHERE CAST(k AS INT) IS NOT NULL").await.unwrap_err();
    assert!(err.as_db_error().is_some(), "{err:?}");
    // A narrowing cast compared with literals stays a cast: 5670903214 does not fit an INT (ANSI
    // fails it rather than read `k = 5`), and the DECIMAL 5.5 is 5 as an INT.
    for query in
        ["SELECT * FROM wide WHERE CAST(k AS INT) = 5", "SELECT * FROM wide WHERE CAST(k AS SMALLINT) IN (5, 6)"]
    {
        assert_eq!(error_code(&client, query).await, "22003", "{query}");
    }
    client
        .batch_execute("CREATE TABLE halves (d DECIMAL(4, 1)); INSERT INTO halves VALUES (5.5), (6.0), (4.9)")
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT d FROM halves WHERE CAST(d AS INT) = 5").await, vec![vec!["5.5"]]);
    assert_eq!(
        text_rows(&client, "SELECT d FROM halves WHERE CAST(d AS INT) IN (4, 7) ORDER BY d").await,
        vec![vec!["4.9"]]
    );
}

/// A scan filters the strings it reads as views by the filter's leading conjuncts that cannot
/// fail, before the filter: a later conjunct that can fail still sees the rows Spark's order
/// gives it, and the rows kept are those the whole condition keeps.
#[tokio::test]
async fn strings_filtered_in_the_scan_leave_a_failing_conjunct_its_rows() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE labels (s STRING, n INT, m INT); \
             INSERT INTO labels VALUES ('1', 1, 0), ('2', 2, 5), ('two', 3, 1), (NULL, 4, 1), ('10', 5, 9)",
        )
        .await
        .unwrap();
    let numbers = |query: &'static str| {
        let client = &client;
        async move { text_rows(client, query).await.into_iter().map(|row| row[0].clone()).collect::<Vec<_>>() }
    };
    // The IN first: 'two' never reaches the cast.
    assert_eq!(
        numbers("SELECT n FROM labels WHERE s IN ('1', '2', '10') AND CAST(s AS INT) > 1 ORDER BY n").await,
        ["2", "5"]
    );
    // The cast first: it reads 'two' and fails, though the IN after it drops that row.
    assert_eq!(
        error_code(&client, "SELECT n FROM labels WHERE CAST(s AS INT) > 1 AND s IN ('1', '2', '10')").await,
        "22018"
    );
    // A comparison of two columns cannot fail either: 'two' (3 < 1 is false) never reaches the
    // cast after it; one after the cast is not applied before it.
    assert_eq!(
        numbers("SELECT n FROM labels WHERE s IN ('1', '2', 'two', '10') AND n < m AND CAST(s AS INT) > 0 ORDER BY n")
            .await,
        ["2", "5"]
    );
    let cast_first = "SELECT n FROM labels WHERE s IN ('1', '2', 'two', '10') AND CAST(s AS INT) > 0 AND n < m";
    assert_eq!(error_code(&client, cast_first).await, "22018");
    // Comparisons, prefixes and null tests over the strings alone.
    assert_eq!(numbers("SELECT n FROM labels WHERE s >= '1' AND s < '2' ORDER BY n").await, ["1", "5"]);
    assert_eq!(numbers("SELECT n FROM labels WHERE s LIKE 't%' AND n > 0").await, ["3"]);
    assert_eq!(numbers("SELECT n FROM labels WHERE s IS NULL").await, ["4"]);
    assert_eq!(numbers("SELECT s FROM labels WHERE s <> '1' AND n < 5 ORDER BY s").await, ["2", "two"]);
}

#[tokio::test]
async fn sizes_saturate_and_unknown_leaves_are_large() {
    let server = TestServer::start();
    let client = server.connect().await;
    // Sixteen ranges: their estimated product overflows 128 bits.
    let from: Vec<String> = (0..16).map(|i| format!("range(100000) t{i}")).collect();
    let plan =
        text_rows(&client, &format!("EXPLAIN SELECT count(*) FROM {}", from.join(", "))).await.remove(0).remove(0);
    assert!(plan.contains("CartesianProduct") || plan.contains("BroadcastNestedLoopJoin"), "{plan}");
    // Two ranges of 100M rows are 800 MB each: no broadcast.
    let plan =
        text_rows(&client, "EXPLAIN SELECT count(*) FROM range(100000000) a JOIN range(100000000) b ON a.id = b.id")
            .await
            .remove(0)
            .remove(0);
    assert!(plan.contains("SortMergeJoin"), "{plan}");
    // A small VALUES list is sized by its rows and is broadcast.
    let plan =
        text_rows(&client, "EXPLAIN SELECT count(*) FROM range(100000000) a JOIN (VALUES (1), (2)) v(x) ON a.id = v.x")
            .await
            .remove(0)
            .remove(0);
    assert!(plan.contains("BroadcastHashJoin"), "{plan}");
}

#[tokio::test]
async fn outer_sort_merge_joins_with_a_condition_null_fill_non_nullable_columns() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    client.batch_execute("SET spark.sql.autoBroadcastJoinThreshold = -1").await.unwrap();
    // `r` is a non-nullable rank; on the outer side of the join it must read as NULL.
    let sql = "SELECT r, count(*) FROM facts a LEFT JOIN \
               (SELECT k, dense_rank() OVER (PARTITION BY k ORDER BY v) AS r FROM facts WHERE v < 30) b \
               ON a.k = b.r AND a.v < b.r GROUP BY r";
    let plan = text_rows(&client, &format!("EXPLAIN {sql}")).await.remove(0).remove(0);
    assert!(plan.contains("SortMergeJoin"), "{plan}");
    // Expected: per k in 0..7 the ranks of rows with v < 30 (NULL keys have their own ranks).
    let mut ranks: Vec<i64> = Vec::new();
    let mut seen: BTreeMap<Option<i64>, i64> = BTreeMap::new();
    for (k, _) in fact_rows().filter(|(_, v)| *v < 30) {
        let rank = seen.entry(k).or_default();
        *rank += 1;
        ranks.push(*rank);
    }
    let mut counts: BTreeMap<Option<i64>, i64> = BTreeMap::new();
    for (k, v) in fact_rows() {
        let matches: Vec<i64> = ranks.iter().copied().filter(|r| k == Some(*r) && v < *r).collect();
        if matches.is_empty() {
            *counts.entry(None).or_default() += 1;
        }
        for r in matches {
            *counts.entry(Some(r)).or_default() += 1;
        }
    }
    let expected: Vec<Vec<String>> = counts.iter().map(|(r, c)| vec![text(*r), c.to_string()]).collect();
    assert_eq!(sorted(text_rows(&client, sql).await), sorted(expected));
}

/// A global ORDER BY range-partitions its rows and reads the sorted ranges in order: the whole
/// result is in Spark's order (NULL smallest: first ascending, last descending), with adaptive
/// execution coalescing the ranges and without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_order_by_returns_every_row_in_spark_order() {
    const N: i64 = 60_000;
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE scattered USING parquet AS \
             SELECT CASE WHEN id % 97 = 0 THEN NULL ELSE (id * 7919) % 10007 END AS x, id AS y FROM range({N})"
        ))
        .await
        .unwrap();
    let x = |id: i64| (id % 97 != 0).then_some((id * 7919) % 10007);
    let mut descending: Vec<(Option<i64>, i64)> = (0..N).map(|id| (x(id), id)).collect();
    // x DESC (NULLs last), then y ASC.
    descending.sort_by(|a, b| match (a.0, b.0) {
        (None, None) => a.1.cmp(&b.1),
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(p), Some(q)) => q.cmp(&p).then(a.1.cmp(&b.1)),
    });
    let expected: Vec<Vec<String>> = descending.iter().map(|(x, y)| vec![text(*x), y.to_string()]).collect();
    let mut ascending = expected.clone();
    ascending.sort_by_key(|row| {
        (row[0] != "NULL", row[0].parse::<i64>().ok(), std::cmp::Reverse(row[1].parse::<i64>().unwrap()))
    });
    for adaptive in ["true", "false"] {
        client.batch_execute(&format!("SET spark.sql.adaptive.enabled = {adaptive}")).await.unwrap();
        let rows = text_rows(&client, "SELECT x, y FROM scattered ORDER BY x DESC, y").await;
        assert!(rows == expected, "ORDER BY x DESC, y with adaptive execution {adaptive}");
        let rows = text_rows(&client, "SELECT x, y FROM scattered ORDER BY x, y DESC").await;
        assert!(rows == ascending, "ORDER BY x, y DESC with adaptive execution {adaptive}");
    }
    let plan = text_rows(&client, "EXPLAIN FORMATTED SELECT x, y FROM scattered ORDER BY x DESC, y").await;
    assert!(plan[0][0].contains("rangepartitioning(x#"), "{}", plan[0][0]);
}

/// `NOT IN` keeps SQL's three-valued answer (no row when the subquery holds a NULL, every row
/// when it is empty, no NULL key otherwise), and EXCEPT and INTERSECT match NULL with NULL, under
/// every setting that moves rows.
#[tokio::test]
async fn not_in_except_and_intersect_treat_null_as_sql_does() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let subquery = |ids: std::ops::Range<i64>| -> BTreeSet<Option<i64>> {
        fact_rows().filter(|(_, v)| ids.contains(v)).map(|(k, _)| k).collect()
    };
    let not_in = |keys: &BTreeSet<Option<i64>>| -> Vec<Vec<String>> {
        fact_rows()
            .filter(|(k, _)| keys.is_empty() || !keys.contains(&None) && k.is_some_and(|k| !keys.contains(&Some(k))))
            .map(|(_, v)| vec![v.to_string()])
            .collect()
    };
    let all_keys: BTreeSet<Option<i64>> = fact_rows().map(|(k, _)| k).collect();
    let (few, with_null) = (subquery(1..4), subquery(0..12));
    assert!(with_null.contains(&None) && !few.contains(&None));
    let keys = |set: BTreeSet<Option<i64>>| -> Vec<Vec<String>> { set.into_iter().map(|k| vec![text(k)]).collect() };
    let cases = [
        ("SELECT v FROM facts WHERE k NOT IN (SELECT k FROM facts WHERE v < 0)", not_in(&BTreeSet::new())),
        ("SELECT v FROM facts WHERE k NOT IN (SELECT k FROM facts WHERE v < 12)", not_in(&with_null)),
        ("SELECT v FROM facts WHERE k NOT IN (SELECT k FROM facts WHERE v BETWEEN 1 AND 3)", not_in(&few)),
        (
            "SELECT k FROM facts EXCEPT SELECT k FROM facts WHERE v BETWEEN 1 AND 3",
            keys(all_keys.difference(&few).copied().collect()),
        ),
        (
            "SELECT k FROM facts INTERSECT SELECT k FROM facts WHERE v < 12",
            keys(all_keys.intersection(&with_null).copied().collect()),
        ),
    ];
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        for (sql, expected) in &cases {
            assert_eq!(sorted(text_rows(&client, sql).await), sorted(expected.clone()), "{setting}: {sql}");
        }
    }
}

/// An aggregate used twice (a CTE in a union, a self-join) runs its exchange once and reads it
/// twice (`ReusedExchange`: in the plan, or as a query stage under adaptive execution), with the
/// rows of running it twice.
#[tokio::test]
async fn a_reused_exchange_returns_the_rows_of_both_uses() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let mut sums: BTreeMap<Option<i64>, i64> = BTreeMap::new();
    for (_, v) in fact_rows() {
        *sums.entry(Some(v % 13)).or_default() += v;
    }
    // Grouped by a key the buckets do not give, so the aggregate shuffles.
    let cte = "WITH c AS (SELECT v % 13 AS k, sum(v) AS s FROM facts GROUP BY v % 13)";
    let union = format!("{cte} SELECT k, s FROM c WHERE s < 153700 UNION ALL SELECT k, s FROM c WHERE s > 153300");
    let row = |(k, s): (&Option<i64>, &i64)| vec![text(*k), s.to_string()];
    let mut expected: Vec<Vec<String>> = sums.iter().filter(|(_, s)| **s < 153_700).map(row).collect();
    expected.extend(sums.iter().filter(|(_, s)| **s > 153_300).map(row));
    assert!(expected.len() > sums.len(), "both branches keep rows, some alike");
    let self_join = format!("{cte} SELECT x.k, x.s, y.s FROM c x JOIN c y ON x.k = y.k");
    let joined: Vec<Vec<String>> =
        sums.iter().filter(|(k, _)| k.is_some()).map(|(k, s)| vec![text(*k), s.to_string(), s.to_string()]).collect();
    for adaptive in [false, true] {
        client.batch_execute(&format!("SET spark.sql.adaptive.enabled = {adaptive}")).await.unwrap();
        // An adaptive plan shows its reuse once it has run.
        let explain = if adaptive { "EXPLAIN ANALYZE" } else { "EXPLAIN" };
        for (sql, expected) in [(&union, &expected), (&self_join, &joined)] {
            let plan = text_rows(&client, &format!("{explain} {sql}")).await.remove(0).remove(0);
            assert!(plan.contains("ReusedExchange"), "adaptive {adaptive}:\n{plan}");
            assert_eq!(sorted(text_rows(&client, sql).await), sorted(expected.clone()), "adaptive {adaptive}: {sql}");
        }
    }
}

/// One small table broadcast to two joins is gathered once (`ReusedExchange` of the
/// `BroadcastExchange`, in the plan or as a second broadcast stage: its scan runs once) and
/// both joins get its rows.
#[tokio::test]
async fn a_broadcast_read_by_two_joins_is_gathered_once() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let sql = "WITH s AS (SELECT k, v FROM facts WHERE v < 20) \
               SELECT 1, count(*), sum(a.v * s.v) FROM facts a JOIN s ON a.k = s.k \
               UNION ALL SELECT 2, count(*), sum(a.v + s.v) FROM facts a JOIN s ON a.k = s.k AND a.v > 100";
    let small: Vec<(i64, i64)> = fact_rows().filter(|(_, v)| *v < 20).filter_map(|(k, v)| Some((k?, v))).collect();
    let pairs: Vec<(i64, i64)> = fact_rows()
        .filter_map(|(k, v)| Some((k?, v)))
        .flat_map(|(k, v)| small.iter().filter(move |(sk, _)| *sk == k).map(move |(_, sv)| (v, *sv)))
        .collect();
    let later: Vec<&(i64, i64)> = pairs.iter().filter(|(v, _)| *v > 100).collect();
    let expected = vec![
        vec!["1".to_string(), pairs.len().to_string(), pairs.iter().map(|(v, sv)| v * sv).sum::<i64>().to_string()],
        vec!["2".to_string(), later.len().to_string(), later.iter().map(|(v, sv)| v + sv).sum::<i64>().to_string()],
    ];
    for adaptive in [false, true] {
        client.batch_execute(&format!("SET spark.sql.adaptive.enabled = {adaptive}")).await.unwrap();
        assert_eq!(sorted(text_rows(&client, sql).await), expected, "adaptive {adaptive}");
        let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {sql}")).await.concat().join("\n");
        assert!(analyzed.contains("ReusedExchange"), "adaptive {adaptive}:\n{analyzed}");
        let scans = analyzed.lines().filter(|l| l.trim_start().starts_with("FileSourceScanExec:")).count();
        assert_eq!(scans, 3, "adaptive {adaptive}: two probe sides and one broadcast side scanned:\n{analyzed}");
    }
}

/// `count(DISTINCT k)` beside `count`, `sum`, `min` and `max` runs in two levels (by `k`, then
/// without it) with the answers of one: counts 0 and the rest NULL over no rows.
#[tokio::test]
async fn a_distinct_count_beside_other_aggregates_answers_as_one_aggregate() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let select = "count(DISTINCT k), count(*), count(k), sum(v), min(v), max(v)";
    let answer = |rows: Vec<(Option<i64>, i64)>| -> Vec<String> {
        let keys: BTreeSet<i64> = rows.iter().filter_map(|(k, _)| *k).collect();
        let values = || rows.iter().map(|(_, v)| *v);
        vec![
            keys.len().to_string(),
            rows.len().to_string(),
            rows.iter().filter(|(k, _)| k.is_some()).count().to_string(),
            text((!rows.is_empty()).then(|| values().sum())),
            text(values().min()),
            text(values().max()),
        ]
    };
    let mut by_group: BTreeMap<i64, Vec<(Option<i64>, i64)>> = BTreeMap::new();
    for row in fact_rows() {
        by_group.entry(row.1 % 5).or_default().push(row);
    }
    let grouped: Vec<Vec<String>> =
        by_group.into_iter().map(|(g, rows)| std::iter::once(g.to_string()).chain(answer(rows)).collect()).collect();
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        let all = text_rows(&client, &format!("SELECT {select} FROM facts")).await;
        assert_eq!(all, vec![answer(fact_rows().collect())], "{setting}");
        let none = text_rows(&client, &format!("SELECT {select} FROM facts WHERE v < 0")).await;
        assert_eq!(none, vec![answer(Vec::new())], "{setting}: no rows");
        let sql = format!("SELECT v % 5, {select} FROM facts GROUP BY v % 5");
        assert_eq!(sorted(text_rows(&client, &sql).await), sorted(grouped.clone()), "{setting}");
    }
}

/// An equi-join beside a NULL-safe join (`IS NOT DISTINCT FROM`) keeps NULL from matching NULL.
#[tokio::test]
async fn a_null_safe_join_leaves_the_equi_join_beside_it_null_rejecting() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    let small: Vec<Option<i64>> = fact_rows().filter(|(_, v)| *v < 30).map(|(k, _)| k).collect();
    let expected: usize =
        fact_rows().filter_map(|(k, _)| k).map(|k| small.iter().filter(|c| **c == Some(k)).count()).sum();
    let sql = "SELECT count(*) FROM facts a JOIN facts b ON a.k = b.k AND a.v = b.v \
               JOIN (SELECT k AS kk FROM facts WHERE v < 30) c ON a.k IS NOT DISTINCT FROM c.kk";
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        assert_eq!(text_rows(&client, sql).await, vec![vec![expected.to_string()]], "{setting}");
    }
}

/// DataFusion names a group key `CAST(q.k AS BIGINT)` after its operand `k`; sorting by a select
/// alias `k` of another column (or by its ordinal, or by that column) once sorted by the cast key.
#[tokio::test]
async fn sorting_by_an_alias_named_like_a_cast_keys_column_sorts_by_the_aliased_column() {
    let server = TestServer::start();
    let client = server.connect().await;
    facts(&client).await;
    // Pairs (v % 5, k), sorted as `ORDER BY k DESC, c0`: the remainder descending, then k
    // ascending with NULL first (Spark's default for ASC).
    let pairs: BTreeSet<(i64, Option<i64>)> = fact_rows().map(|(k, v)| (v % 5, k)).collect();
    let mut expected: Vec<(i64, Option<i64>)> = pairs.into_iter().collect();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let expected: Vec<Vec<String>> =
        expected.iter().take(8).map(|(remainder, k)| vec![text(*k), remainder.to_string()]).collect();
    for setting in SETTINGS {
        client.batch_execute(setting).await.unwrap();
        for key in ["2", "k", "q.v"] {
            let query = format!(
                "SELECT CAST(q.k AS BIGINT) AS c0, q.v AS k FROM (SELECT k, v % 5 AS v FROM facts) q \
                 GROUP BY CAST(q.k AS BIGINT), q.v ORDER BY {key} DESC, c0 LIMIT 8"
            );
            assert_eq!(text_rows(&client, &query).await, expected, "{setting}: {query}");
        }
    }
}

/// A set operation's rows have the type its branches widen to, and a prepared statement
/// declares that type, so that drivers read the rows (Spark 4.3: `SELECT 1 UNION ALL SELECT
/// 2.5` is decimal(11,1) with 1.0 and 2.5; a BIGINT and a DOUBLE are DOUBLEs).
#[tokio::test]
async fn set_operations_declare_the_type_their_branches_widen_to() {
    use rust_decimal::Decimal;
    use tokio_postgres::types::Type;

    let server = TestServer::start();
    let client = server.connect().await;
    let widened = client.prepare("SELECT 1 AS x UNION ALL SELECT 2.5 ORDER BY 1").await.unwrap();
    assert_eq!(widened.columns()[0].type_(), &Type::NUMERIC);
    let rows = client.query(&widened, &[]).await.unwrap();
    let values: Vec<String> = rows.iter().map(|r| r.get::<_, Decimal>(0).to_string()).collect();
    assert_eq!(values, ["1.0", "2.5"]);

    let doubles = client.prepare("SELECT CAST(1 AS BIGINT) AS x UNION SELECT 2.5D ORDER BY 1").await.unwrap();
    assert_eq!(doubles.columns()[0].type_(), &Type::FLOAT8);
    let rows = client.query(&doubles, &[]).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.get::<_, f64>(0)).collect::<Vec<_>>(), [1.0, 2.5]);
}

/// `d + n`, `n + d` and `d - n` with an INT number of days are Spark's `date_add` and
/// `date_sub`, as EXPLAIN shows (Spark 4.3 prints `date_add(d#17, 1)` for `d + 1`); a BIGINT
/// number of days fails as in Spark, with DATATYPE_MISMATCH (42K09).
#[tokio::test]
async fn days_added_to_a_date_are_spark_date_add() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE days USING parquet AS \
             SELECT date_add(DATE '2024-01-01', CAST(id AS INT)) AS d, CAST(id * 40 - 1000 AS INT) AS n, id AS l \
             FROM range(100)",
        )
        .await
        .unwrap();
    let day = |offset: i64| {
        (chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap() + chrono::Duration::days(offset)).to_string()
    };
    let expected: Vec<Vec<String>> = (0..100)
        .map(|id| {
            let n = id * 40 - 1000;
            vec![n.to_string(), day(id + n), day(id + n), day(id - n), day(id + 1)]
        })
        .collect();
    let rows = text_rows(&client, "SELECT n, d + n, n + d, d - n, d + 1 FROM days").await;
    assert_eq!(sorted(rows), sorted(expected));
    let plan = text_rows(&client, "EXPLAIN SELECT d + 1, d - n FROM days").await[0][0].clone();
    assert!(plan.contains("date_add(d#") && plan.contains("date_sub(d#"), "{plan}");
    assert!(!plan.contains("Interval"), "{plan}");
    assert_eq!(error_code(&client, "SELECT d + l FROM days").await, "42K09");
    assert_eq!(error_code(&client, "SELECT d - l FROM days").await, "42K09");
}

/// Casts between DECIMALs and DOUBLEs as Spark 4.3 answered and planned them: a DECIMAL
/// becomes its nearest DOUBLE (5.7171635982607945e-05 and 514574858076820.75, where
/// Arrow's cast gives the next DOUBLE up), and EXPLAIN shows each cast as Spark's Project
/// does, `cast(d#8 as decimal(20,4))`, without the conversions the casts run through.
#[tokio::test]
async fn decimals_and_doubles_cast_as_spark_casts_them() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE casts USING parquet AS SELECT CAST(id AS DOUBLE) / 7 AS d, \
             CAST('0.000057171635982607948077' AS DECIMAL(38,24)) AS w, \
             CAST('514574858076820.78' AS DECIMAL(20,2)) AS m, TIMESTAMP '2024-01-01 00:00:00' AS ts FROM range(3)",
        )
        .await
        .unwrap();
    let rows = text_rows(&client, "SELECT CAST(w AS DOUBLE), CAST(m AS DOUBLE) FROM casts").await;
    let doubles: Vec<(f64, f64)> = rows.iter().map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap())).collect();
    assert_eq!(doubles, [(5.7171635982607945e-05, 514574858076820.75); 3]);
    let plan = text_rows(
        &client,
        "EXPLAIN SELECT CAST(d AS DECIMAL(20,4)), CAST(w AS DOUBLE), CAST(ts AS BIGINT), CAST(d AS STRING) FROM casts",
    )
    .await[0][0]
        .clone();
    let project = plan.lines().find(|line| line.contains("Project [")).unwrap_or_default();
    for cast in ["cast(d#", " as decimal(20,4))", "cast(w#", " as double)", "cast(ts#", " as bigint)", " as string)"] {
        assert!(project.contains(cast), "{cast} in {plan}");
    }
    for conversion in ["float_decimal_text", "decimal_double", "timestamp_seconds", "float_text"] {
        assert!(!plan.contains(conversion), "{conversion} in {plan}");
    }
}

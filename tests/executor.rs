//! Plans run for real: shuffles line up with buckets, EXPLAIN ANALYZE reports what moved,
//! sorted buckets skip the sort, and memory limits hold without taking the server down.

use crate::common::{TestServer, sqlstate, text_rows};

const TABLES: &str = "
SET spark.sql.autoBroadcastJoinThreshold = -1;
CREATE TABLE tx USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO 8 BUCKETS
  AS SELECT id % 5000 AS account_id, CAST(id AS DOUBLE) AS amount FROM range(50000);
CREATE TABLE acc USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO 8 BUCKETS
  AS SELECT id AS account_id, concat('n', CAST(id AS STRING)) AS name FROM range(5000);
CREATE TABLE tx_plain USING parquet AS SELECT * FROM tx;
CREATE TABLE acc_plain USING parquet AS SELECT * FROM acc;
";

/// The `bytes shuffled by exchanges` figure of an EXPLAIN ANALYZE.
fn shuffled(plan: &str) -> u64 {
    let line = plan
        .lines()
        .find(|l| l.starts_with("bytes shuffled by exchanges:"))
        .unwrap_or_else(|| panic!("no shuffle figure in {plan}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucketed_side_joins_a_shuffled_side_row_for_row() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();
    let expected = text_rows(&client, "SELECT count(*), sum(t.amount), min(a.name), max(a.name) FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id").await;
    assert_eq!(expected[0][0], "50000");
    for (left, right) in [("tx", "acc_plain"), ("tx_plain", "acc"), ("tx", "acc")] {
        let sql = format!(
            "SELECT count(*), sum(t.amount), min(a.name), max(a.name) FROM {left} t JOIN {right} a ON t.account_id = a.account_id"
        );
        assert_eq!(text_rows(&client, &sql).await, expected, "{left} joined with {right}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_shows_what_the_bucketed_join_did_not_shuffle() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();
    let bucketed = text_rows(
        &client,
        "EXPLAIN ANALYZE SELECT t.account_id, a.name FROM tx t JOIN acc a ON t.account_id = a.account_id",
    )
    .await[0][0]
        .clone();
    let plain = text_rows(
        &client,
        "EXPLAIN ANALYZE SELECT t.account_id, a.name FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id",
    )
    .await[0][0]
        .clone();
    assert!(bucketed.contains("rows returned: 50000"), "{bucketed}");
    assert!(plain.contains("rows returned: 50000"), "{plain}");
    assert_eq!(shuffled(&bucketed), 0, "{bucketed}");
    assert!(shuffled(&plain) > 0, "{plain}");
    assert!(bucketed.contains("buckets read 8"), "{bucketed}");
    assert!(plain.contains("Exchange"), "{plain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorted_buckets_drop_the_sort_under_the_join() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();
    // A second write leaves two sorted files in some buckets of tx.
    client.batch_execute("INSERT INTO tx SELECT account_id, amount FROM tx_plain WHERE amount < 3000").await.unwrap();
    let query = "SELECT t.account_id, t.amount, a.name FROM tx t JOIN acc a ON t.account_id = a.account_id";
    let expected =
        text_rows(&client, &format!("SELECT count(*), sum(amount), min(name), max(name) FROM ({query}) j")).await;
    assert_eq!(expected[0][0], "53000");
    client
        .batch_execute(
            "SET spark.sql.adaptive.enabled = false; SET spark.sql.legacy.bucketedTableScan.outputOrdering = true",
        )
        .await
        .unwrap();
    let plan = text_rows(&client, &format!("EXPLAIN {query}")).await[0][0].clone();
    assert_eq!(
        plan.matches("Sort [").count(),
        1,
        "buckets of two files are not in order, as Spark takes them:\n{plan}"
    );
    let sorted =
        text_rows(&client, &format!("SELECT count(*), sum(amount), min(name), max(name) FROM ({query}) j")).await;
    assert_eq!(sorted, expected);
    client.batch_execute("OPTIMIZE tx").await.unwrap();
    assert_eq!(
        crate::common::parquet_files(&server.data_dir().join("warehouse/default/tx")).len(),
        8,
        "one file per bucket"
    );
    let plan = text_rows(&client, &format!("EXPLAIN {query}")).await[0][0].clone();
    assert!(!plan.contains("Sort ["), "{plan}");
    let optimized =
        text_rows(&client, &format!("SELECT count(*), sum(amount), min(name), max(name) FROM ({query}) j")).await;
    assert_eq!(optimized, expected);
    client.batch_execute("RESET spark.sql.legacy.bucketedTableScan.outputOrdering").await.unwrap();
    let plan = text_rows(&client, &format!("EXPLAIN {query}")).await[0][0].clone();
    assert_eq!(plan.matches("Sort [").count(), 2, "Spark's default keeps the sorts:\n{plan}");
}

/// The figures EXPLAIN ANALYZE gives each sort: `partitions <way> N`, summed over the sorts.
fn sort_ways(plan: &str, way: &str) -> usize {
    let figure = format!("partitions {way} ");
    plan.lines()
        .filter(|l| l.trim_start().starts_with("SortExec:"))
        .flat_map(|l| l.split(", "))
        .filter_map(|f| f.trim_start().split_once(':').map_or(f, |(_, f)| f).trim().strip_prefix(&figure))
        .map(|n| n.parse::<usize>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorts_over_sorted_buckets_pass_rows_through_and_explain_analyze_says_so() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();
    let query = "SELECT count(*), sum(t.amount), min(a.name), max(a.name) FROM {tx} t JOIN {acc} a ON t.account_id = a.account_id";
    let run = |tx: &str, acc: &str| query.replace("{tx}", tx).replace("{acc}", acc);
    let expected = text_rows(&client, &run("tx_plain", "acc_plain")).await;

    let bucketed = text_rows(&client, &format!("EXPLAIN ANALYZE {}", run("tx", "acc"))).await[0][0].clone();
    assert!(bucketed.contains("Sort ["), "Spark's plan keeps the sorts:\n{bucketed}");
    assert_eq!(sort_ways(&bucketed, "already in order"), 16, "every bucket of both sides:\n{bucketed}");
    assert_eq!(sort_ways(&bucketed, "radix-sorted") + sort_ways(&bucketed, "sorted by comparison"), 0, "{bucketed}");
    assert_eq!(text_rows(&client, &run("tx", "acc")).await, expected);

    // A few static partitions, each holding many shuffle partitions' keys: rows out of order.
    client.batch_execute("SET spark.sql.adaptive.enabled = false; SET spark.sql.shuffle.partitions = 4").await.unwrap();
    let plain = text_rows(&client, &format!("EXPLAIN ANALYZE {}", run("tx_plain", "acc_plain"))).await[0][0].clone();
    assert!(sort_ways(&plain, "radix-sorted") > 0, "shuffled rows arrive out of order:\n{plain}");
    let join = plain.lines().find(|l| l.trim_start().starts_with("SortMergeJoin:")).expect("the join's figures");
    let join_time: f64 = join.split("join time ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
    assert!(join_time > 0.0, "the sort-merge join records its time: {join}");
    client.batch_execute("SET spark.sql.sort.enableRadixSort = false").await.unwrap();
    let compared = text_rows(&client, &format!("EXPLAIN ANALYZE {}", run("tx_plain", "acc_plain"))).await[0][0].clone();
    assert_eq!(sort_ways(&compared, "radix-sorted"), 0, "{compared}");
    assert!(sort_ways(&compared, "sorted by comparison") > 0, "{compared}");
    assert_eq!(text_rows(&client, &run("tx_plain", "acc_plain")).await, expected);
    client
        .batch_execute(
            "RESET spark.sql.sort.enableRadixSort; RESET spark.sql.adaptive.enabled; RESET spark.sql.shuffle.partitions",
        )
        .await
        .unwrap();

    // A second write leaves two sorted files in some buckets, read one after the other.
    client.batch_execute("INSERT INTO tx SELECT account_id, amount FROM tx_plain WHERE amount < 3000").await.unwrap();
    let expected = text_rows(&client, &run("tx", "acc_plain")).await;
    let appended = text_rows(&client, &format!("EXPLAIN ANALYZE {}", run("tx", "acc"))).await[0][0].clone();
    assert!(sort_ways(&appended, "radix-sorted") > 0, "{appended}");
    assert_eq!(text_rows(&client, &run("tx", "acc")).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_the_memory_limit_spills_or_fails_and_the_server_goes_on() {
    let temp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--memory-limit", "24MiB"]);
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE big USING parquet AS SELECT id, concat('padding-padding-padding-', CAST(id AS STRING)) AS s FROM range(2000000)")
        .await
        .unwrap();
    client
        .batch_execute("SET spark.sql.autoBroadcastJoinThreshold = -1; SET spark.sql.shuffle.partitions = 4")
        .await
        .unwrap();
    let result = client.simple_query("SELECT count(*), max(a.s) FROM big a JOIN big b ON a.id = b.id").await;
    match result {
        Ok(_) => {
            let rows = text_rows(&client, "SELECT count(*) FROM big a JOIN big b ON a.id = b.id").await;
            assert_eq!(rows, vec![vec!["2000000"]], "a join that spills still returns every row");
        }
        Err(e) => assert_eq!(sqlstate(&e), "53200", "{e:?}"),
    }
    assert_eq!(text_rows(&client, "SELECT 1").await, vec![vec!["1"]]);
    let other = server.connect().await;
    assert_eq!(text_rows(&other, "SELECT count(*) FROM big").await, vec![vec!["2000000"]]);
}

/// EXPLAIN ANALYZE counts the rows of a result as they stream past: a result several times
/// the server's memory leaves its peak resident memory far below the result's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_counts_a_large_result_without_holding_it() {
    const ROWS: u64 = 4_000_000;
    const ROW_BYTES: u64 = 200;
    let server = TestServer::start_fresh(&["--memory-limit", "64MiB"]);
    let client = server.connect().await;
    let before = server.peak_memory();
    let analyzed = text_rows(
        &client,
        &format!("EXPLAIN ANALYZE SELECT id, repeat('x', {ROW_BYTES}) AS padding FROM range({ROWS})"),
    )
    .await
    .concat()
    .join("\n");
    assert!(analyzed.contains(&format!("rows returned: {ROWS}")), "{analyzed}");
    let grown = server.peak_memory().saturating_sub(before);
    assert!(
        grown < ROWS * ROW_BYTES / 4,
        "peak resident memory grew by {} MiB for a result of {} MiB",
        grown >> 20,
        (ROWS * ROW_BYTES) >> 20
    );
}

/// Keys of the spill test's `big`: each of them holds two rows.
const SPILL_KEYS: i64 = 300_000;

/// The figures `{name} N` of each operator called `operator` in EXPLAIN ANALYZE's metrics.
fn figures_of(analyzed: &str, operator: &str, name: &str) -> Vec<u64> {
    analyzed
        .lines()
        .filter(|line| line.trim_start().starts_with(&format!("{operator}:")))
        .filter_map(|line| line.split(&format!(" {name} ")).nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

/// With every setting at Spark's default (200 shuffle partitions, adaptive execution on) and
/// broadcasts off, a sort-merge join and a grouping whose state is several times
/// `--memory-limit` finish within memory, each taking the shuffle partitions of its coalesced
/// partitions one by one; read in two static partitions instead, the grouping spills. Their
/// rows are those the generating formulas give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_and_an_aggregation_larger_than_memory_finish_at_the_defaults() {
    let server = TestServer::start_fresh(&["--memory-limit", "32MiB"]);
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE big USING parquet AS SELECT id % {SPILL_KEYS} AS k, CAST(id AS DOUBLE) AS v, \
               concat('s', CAST(id AS STRING)) AS s FROM range({rows});
             CREATE TABLE other USING parquet AS SELECT id AS k, CAST(id AS DOUBLE) AS w FROM range({rows});
             SET spark.sql.autoBroadcastJoinThreshold = -1",
            rows = 2 * SPILL_KEYS
        ))
        .await
        .unwrap();

    let join = "SELECT count(*), sum(b.v), sum(o.w), max(b.s) FROM big b JOIN other o ON b.k = o.k";
    let ids = 0..2 * SPILL_KEYS;
    let max_s = ids.clone().map(|id| format!("s{id}")).max().unwrap();
    let matched_w: i64 = (0..SPILL_KEYS).map(|k| 2 * k).sum();
    let joined =
        vec![vec![(2 * SPILL_KEYS).to_string(), ids.clone().sum::<i64>().to_string(), matched_w.to_string(), max_s]];
    // At the defaults adaptive execution coalesces the 200 shuffle partitions into a few, and
    // the join sorts and joins them one by one, each within memory.
    let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {join}")).await.concat().join("\n");
    assert!(analyzed.contains("shuffle partitions joined one by one "), "{analyzed}");
    assert_eq!(text_rows(&client, join).await, joined);

    let grouping = "SELECT k, count(*), max(s) FROM big GROUP BY k";
    let expected: Vec<Vec<String>> = (0..SPILL_KEYS)
        .map(|k| {
            let max_s = format!("s{k}").max(format!("s{}", k + SPILL_KEYS));
            vec![k.to_string(), "2".to_string(), max_s]
        })
        .collect();
    let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {grouping}")).await.concat().join("\n");
    assert!(analyzed.contains("shuffle partitions aggregated one by one "), "{analyzed}");
    let mut rows = text_rows(&client, grouping).await;
    rows.sort_by_key(|row| row[0].parse::<i64>().unwrap());
    assert!(rows == expected, "{} groups, first {:?}", rows.len(), rows.first());
    // Two static partitions hold each half of the groups at once: past the limit, handed to
    // the hash aggregate, which spills.
    client.batch_execute("SET spark.sql.adaptive.enabled = false; SET spark.sql.shuffle.partitions = 2").await.unwrap();
    let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {grouping}")).await.concat().join("\n");
    assert!(
        figures_of(&analyzed, "HashAggregateExec", "spills").iter().any(|&n| n > 0),
        "the grouping spills:\n{analyzed}"
    );
    assert!(analyzed.contains("partitions hash-aggregated "), "{analyzed}");
    let mut rows = text_rows(&client, grouping).await;
    rows.sort_by_key(|row| row[0].parse::<i64>().unwrap());
    assert!(rows == expected, "{} groups, first {:?}", rows.len(), rows.first());
}

/// A GROUP BY on a bucketed table's sort column finds each bucket's groups by comparing
/// neighbouring rows (its files are sorted); without SORTED BY the rows of a bucket are out of
/// order and go to the hash aggregate. Both give the rows the generating formula gives, and
/// EXPLAIN shows Spark's `HashAggregate` either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouping_a_sorted_bucketed_table_finds_its_groups_in_order() {
    const KEYS: i64 = 1000;
    const ROWS: i64 = 20 * KEYS;
    let server = TestServer::start_fresh(&[]);
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE sorted_b USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS
               AS SELECT id % {KEYS} AS k, id AS v FROM range({ROWS});
             CREATE TABLE unsorted_b USING parquet CLUSTERED BY (k) INTO 4 BUCKETS
               AS SELECT id % {KEYS} AS k, id AS v FROM range({ROWS})"
        ))
        .await
        .unwrap();
    // Key k is in rows k, k + KEYS, ..., k + 19 KEYS.
    let expected: Vec<Vec<String>> = (0..KEYS)
        .map(|k| {
            let sum: i64 = (0..ROWS / KEYS).map(|j| k + j * KEYS).sum();
            vec![k.to_string(), (ROWS / KEYS).to_string(), sum.to_string(), k.to_string()]
        })
        .collect();
    for (table, way) in
        [("sorted_b", "partitions aggregated in order 4"), ("unsorted_b", "partitions hash-aggregated 4")]
    {
        let query = format!("SELECT k, count(*), sum(v), min(v) FROM {table} GROUP BY k");
        let explained = text_rows(&client, &format!("EXPLAIN {query}")).await.concat().join("\n");
        assert!(explained.contains("HashAggregate(keys=[k#"), "{explained}");
        let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {query}")).await.concat().join("\n");
        assert!(analyzed.contains(way), "{table}: {analyzed}");
        let mut rows = text_rows(&client, &query).await;
        rows.sort_by_key(|row| row[0].parse::<i64>().unwrap());
        assert!(rows == expected, "{table}: {} groups, first {:?}", rows.len(), rows.first());
    }
}

/// A non-bucketed table is read in Spark's splits: its files cut at
/// `spark.sql.files.maxPartitionBytes` (each split reading the row groups whose midpoint lies in it),
/// and every row read once whatever the split size. An aggregate over it is planned with an
/// exchange even when one split holds everything, as Spark plans it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_table_is_read_in_splits_each_row_once() {
    // Row groups close at 1 MB under this limit, so the files have several.
    let server = TestServer::start_fresh(&["--memory-limit", "16MiB"]);
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE one USING parquet AS SELECT id, id * 3 AS v, id % 7 AS g FROM range(3000000)")
        .await
        .unwrap();
    let n: i128 = 3_000_000;
    let sum = n * (n - 1) / 2;
    let expected = vec![vec![n.to_string(), sum.to_string(), (3 * sum).to_string()]];
    let query = "SELECT count(*), sum(id), sum(v) FROM one";
    for split in ["128MB", "1MB", "300KB"] {
        client.batch_execute(&format!("SET spark.sql.files.maxPartitionBytes = {split}")).await.unwrap();
        assert_eq!(text_rows(&client, query).await, expected, "splits of {split}");
        let grouped = text_rows(&client, "SELECT g, count(*) FROM one GROUP BY g ORDER BY g").await;
        let counts: Vec<i128> = grouped.iter().map(|row| row[1].parse().unwrap()).collect();
        assert_eq!(counts, (0..7).map(|g| (n - g + 6) / 7).collect::<Vec<_>>(), "splits of {split}");
    }
    client.batch_execute("CREATE TABLE tiny (k BIGINT) USING parquet; INSERT INTO tiny VALUES (1)").await.unwrap();
    let plan = text_rows(&client, "EXPLAIN SELECT k, count(*) FROM tiny GROUP BY k").await[0][0].clone();
    assert!(plan.contains("Exchange hashpartitioning(k#"), "{plan}");
    let plan = text_rows(&client, "EXPLAIN SELECT count(*) FROM tiny").await[0][0].clone();
    assert!(plan.contains("Exchange SinglePartition"), "{plan}");
}

#[tokio::test]
async fn pushed_filters_skip_pages_and_filter_rows_while_decoding_when_asked() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE sorted USING parquet AS SELECT id, id % 97 AS v FROM range(2000000)")
        .await
        .unwrap();
    let query = "SELECT count(*), sum(v) FROM sorted WHERE id < 1000";
    let expected = vec![vec!["1000".to_string(), (0..1000u64).map(|id| id % 97).sum::<u64>().to_string()]];
    let scan = |plan: &str, name: &str| figures_of(plan, "FileSourceScanExec", name).first().copied();
    // Spark's default: the page index rules out pages, and the Filter drops the rest.
    assert_eq!(text_rows(&client, query).await, expected);
    let plan = text_rows(&client, &format!("EXPLAIN ANALYZE {query}")).await[0][0].clone();
    assert!(scan(&plan, "pages skipped").is_some_and(|pages| pages > 0), "{plan}");
    assert_eq!(scan(&plan, "rows filtered while decoding"), None, "{plan}");
    let read = scan(&plan, "output rows").unwrap();
    assert!((1000..2_000_000).contains(&read), "{plan}");
    // Record-level filtering: only the rows that pass leave the scan.
    client.batch_execute("SET spark.sql.parquet.recordLevelFilter.enabled = true").await.unwrap();
    assert_eq!(text_rows(&client, query).await, expected);
    let plan = text_rows(&client, &format!("EXPLAIN ANALYZE {query}")).await[0][0].clone();
    assert!(scan(&plan, "rows filtered while decoding").is_some_and(|rows| rows > 0), "{plan}");
    assert_eq!(scan(&plan, "output rows"), Some(1000), "{plan}");
}

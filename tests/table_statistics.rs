//! What bucketsql says about a table's buckets and statistics, over the wire: `SHOW BUCKETS`
//! against the files on disk, `ANALYZE TABLE .. FOR COLUMNS` against values computed here from
//! the files' rows, declared sizes in planning, and EXPLAIN FORMATTED's advice.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use bucketsql::storage::file_naming::bucket_id_of;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::basic::Encoding;
use tokio_postgres::Client;

use crate::common::{TestServer, parquet_files, sqlstate, text_rows};

fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap().map(|b| b.unwrap()).collect()
}

/// A whole-number column of a file, nulls dropped.
fn longs(batches: &[RecordBatch], column: &str) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let values = cast(b.column_by_name(column).unwrap(), &DataType::Int64).unwrap();
            values.as_primitive::<Int64Type>().iter().flatten().collect::<Vec<_>>()
        })
        .collect()
}

async fn plan(client: &Client, sql: &str) -> String {
    text_rows(client, &format!("EXPLAIN FORMATTED {sql}")).await.concat().concat()
}

/// The advice section's lines.
async fn advice(client: &Client, sql: &str) -> Vec<String> {
    let plan = plan(client, sql).await;
    match plan.split_once("== Advice (Bucketing) ==") {
        Some((_, advice)) => advice.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect(),
        None => Vec::new(),
    }
}

fn has(lines: &[String], fragment: &str) -> bool {
    lines.iter().any(|l| l.contains(fragment))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_buckets_matches_the_files_on_disk() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE sb (k bigint, v bigint, d string) USING parquet PARTITIONED BY (d) \
                 CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
             INSERT INTO sb SELECT CASE WHEN id % 3 = 0 THEN 7 ELSE id % 500 END, id, \
                 CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END FROM range(20000);
             INSERT INTO sb SELECT id * 13, id, 'a' FROM range(300);
             CREATE TABLE unsorted (k bigint) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO unsorted SELECT id FROM range(100);
             CREATE TABLE plain (k bigint) USING parquet;",
        )
        .await
        .unwrap();

    // Per bucket, from the files themselves: files, rows, bytes, min and max of k, order.
    let dir = server.data_dir().join("warehouse/default/sb");
    let expected = |partition: Option<&str>| {
        let mut buckets: BTreeMap<u32, (u64, u64, u64, i64, i64)> =
            (0..8).map(|b| (b, (0, 0, 0, i64::MAX, i64::MIN))).collect();
        for file in parquet_files(&dir) {
            if partition.is_some_and(|p| !file.to_string_lossy().contains(&format!("/{p}/"))) {
                continue;
            }
            let bucket = bucket_id_of(&file.file_name().unwrap().to_string_lossy()).unwrap();
            let keys = longs(&read_batches(&file), "k");
            assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{file:?} is sorted");
            // The leading sort column of whole numbers is delta-encoded, with no dictionary.
            let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap()).unwrap();
            for group in reader.metadata().row_groups() {
                let k = group.columns().iter().find(|c| c.column_path().string() == "k").unwrap();
                let encodings: Vec<Encoding> = k.encodings().collect();
                assert!(encodings.contains(&Encoding::DELTA_BINARY_PACKED), "{file:?}: {encodings:?}");
                assert!(k.dictionary_page_offset().is_none(), "{file:?} has a dictionary for k");
            }
            let entry = buckets.get_mut(&bucket).unwrap();
            entry.0 += 1;
            entry.1 += keys.len() as u64;
            entry.2 += std::fs::metadata(&file).unwrap().len();
            entry.3 = entry.3.min(*keys.iter().min().unwrap());
            entry.4 = entry.4.max(*keys.iter().max().unwrap());
        }
        buckets
            .into_iter()
            .map(|(b, (files, rows, bytes, min, max))| {
                let bound = |v: i64, empty: bool| if empty { "NULL".to_string() } else { v.to_string() };
                vec![
                    b.to_string(),
                    files.to_string(),
                    rows.to_string(),
                    bytes.to_string(),
                    bound(min, rows == 0),
                    bound(max, rows == 0),
                    "t".to_string(),
                ]
            })
            .collect::<Vec<_>>()
    };
    let all = expected(None);
    // Two partitions, and the append adds a second file to partition a of some buckets.
    assert!(all.iter().any(|row| row[1] == "3"), "more than one file per bucket and partition: {all:?}");
    assert_eq!(text_rows(&client, "SHOW BUCKETS sb").await, all);
    assert_eq!(text_rows(&client, "SHOW BUCKETS sb PARTITION (d = 'b')").await, expected(Some("d=b")));

    // DESCRIBE EXTENDED sums it up: the largest bucket over the mean.
    let rows: Vec<u64> = all.iter().map(|row| row[2].parse().unwrap()).collect();
    let skew = *rows.iter().max().unwrap() as f64 * 8.0 / rows.iter().sum::<u64>() as f64;
    let described = text_rows(&client, "DESCRIBE EXTENDED sb").await;
    let line = described.iter().find(|row| row[0] == "Bucket Skew").expect("a Bucket Skew line");
    assert!(line[1].starts_with(&format!("{skew:.2} ")), "{line:?} against {skew}");
    let detail = |name: &str| described.iter().find(|row| row[0] == name).map(|row| row[1].clone());
    let empty = all.iter().filter(|row| row[2] == "0").count();
    assert_eq!(detail("Empty Buckets"), Some(empty.to_string()));
    let (files, bytes) = all
        .iter()
        .fold((0u64, 0u64), |(f, b), row| (f + row[1].parse::<u64>().unwrap(), b + row[3].parse::<u64>().unwrap()));
    assert_eq!(detail("Mean Bucket File Size"), Some(format!("{} bytes", bytes / files)));

    // Without SORTED BY, no file declares an order.
    let sorted: Vec<String> =
        text_rows(&client, "SHOW BUCKETS unsorted").await.into_iter().map(|r| r[6].clone()).collect();
    assert_eq!(sorted, vec!["f"; 4]);
    let error = client.simple_query("SHOW BUCKETS plain").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42809");
    let error = client.simple_query("SHOW BUCKETS sb PARTITION (k = 1)").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42000");
    let error = client.simple_query("SHOW BUCKETS sb PARTITION (d = 'a', d = 'b')").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42701");
    assert_eq!(text_rows(&client, "SELECT 1").await, vec![vec!["1".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyze_stores_column_statistics_computed_over_the_rows() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE st (i int, s string, d date) USING parquet;
             INSERT INTO st SELECT CAST(id % 337 AS INT), \
                 CASE WHEN id % 9 = 0 THEN NULL ELSE repeat('ab', CAST(id % 5 AS INT)) || CAST(id % 11 AS STRING) END, \
                 CASE WHEN id % 13 = 0 THEN NULL ELSE DATE '2024-01-01' + CAST(id % 40 AS INT) END \
                 FROM range(5000);",
        )
        .await
        .unwrap();
    // The expected figures, from the file's rows.
    let batches: Vec<RecordBatch> =
        parquet_files(&server.data_dir().join("warehouse/default/st")).iter().flat_map(|f| read_batches(f)).collect();
    let ints = longs(&batches, "i");
    let strings: Vec<Option<String>> = batches
        .iter()
        .flat_map(|b| {
            b.column_by_name("s").unwrap().as_string::<i32>().iter().map(|s| s.map(String::from)).collect::<Vec<_>>()
        })
        .collect();
    let days = longs(&batches, "d");
    let rows = strings.len();
    let present: Vec<&String> = strings.iter().flatten().collect();
    let lengths: Vec<usize> = present.iter().map(|s| s.chars().count()).collect();
    let date =
        |day: i64| (chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + chrono::Days::new(day as u64)).to_string();

    client.batch_execute("ANALYZE TABLE st COMPUTE STATISTICS FOR COLUMNS i, s").await.unwrap();
    let described = |column: &'static str| {
        let client = &client;
        async move {
            text_rows(client, &format!("DESCRIBE EXTENDED st {column}"))
                .await
                .into_iter()
                .map(|row| (row[0].clone(), row[1].clone()))
                .collect::<BTreeMap<String, String>>()
        }
    };
    let i = described("i").await;
    assert_eq!(i["distinct_count"], ints.iter().collect::<HashSet<_>>().len().to_string());
    assert_eq!(i["num_nulls"], (rows - ints.len()).to_string());
    assert_eq!(i["min"], ints.iter().min().unwrap().to_string());
    assert_eq!(i["max"], ints.iter().max().unwrap().to_string());
    assert_eq!((i["avg_col_len"].as_str(), i["max_col_len"].as_str()), ("4", "4"));
    let s = described("s").await;
    assert_eq!(s["distinct_count"], present.iter().collect::<HashSet<_>>().len().to_string());
    assert_eq!(s["num_nulls"], (rows - present.len()).to_string());
    assert_eq!((s["min"].as_str(), s["max"].as_str()), ("NULL", "NULL"));
    let average = lengths.iter().sum::<usize>().div_ceil(lengths.len());
    assert_eq!(s["avg_col_len"], average.to_string());
    assert_eq!(s["max_col_len"], lengths.iter().max().unwrap().to_string());
    // Not analyzed yet.
    assert_eq!(described("d").await["distinct_count"], "NULL");

    client.batch_execute("ANALYZE TABLE st COMPUTE STATISTICS FOR ALL COLUMNS").await.unwrap();
    let d = described("d").await;
    assert_eq!(d["distinct_count"], days.iter().collect::<HashSet<_>>().len().to_string());
    assert_eq!(d["num_nulls"], (rows - days.len()).to_string());
    assert_eq!(d["min"], date(*days.iter().min().unwrap()));
    assert_eq!(d["max"], date(*days.iter().max().unwrap()));
    let table = text_rows(&client, "DESCRIBE EXTENDED st").await;
    let statistics = table.iter().find(|row| row[0] == "Statistics").expect("a Statistics line");
    assert!(statistics[1].ends_with(&format!(", {rows} rows")), "{statistics:?}");

    // A write makes them stale, and they go.
    client.batch_execute("INSERT INTO st VALUES (1000, 'x', NULL)").await.unwrap();
    assert_eq!(described("i").await["max"], "NULL");
    assert!(!text_rows(&client, "DESCRIBE EXTENDED st").await.iter().any(|row| row[0] == "Statistics"));

    let error = client.simple_query("ANALYZE TABLE st COMPUTE STATISTICS FOR COLUMNS nope").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42703");
    let error = client.simple_query("DESCRIBE EXTENDED st nope").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42703");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_terabyte_turns_a_broadcast_into_a_sort_merge_join() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE e1 (k int, v int) USING parquet; CREATE TABLE e2 (k int, v int) USING parquet;")
        .await
        .unwrap();
    let join = "SELECT * FROM e1 JOIN e2 ON e1.k = e2.k";
    let empty = plan(&client, join).await;
    assert!(empty.contains("BroadcastHashJoin") && !empty.contains("SortMergeJoin"), "{empty}");
    assert!(!empty.contains("planned with its table's statistics"), "{empty}");

    client
        .batch_execute(
            "ALTER TABLE e1 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1099511627776', \
                 'spark.sql.statistics.numRows' = '10000000000');
             ALTER TABLE e2 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1099511627776')",
        )
        .await
        .unwrap();
    let declared = plan(&client, join).await;
    assert!(declared.contains("SortMergeJoin") && !declared.contains("BroadcastHashJoin"), "{declared}");
    assert!(
        declared.contains(
            "Scan parquet spark_catalog.default.e1 (1) was planned with its table's statistics, \
             spark.sql.statistics.totalSize = 1099511627776 (1024.0 GiB)"
        ),
        "{declared}"
    );
    let described = text_rows(&client, "DESCRIBE EXTENDED e1").await;
    assert!(described.iter().any(|r| r[0] == "Statistics" && r[1] == "1099511627776 bytes, 10000000000 rows"));

    let error =
        client.simple_query("ALTER TABLE e2 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1TB')").await;
    assert_eq!(sqlstate(&error.unwrap_err()), "22023");
    let error =
        client.simple_query("CREATE TABLE e3 (k int) TBLPROPERTIES ('spark.sql.statistics.numRows' = 'many')").await;
    assert_eq!(sqlstate(&error.unwrap_err()), "22023");
    let error = client.simple_query("ALTER TABLE e2 UNSET TBLPROPERTIES ('no.such.key')").await;
    assert_eq!(sqlstate(&error.unwrap_err()), "42704");
    client
        .batch_execute("ALTER TABLE e2 UNSET TBLPROPERTIES IF EXISTS ('no.such.key', 'spark.sql.statistics.totalSize')")
        .await
        .unwrap();
    let unset = plan(&client, join).await;
    assert!(unset.contains("BroadcastHashJoin"), "{unset}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advice_names_the_rule_each_plan_breaks_and_only_then() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE a8 (k int, v int) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS;
             CREATE TABLE b8 (k int, v int) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS;
             CREATE TABLE a6 (k int, v int) USING parquet CLUSTERED BY (k) INTO 6 BUCKETS;
             CREATE TABLE a4 (k int, v int) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
             CREATE TABLE ak (k int, j int) USING parquet CLUSTERED BY (k, j) INTO 8 BUCKETS;
             CREATE TABLE one (k int, v int) USING parquet CLUSTERED BY (k) INTO 1 BUCKETS;
             CREATE TABLE hot (k int, v int) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS;
             CREATE TABLE p1 (k int, v int) USING parquet;
             CREATE TABLE p2 (k int, v int) USING parquet;
             INSERT INTO a8 SELECT CAST(id AS INT), 1 FROM range(4000);
             INSERT INTO b8 SELECT CAST(id AS INT), 1 FROM range(4000);
             INSERT INTO a6 SELECT CAST(id AS INT), 1 FROM range(3000);
             INSERT INTO a4 SELECT CAST(id AS INT), 1 FROM range(2000);
             INSERT INTO ak SELECT CAST(id AS INT), 1 FROM range(2000);
             INSERT INTO one SELECT CAST(id AS INT), 1 FROM range(2000);
             INSERT INTO hot SELECT CASE WHEN id % 2 = 0 THEN 42 ELSE CAST(id AS INT) END, 1 FROM range(8000);
             INSERT INTO p1 SELECT CAST(id AS INT), 1 FROM range(1000);
             INSERT INTO p2 SELECT CAST(id AS INT), 1 FROM range(1000);
             SET spark.sql.autoBroadcastJoinThreshold = -1;",
        )
        .await
        .unwrap();
    let rebucket = "EnsureRequirements: `a6` and `a8` are bucketed into 6 and 8 buckets";
    let coalesce = "CoalesceBucketsInJoin: `a4` and `a8` are bucketed into 4 and 8 buckets";

    let mismatched = advice(&client, "SELECT * FROM a8 JOIN a6 ON a8.k = a6.k").await;
    assert!(has(&mismatched, rebucket) && has(&mismatched, "Bucket `a6` INTO 8 BUCKETS"), "{mismatched:?}");
    assert!(!has(&mismatched, "CoalesceBucketsInJoin"), "{mismatched:?}");

    let divisible = advice(&client, "SELECT * FROM a8 JOIN a4 ON a8.k = a4.k").await;
    assert!(has(&divisible, coalesce), "{divisible:?}");
    assert!(!has(&divisible, "EnsureRequirements: `a4`"), "{divisible:?}");
    client.batch_execute("SET spark.sql.bucketing.coalesceBucketsInJoin.enabled = true").await.unwrap();
    let coalesced = advice(&client, "SELECT * FROM a8 JOIN a4 ON a8.k = a4.k").await;
    assert!(!has(&coalesced, "CoalesceBucketsInJoin") && !has(&coalesced, "EnsureRequirements"), "{coalesced:?}");
    client.batch_execute("RESET spark.sql.bucketing.coalesceBucketsInJoin.enabled").await.unwrap();

    let aligned = advice(&client, "SELECT * FROM a8 JOIN b8 ON a8.k = b8.k").await;
    assert!(!has(&aligned, "EnsureRequirements") && !has(&aligned, "CoalesceBucketsInJoin"), "{aligned:?}");
    assert!(!has(&aligned, "JoinSelection"), "no shuffle, nothing to broadcast away: {aligned:?}");

    let partial_keys = "this join is on (k) but `ak` is bucketed by (k, j)";
    assert!(has(&advice(&client, "SELECT * FROM a8 JOIN ak ON a8.k = ak.k").await, partial_keys));
    assert!(!has(&advice(&client, "SELECT * FROM a8 JOIN ak ON a8.k = ak.k AND a8.v = ak.j").await, partial_keys));
    // Joined on more columns than the buckets: the setting that requires all of them is named,
    // and with it off the buckets serve and the advice goes.
    let more_keys = "this join is on (k, v) and `b8` is bucketed by (k) only";
    let wider = "SELECT * FROM a8 JOIN b8 ON a8.k = b8.k AND a8.v = b8.v";
    assert!(has(&advice(&client, wider).await, more_keys));
    client.batch_execute("SET spark.sql.requireAllClusterKeysForCoPartition = false").await.unwrap();
    let relaxed = plan(&client, wider).await;
    assert!(!relaxed.contains("hashpartitioning") && !relaxed.contains(more_keys), "{relaxed}");
    client.batch_execute("RESET spark.sql.requireAllClusterKeysForCoPartition").await.unwrap();

    let one_plain = advice(&client, "SELECT * FROM a8 JOIN p2 ON a8.k = p2.k").await;
    assert!(has(&one_plain, "shuffles `p2`, which is not bucketed, into the 8 buckets of `a8`"), "{one_plain:?}");

    // Small sides: a broadcast under Spark's default threshold would do without shuffles.
    let small = advice(&client, "SELECT * FROM p1 JOIN p2 ON p1.k = p2.k").await;
    assert!(has(&small, "JoinSelection: the `p1` side is estimated at"), "{small:?}");
    assert!(has(&small, "SET spark.sql.autoBroadcastJoinThreshold = 1048576"), "{small:?}");
    assert!(!has(&small, "Bucket both"), "{small:?}");
    // Large plain sides (declared, no data needed): bucket both.
    client
        .batch_execute(
            "ALTER TABLE p1 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1099511627776');
             ALTER TABLE p2 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1099511627776');",
        )
        .await
        .unwrap();
    let large = advice(&client, "SELECT * FROM p1 JOIN p2 ON p1.k = p2.k").await;
    assert!(has(&large, "Bucket both by their join keys"), "{large:?}");
    assert!(!has(&large, "JoinSelection"), "{large:?}");
    client.batch_execute("RESET spark.sql.autoBroadcastJoinThreshold").await.unwrap();
    let broadcast = advice(&client, "SELECT * FROM a8 JOIN a6 ON a8.k = a6.k").await;
    assert!(!has(&broadcast, "JoinSelection") && !has(&broadcast, "EnsureRequirements"), "{broadcast:?}");

    // Skew, from the files on disk: the bucket holding most rows and its share.
    let mut per_bucket: BTreeMap<u32, usize> = BTreeMap::new();
    for file in parquet_files(&server.data_dir().join("warehouse/default/hot")) {
        let bucket = bucket_id_of(&file.file_name().unwrap().to_string_lossy()).unwrap();
        *per_bucket.entry(bucket).or_default() += longs(&read_batches(&file), "k").len();
    }
    let (largest, rows) = per_bucket.iter().max_by_key(|(_, rows)| **rows).unwrap();
    let share = format!("{:.0}%", *rows as f64 * 100.0 / 8000.0);
    let skewed = advice(&client, "SELECT * FROM hot").await;
    assert!(has(&skewed, &format!("Skew: bucket {largest} of `hot` holds {share} of its rows")), "{skewed:?}");
    assert!(!has(&advice(&client, "SELECT * FROM a8").await, "Skew:"));

    // Read by file: nothing above needs the buckets.
    let unneeded = "DisableUnnecessaryBucketedScan: Scan parquet `a8` (1) reads by file";
    assert!(has(&advice(&client, "SELECT * FROM a8").await, unneeded));
    assert!(!has(&advice(&client, "SELECT k, count(*) FROM a8 GROUP BY k").await, "DisableUnnecessaryBucketedScan"));

    // Small bucket files: too many buckets for the data, unless its declared size needs them.
    let sizing = "Bucket sizing: the bucket files of `a8` average";
    assert!(has(&advice(&client, "SELECT * FROM a8").await, sizing));
    assert!(!has(&advice(&client, "SELECT * FROM one").await, "Bucket sizing"));
    client
        .batch_execute("ALTER TABLE a8 SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '17179869184')")
        .await
        .unwrap();
    assert!(!has(&advice(&client, "SELECT * FROM a8").await, sizing));
}

//! Bucketed tables on disk: Spark's layout, metadata output, and tables over existing
//! directories.

use std::collections::BTreeMap;
use std::path::Path;

use bucketsql::storage::bucket_hash::bucket_ids;
use bucketsql::storage::file_naming::bucket_id_of;
use datafusion::arrow::array::{Array, Int64Array};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{TestServer, parquet_files, sqlstate, text_rows};

/// The BIGINT column `column` of a Parquet file.
fn read_longs(path: &Path, column: &str) -> Vec<i64> {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut values = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let array = batch.column_by_name(column).unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        values.extend(array.iter().map(|v| v.unwrap()));
    }
    values
}

/// Every file holds exactly the rows of the Spark bucket its name gives, sorted on the key.
fn assert_bucket_layout(dir: &Path, key: &str, buckets: u32) -> BTreeMap<u32, usize> {
    let mut rows_per_bucket = BTreeMap::new();
    for file in parquet_files(dir) {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let bucket = bucket_id_of(&name).unwrap_or_else(|| panic!("{name} names no bucket"));
        let keys = read_longs(&file, key);
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{name} is not sorted on {key}");
        let array: datafusion::arrow::array::ArrayRef = std::sync::Arc::new(Int64Array::from(keys.clone()));
        let ids = bucket_ids(&[array], keys.len(), buckets).unwrap();
        assert!(ids.iter().all(|id| *id == bucket), "{name} holds rows of other buckets");
        *rows_per_bucket.entry(bucket).or_insert(0) += keys.len();
    }
    rows_per_bucket
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_writes_follow_sparks_layout() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 16 BUCKETS \
             AS SELECT (id * 7919) % 100003 AS k, id AS v FROM range(200000)",
        )
        .await
        .unwrap();
    let dir = server.data_dir().join("warehouse/default/t");
    let files = parquet_files(&dir);
    assert_eq!(files.len(), 16, "one file per bucket: {files:?}");
    let per_bucket = assert_bucket_layout(&dir, "k", 16);
    assert_eq!(per_bucket.values().sum::<usize>(), 200_000);

    // An append adds at most one file per bucket and keeps the layout.
    client.batch_execute("INSERT INTO t SELECT id, id FROM range(1000)").await.unwrap();
    let files = parquet_files(&dir);
    assert!(files.len() <= 32, "{} files", files.len());
    assert_eq!(assert_bucket_layout(&dir, "k", 16).values().sum::<usize>(), 201_000);
    assert_eq!(text_rows(&client, "SELECT count(*) FROM t").await, vec![vec!["201000"]]);
}

#[tokio::test]
async fn partitioned_bucketed_files_live_in_partition_directories() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE ev USING parquet PARTITIONED BY (d) CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS \
             AS SELECT id AS k, CAST(id AS DOUBLE) AS amount, date_add(DATE '2026-01-01', CAST(id % 3 AS INT)) AS d FROM range(3000)",
        )
        .await
        .unwrap();
    let dir = server.data_dir().join("warehouse/default/ev");
    for day in ["d=2026-01-01", "d=2026-01-02", "d=2026-01-03"] {
        let partition = dir.join(day);
        assert_eq!(parquet_files(&partition).len(), 4, "{day}");
        assert_eq!(assert_bucket_layout(&partition, "k", 4).values().sum::<usize>(), 1000);
    }
    let described = text_rows(&client, "DESCRIBE EXTENDED ev").await;
    let find = |key: &str| described.iter().find(|r| r[0] == key).map(|r| r[1].clone());
    assert_eq!(find("Num Buckets").as_deref(), Some("4"));
    assert_eq!(find("Bucket Columns").as_deref(), Some("[`k`]"));
    assert_eq!(find("Sort Columns").as_deref(), Some("[`k`]"));
    assert_eq!(find("Type").as_deref(), Some("MANAGED"));
    assert_eq!(find("Partition Provider").as_deref(), Some("Catalog"));
    assert_eq!(find("Location"), Some(format!("file:{}", dir.canonicalize().unwrap().display())));
    let columns: Vec<&str> = described.iter().take(3).map(|r| r[0].as_str()).collect();
    assert_eq!(columns, vec!["k", "amount", "d"]);

    let ddl = text_rows(&client, "SHOW CREATE TABLE ev").await;
    assert_eq!(
        ddl[0][0],
        "CREATE TABLE spark_catalog.default.ev (\n  k BIGINT,\n  amount DOUBLE,\n  d DATE)\nUSING parquet\n\
         PARTITIONED BY (d)\nCLUSTERED BY (k)\nSORTED BY (k)\nINTO 4 BUCKETS\n"
    );
}

/// Spark's partition spec: static values send every row to their partition (cast to the
/// column's type: `h='01'` is `h=1`), the other partition columns come from the query, and an
/// INSERT OVERWRITE replaces what lies under the static values, even with no rows; in
/// `dynamic` overwrite mode with dynamic columns left it replaces only the partitions written.
#[tokio::test]
async fn static_partition_values_choose_the_partition_written_and_overwritten() {
    let server = TestServer::start();
    let client = server.connect().await;
    let dir = server.data_dir().join("warehouse/default/t");
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, v STRING, d STRING, h INT) USING parquet PARTITIONED BY (d, h) \
               CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO t PARTITION (d = 'x', h = 1) VALUES (1, 'a'), (2, 'b');
             INSERT INTO t PARTITION (d = 'x', h) SELECT id, 'c', 2 FROM range(3, 5);
             INSERT INTO t PARTITION (d = 'y', h = '01') SELECT 9, 'z'",
        )
        .await
        .unwrap();
    let partitions = |rows: &[&str]| rows.iter().map(|p| vec![p.to_string()]).collect::<Vec<_>>();
    assert_eq!(text_rows(&client, "SHOW PARTITIONS t").await, partitions(&["d=x/h=1", "d=x/h=2", "d=y/h=1"]));
    assert_eq!(assert_bucket_layout(&dir.join("d=x/h=2"), "k", 4).values().sum::<usize>(), 2);
    client
        .batch_execute(
            "SET spark.sql.sources.partitionOverwriteMode = dynamic;
             INSERT OVERWRITE TABLE t PARTITION (d = 'x', h) SELECT 6, 'f', 3;
             INSERT OVERWRITE TABLE t PARTITION (d = 'x', h = 1) SELECT 5, 'e' WHERE false",
        )
        .await
        .unwrap();
    assert_eq!(
        text_rows(&client, "SELECT k, d, h FROM t ORDER BY k").await,
        vec![vec!["3", "x", "2"], vec!["4", "x", "2"], vec!["6", "x", "3"], vec!["9", "y", "1"]]
    );
    assert!(!dir.join("d=x/h=1").exists(), "the emptied partition's directory went");
    client
        .batch_execute(
            "SET spark.sql.sources.partitionOverwriteMode = static;
             INSERT OVERWRITE TABLE t PARTITION (d = 'x', h) SELECT 7, 'g', 4",
        )
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SHOW PARTITIONS t").await, partitions(&["d=x/h=4", "d=y/h=1"]));
    for (statement, code) in [
        ("INSERT INTO t PARTITION (h = 1, d) SELECT 1, 'a', 'q'", "42000"),
        ("INSERT INTO t PARTITION (k = 1) SELECT 'a', 'q', 2", "42000"),
        ("INSERT INTO t PARTITION (d = 'x', d = 'y') SELECT 1, 'a', 2", "42701"),
    ] {
        let error = client.batch_execute(statement).await.unwrap_err();
        assert_eq!(crate::common::sqlstate(&error), code, "{statement}: {error:?}");
    }
}

#[tokio::test]
async fn external_tables_register_existing_bucket_files() {
    let temp = tempfile::tempdir().unwrap();
    let allowed = temp.path().join("lake");
    let server =
        TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", allowed.to_str().unwrap()]);
    let client = server.connect().await;
    // Write a bucketed directory through an external CTAS, then register it again.
    let dir = allowed.join("tx");
    client
        .batch_execute(&format!(
            "CREATE TABLE writer USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS LOCATION '{}' \
             AS SELECT id % 500 AS k, id AS v FROM range(5000)",
            dir.display()
        ))
        .await
        .unwrap();
    assert_eq!(parquet_files(&dir).len(), 8);
    client
        .batch_execute(&format!(
            "CREATE TABLE reader (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS LOCATION 'file:{}'",
            dir.display()
        ))
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM reader").await, vec![vec!["5000", "12497500"]]);
    let described = text_rows(&client, "DESCRIBE EXTENDED reader").await;
    assert!(described.iter().any(|r| r[0] == "Type" && r[1] == "EXTERNAL"));

    // Spark's _SUCCESS marker and .crc files are not data.
    std::fs::write(dir.join("_SUCCESS"), b"").unwrap();
    client
        .batch_execute(&format!("CREATE TABLE again (k BIGINT, v BIGINT) USING parquet LOCATION '{}'", dir.display()))
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*) FROM again").await, vec![vec!["5000"]]);

    // Files must name buckets of the spec.
    let err = client
        .batch_execute(&format!(
            "CREATE TABLE wrong (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}'",
            dir.display()
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err:?}");
    // Columns can come from the files.
    client.batch_execute(&format!("CREATE TABLE inferred USING parquet LOCATION '{}'", dir.display())).await.unwrap();
    assert_eq!(text_rows(&client, "SELECT max(k) FROM inferred").await, vec![vec!["499"]]);

    // Dropping an external table keeps its files; dropping a managed one does not.
    client.batch_execute("DROP TABLE reader").await.unwrap();
    assert_eq!(parquet_files(&dir).len(), 8);

    let err = client.batch_execute("CREATE TABLE outside (a INT) USING parquet LOCATION '/etc'").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42501");
    let climbing = format!("{}/../escape", allowed.display());
    let err = client
        .batch_execute(&format!("CREATE TABLE climb (a INT) USING parquet LOCATION '{climbing}'"))
        .await
        .unwrap_err();
    assert!(["42501", "22023"].contains(&sqlstate(&err).as_str()), "{err:?}");
    assert!(!Path::new(&climbing).exists());
}

#[tokio::test]
async fn concurrent_readers_see_the_old_or_the_new_table() {
    let server = TestServer::start();
    let writer = server.connect().await;
    writer
        .batch_execute("CREATE TABLE t USING parquet CLUSTERED BY (id) INTO 4 BUCKETS AS SELECT id FROM range(1000)")
        .await
        .unwrap();
    let mut readers = Vec::new();
    for _ in 0..3 {
        let client = server.connect().await;
        readers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..40 {
                let count: i64 = client.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
                seen.push(count);
            }
            seen
        }));
    }
    for round in 0..20 {
        let rows = if round % 2 == 0 { 2000 } else { 1000 };
        writer.batch_execute(&format!("INSERT OVERWRITE TABLE t SELECT id FROM range({rows})")).await.unwrap();
    }
    for reader in readers {
        for count in reader.await.unwrap() {
            assert!(count == 1000 || count == 2000, "a reader saw {count} rows");
        }
    }
}

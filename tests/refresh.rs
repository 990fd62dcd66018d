//! `REFRESH TABLE` and `MSCK REPAIR TABLE`: files another engine writes into an external
//! table's directory after `CREATE TABLE` are seen once the directory is read again, checked
//! as `CREATE TABLE` checks them.

use std::path::Path;

use crate::common::{TestServer, parquet_files, sqlstate, text_rows};

/// Copies the Parquet files of one partition directory into another table's, as Spark would
/// write them there.
fn copy_partition(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for file in parquet_files(from) {
        std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
    }
}

/// `count(*), sum(v)` of rows `v` in `values`, as text.
fn count_and_sum(values: impl Iterator<Item = i64>) -> Vec<Vec<String>> {
    let (count, sum) = values.fold((0i64, 0i64), |(c, s), v| (c + 1, s + v));
    vec![vec![count.to_string(), sum.to_string()]]
}

#[tokio::test]
async fn external_tables_see_files_written_after_create_once_refreshed() {
    let temp = tempfile::tempdir().unwrap();
    let lake = temp.path().join("lake");
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", lake.to_str().unwrap()]);
    let client = server.connect().await;
    // Three directories in one layout: the table's, and two others whose files "Spark" copies in later.
    let ctas = |name: &str, query: &str| {
        format!(
            "CREATE TABLE {name} USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}' AS {query}",
            lake.join(name).display()
        )
    };
    client.batch_execute(&ctas("ev", "SELECT id % 100 AS k, id AS v, id % 3 AS d FROM range(3000)")).await.unwrap();
    client
        .batch_execute(&ctas("later", "SELECT id % 100 AS k, id AS v, id % 3 + 3 AS d FROM range(3000, 4500)"))
        .await
        .unwrap();
    client
        .batch_execute(&ctas("extra", "SELECT id % 100 AS k, id AS v, CAST(0 AS BIGINT) AS d FROM range(4500, 4600)"))
        .await
        .unwrap();
    let ev = lake.join("ev");
    client
        .batch_execute(&format!(
            "CREATE TABLE reader (k BIGINT, v BIGINT, d BIGINT) USING parquet PARTITIONED BY (d) \
             CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}'",
            ev.display()
        ))
        .await
        .unwrap();
    let count = "SELECT count(*), sum(v) FROM reader";
    assert_eq!(text_rows(&client, count).await, count_and_sum(0..3000));

    // A new partition directory and another file in a known partition.
    copy_partition(&lake.join("later/d=3"), &ev.join("d=3"));
    copy_partition(&lake.join("extra/d=0"), &ev.join("d=0"));
    assert_eq!(text_rows(&client, count).await, count_and_sum(0..3000), "not seen before the table is repaired");
    client.batch_execute("MSCK REPAIR TABLE reader").await.unwrap();
    let in_d3 = (3000..4500).filter(|v| v % 3 == 0);
    assert_eq!(text_rows(&client, count).await, count_and_sum((0..3000).chain(in_d3.clone()).chain(4500..4600)));
    // The copied files keep their buckets: a lookup that reads one bucket finds all rows of its key.
    let key_7 = (0..3000).chain(in_d3.clone()).chain(4500..4600).filter(|v| v % 100 == 7);
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM reader WHERE k = 7").await, count_and_sum(key_7));

    copy_partition(&lake.join("later/d=4"), &ev.join("d=4"));
    client.batch_execute("REFRESH TABLE reader").await.unwrap();
    let in_d4 = (3000..4500).filter(|v| v % 3 == 1);
    let refreshed = || (0..3000).chain(in_d3.clone()).chain(in_d4.clone()).chain(4500..4600);
    assert_eq!(text_rows(&client, count).await, count_and_sum(refreshed()));
    copy_partition(&lake.join("later/d=5"), &ev.join("d=5"));
    client.batch_execute("ALTER TABLE reader RECOVER PARTITIONS").await.unwrap();
    let in_d5 = (3000..4500).filter(|v| v % 3 == 2);
    assert_eq!(text_rows(&client, count).await, count_and_sum(refreshed().chain(in_d5.clone())));

    // A partition whose directory went: ADD keeps it registered (empty), DROP forgets it.
    std::fs::remove_dir_all(ev.join("d=5")).unwrap();
    client.batch_execute("MSCK REPAIR TABLE reader ADD PARTITIONS").await.unwrap();
    assert_eq!(text_rows(&client, count).await, count_and_sum(refreshed()));
    let partitions = |rows: &[&str]| rows.iter().map(|p| vec![p.to_string()]).collect::<Vec<_>>();
    let all = ["d=0", "d=1", "d=2", "d=3", "d=4", "d=5"];
    assert_eq!(text_rows(&client, "SHOW PARTITIONS reader").await, partitions(&all));
    client.batch_execute("MSCK REPAIR TABLE reader DROP PARTITIONS").await.unwrap();
    assert_eq!(text_rows(&client, "SHOW PARTITIONS reader").await, partitions(&all[..5]));
    client.batch_execute("MSCK REPAIR TABLE reader SYNC PARTITIONS").await.unwrap();
    assert_eq!(text_rows(&client, count).await, count_and_sum(refreshed()));
    // The files that left the list are another engine's: the writer's table still reads them.
    assert_eq!(text_rows(&client, "SELECT count(*) FROM later").await, vec![vec!["1500"]]);
}

#[tokio::test]
async fn refresh_refuses_files_create_would_refuse_and_keeps_the_list() {
    let temp = tempfile::tempdir().unwrap();
    let lake = temp.path().join("lake");
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", lake.to_str().unwrap()]);
    let client = server.connect().await;
    let ev = lake.join("ev");
    client
        .batch_execute(&format!(
            "CREATE TABLE ev (k BIGINT, v BIGINT, d BIGINT) USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 4 BUCKETS \
             LOCATION '{}'; \
             INSERT INTO ev SELECT id % 100, id, id % 2 FROM range(1000); \
             CREATE TABLE ints USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 4 BUCKETS \
             LOCATION '{}' AS SELECT id % 100 AS k, CAST(id AS INT) AS v, CAST(0 AS BIGINT) AS d FROM range(10)",
            ev.display(),
            lake.join("ints").display()
        ))
        .await
        .unwrap();
    let count = "SELECT count(*), sum(v) FROM ev";
    let before = count_and_sum(0..1000);
    assert_eq!(text_rows(&client, count).await, before);
    // A new partition that is fine, beside a file naming a bucket the table does not have.
    copy_partition(&ev.join("d=1"), &ev.join("d=7"));
    let file = parquet_files(&ev.join("d=1")).pop().unwrap();
    let bucket_9 = ev.join("d=1/part-00000-00000000-0000-0000-0000-000000000002_00009.c000.snappy.parquet");
    std::fs::copy(&file, &bucket_9).unwrap();
    for statement in ["REFRESH TABLE ev", "MSCK REPAIR TABLE ev"] {
        let err = client.batch_execute(statement).await.unwrap_err();
        assert_eq!(sqlstate(&err), "22023", "{statement}: {err:?}");
        assert_eq!(text_rows(&client, count).await, before, "{statement} changed the list");
    }
    std::fs::remove_file(&bucket_9).unwrap();
    // A column stored as another type than declared.
    let int_file = parquet_files(&lake.join("ints")).pop().unwrap();
    let misfit = ev.join("d=1").join(int_file.file_name().unwrap());
    std::fs::copy(&int_file, &misfit).unwrap();
    let err = client.batch_execute("REFRESH TABLE ev").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42804", "{err:?}");
    assert_eq!(text_rows(&client, count).await, before);
    std::fs::remove_file(&misfit).unwrap();
    // A data file outside the partition directories.
    let stray = ev.join(file.file_name().unwrap());
    std::fs::copy(&file, &stray).unwrap();
    let err = client.batch_execute("MSCK REPAIR TABLE ev").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err:?}");
    assert_eq!(text_rows(&client, count).await, before);
    std::fs::remove_file(&stray).unwrap();

    client.batch_execute("REFRESH TABLE ev").await.unwrap();
    let with_d7 = (0..1000).chain((0..1000).filter(|v| v % 2 == 1));
    assert_eq!(text_rows(&client, count).await, count_and_sum(with_d7));
    assert_eq!(text_rows(&client, "SELECT count(*) FROM ev WHERE d = 7").await, vec![vec!["500"]]);
}

#[tokio::test]
async fn refresh_leaves_managed_tables_and_repair_needs_partitions() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE plain USING parquet AS SELECT id AS a FROM range(10); \
             CREATE TABLE parted USING parquet PARTITIONED BY (d) AS SELECT id AS a, id % 2 AS d FROM range(10)",
        )
        .await
        .unwrap();
    client.batch_execute("REFRESH TABLE plain; REFRESH TABLE parted; MSCK REPAIR TABLE parted").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*), sum(a) FROM plain").await, count_and_sum(0..10));
    assert_eq!(text_rows(&client, "SELECT count(*), sum(a) FROM parted").await, count_and_sum(0..10));
    let err = client.batch_execute("MSCK REPAIR TABLE plain").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42809", "{err:?}");
    let err = client.batch_execute("REFRESH TABLE missing").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01", "{err:?}");
    let err = client.batch_execute("MSCK TABLE parted").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42601", "{err:?}");
}

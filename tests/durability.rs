//! A write is all or nothing, even when the server is killed in the middle of it.

use std::path::Path;
use std::time::Duration;

use crate::common::{TestServer, text_rows};

fn data_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            found.extend(data_files(&path));
        } else {
            found.push(path.to_string_lossy().to_string());
        }
    }
    found
}

/// Runs `statement` on `client` and kills the server once the write has staged files under
/// `staging` for a moment; the statement must fail, or the test did not interrupt it.
async fn kill_while_staging(
    server: &mut TestServer,
    client: tokio_postgres::Client,
    statement: &'static str,
    staging: &Path,
) {
    let running = tokio::spawn(async move { client.batch_execute(statement).await });
    let mut staged = false;
    for _ in 0..3000 {
        if staging.exists() {
            staged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(staged, "{statement} never started writing");
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    let outcome = running.await.unwrap();
    assert!(outcome.is_err(), "{statement} finished before the kill; the test did not interrupt it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_mid_create_table_as_leaves_no_table_and_no_files() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let table_dir = data_dir.join("warehouse/default/made");
    let mut server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    let create =
        "CREATE TABLE made USING parquet AS SELECT id, concat('row-', CAST(id AS STRING)) AS s FROM range(30000000)";
    kill_while_staging(&mut server, client, create, &table_dir.join("_temporary")).await;

    let server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    let missing = client.simple_query("SELECT count(*) FROM made").await.unwrap_err();
    assert_eq!(crate::common::sqlstate(&missing), "42P01");
    assert!(!table_dir.exists(), "the killed CREATE TABLE left {:?}", data_files(&table_dir));
    client.batch_execute("CREATE TABLE made USING parquet AS SELECT id FROM range(10)").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*) FROM made").await, vec![vec!["10"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_mid_insert_leaves_the_old_or_the_new_table() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let table_dir = data_dir.join("warehouse/default/big");
    let mut server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE big (id BIGINT, s STRING); INSERT INTO big SELECT id, 'old' FROM range(1000)")
        .await
        .unwrap();
    let mut before = data_files(&table_dir);
    before.sort();

    let insert = "INSERT INTO big SELECT id, concat('row-', CAST(id AS STRING)) FROM range(30000000)";
    let staging = table_dir.join("_temporary");
    kill_while_staging(&mut server, client, insert, &staging).await;

    let server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    let count: i64 = text_rows(&client, "SELECT count(*) FROM big").await[0][0].parse().unwrap();
    assert!(count == 1000 || count == 30_001_000, "count {count} is neither the old nor the new table");
    assert!(!staging.exists(), "staging files of the killed write were not removed at restart");
    // Every file left in the table directory is a committed one.
    let files = data_files(&table_dir);
    let committed: i64 = text_rows(&client, "SELECT count(*) FROM big").await[0][0].parse().unwrap();
    assert_eq!(committed, count);
    assert!(files.iter().all(|f| f.ends_with(".snappy.parquet")), "{files:?}");
    if count == 1000 {
        let mut after = files.clone();
        after.sort();
        assert_eq!(after, before, "only the first write's files remain");
    }
}

#[tokio::test]
async fn a_failed_write_leaves_the_table_as_it_was() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2)").await.unwrap();
    let err = client.batch_execute("INSERT INTO t SELECT CAST(s AS INT) FROM (VALUES ('3'), ('x')) v(s)").await;
    assert!(err.is_err());
    let err = client.batch_execute("INSERT OVERWRITE TABLE t SELECT 10 / (id - 5) FROM range(10)").await;
    assert!(err.is_err(), "division by zero fails the overwrite");
    assert_eq!(text_rows(&client, "SELECT a FROM t ORDER BY a").await, vec![vec!["1"], vec!["2"]]);
    let err = client.batch_execute("CREATE TABLE c USING parquet AS SELECT 1 / (id - 3) AS x FROM range(5)").await;
    assert!(err.is_err());
    assert!(client.simple_query("SELECT * FROM c").await.is_err(), "a failed CTAS leaves no table");
    let table_dir = server.data_dir().join("warehouse/default/t");
    assert_eq!(data_files(&table_dir).len(), 1, "no stray files: {:?}", data_files(&table_dir));
}

#[tokio::test]
async fn overwrite_and_drop_delete_replaced_files() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)").await.unwrap();
    let table_dir = server.data_dir().join("warehouse/default/t");
    assert_eq!(data_files(&table_dir).len(), 2);
    client.batch_execute("INSERT OVERWRITE TABLE t VALUES (3)").await.unwrap();
    assert_eq!(data_files(&table_dir).len(), 1);
    client.batch_execute("DROP TABLE t").await.unwrap();
    assert_eq!(data_files(&table_dir).len(), 0);
    let err = client.batch_execute("DROP TABLE t").await.unwrap_err();
    assert_eq!(crate::common::sqlstate(&err), "42P01");
    client.batch_execute("DROP TABLE IF EXISTS t").await.unwrap();
}

/// The directories below `dir`, by name, sorted.
fn subdirectories(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Directories a write leaves empty go with its files (an overwritten partition's, a dropped
/// table's, a failed CREATE TABLE … AS's), and those a crash left empty go at the next start.
#[tokio::test]
async fn emptied_directories_are_removed() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let warehouse = data_dir.join("warehouse/default");
    let mut server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, d STRING) USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO t VALUES (1, 'a'), (2, 'b');
             INSERT OVERWRITE TABLE t VALUES (3, 'c')",
        )
        .await
        .unwrap();
    assert_eq!(subdirectories(&warehouse.join("t")), ["d=c"], "the overwritten partitions' directories went");
    client.batch_execute("DROP TABLE t").await.unwrap();
    assert!(!warehouse.join("t").exists(), "the dropped table's directory went");
    let failed = client
        .batch_execute(
            "CREATE TABLE bad USING parquet PARTITIONED BY (d) AS
             SELECT id, 10 / (id - 70000) AS v, CAST(id % 3 AS STRING) AS d FROM range(100000)",
        )
        .await;
    assert!(failed.is_err(), "division by zero fails the CREATE TABLE … AS");
    assert!(!warehouse.join("bad").exists(), "the failed CREATE TABLE … AS left {:?}", data_files(&warehouse));

    client
        .batch_execute(
            "CREATE TABLE live (k BIGINT, d STRING) USING parquet PARTITIONED BY (d); INSERT INTO live VALUES (1, 'a')",
        )
        .await
        .unwrap();
    drop(client);
    server.kill();
    // What a crash between a write's steps can leave: empty partition directories of a live
    // table and of a table that never committed.
    std::fs::create_dir_all(warehouse.join("live/d=b")).unwrap();
    std::fs::create_dir_all(warehouse.join("ghost/d=x/_temporary")).unwrap();
    let server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    assert_eq!(subdirectories(&warehouse), ["live"]);
    assert_eq!(subdirectories(&warehouse.join("live")), ["d=a"]);
    assert_eq!(text_rows(&client, "SELECT k, d FROM live").await, vec![vec!["1", "a"]]);
}

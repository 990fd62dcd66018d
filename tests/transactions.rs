//! Transactions: a block's writes are published together at COMMIT or not at all, other
//! sessions see only what committed, the first committer wins, PostgreSQL's protocol rules
//! hold, and real clients in their default modes get what they expect. A COMMIT killed at
//! any step leaves every transaction whole or absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::clients::{clients_dir, java_client, python_env, run_client};
use crate::common::{TestServer, error_code, parquet_files, sqlstate, text_rows};

/// Directories where writes wait to be published, anywhere under `dir`.
fn staging_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "_temporary") {
                found.push(path);
            } else {
                found.extend(staging_dirs(&path));
            }
        }
    }
    found
}

async fn count(client: &Client, table: &str) -> i64 {
    text_rows(client, &format!("SELECT count(*) FROM {table}")).await[0][0].parse().unwrap()
}

/// Polls `probe` for up to 30 s.
async fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !probe() {
        assert!(Instant::now() < deadline, "{what} did not happen within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const TABLES: &str = "
    CREATE TABLE t (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS;
    CREATE TABLE p (k BIGINT, d STRING) USING parquet PARTITIONED BY (d);
    INSERT INTO t VALUES (0, 'base');";

/// The writes of one block over every kind of table: bucketed, partitioned, created in it.
const BLOCK_WRITES: &str = "
    INSERT INTO t SELECT id, 'block' FROM range(1, 4);
    INSERT INTO p VALUES (1, 'x'), (2, 'y');
    CREATE TABLE n USING parquet AS SELECT id AS k FROM range(5);
    INSERT INTO n VALUES (100);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_is_seen_by_others_whole_once_committed_and_never_once_rolled_back() {
    let server = TestServer::start();
    let warehouse = server.data_dir().join("warehouse");
    let (writer, reader) = (server.connect().await, server.connect().await);
    writer.batch_execute(TABLES).await.unwrap();
    let committed_files = parquet_files(&warehouse);

    writer.batch_execute("BEGIN").await.unwrap();
    writer.batch_execute(BLOCK_WRITES).await.unwrap();
    // The block reads its own writes, a table it created included.
    assert_eq!((count(&writer, "t").await, count(&writer, "p").await, count(&writer, "n").await), (4, 2, 6));
    let own = text_rows(&writer, "SELECT k FROM t WHERE k >= 2 ORDER BY k").await;
    assert_eq!(own, [["2"], ["3"]]);
    assert!(text_rows(&writer, "SHOW TABLES").await.iter().any(|row| row[1] == "n"));
    // Another session sees none of it.
    assert_eq!((count(&reader, "t").await, count(&reader, "p").await), (1, 0));
    assert_eq!(error_code(&reader, "SELECT * FROM n").await, "42P01");
    assert!(!staging_dirs(&warehouse).is_empty(), "the block's files are staged");

    writer.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!((count(&writer, "t").await, count(&writer, "p").await), (1, 0));
    assert_eq!(error_code(&writer, "SELECT * FROM n").await, "42P01");
    assert_eq!(staging_dirs(&warehouse), Vec::<PathBuf>::new(), "rolled back files are deleted");
    assert!(!warehouse.join("default/n").exists(), "the rolled back table left its directory");
    assert_eq!(parquet_files(&warehouse), committed_files);

    writer.batch_execute("BEGIN").await.unwrap();
    writer.batch_execute(BLOCK_WRITES).await.unwrap();
    writer.batch_execute("COMMIT").await.unwrap();
    assert_eq!((count(&reader, "t").await, count(&reader, "p").await, count(&reader, "n").await), (4, 2, 6));
    assert_eq!(staging_dirs(&warehouse), Vec::<PathBuf>::new());

    // A connection that closes inside a block takes the block with it.
    let leaving = server.connect().await;
    leaving.batch_execute("BEGIN; INSERT INTO t VALUES (50, 'gone'); DROP TABLE n").await.unwrap();
    drop(leaving);
    eventually("the closed connection's staged files to go", || staging_dirs(&warehouse).is_empty()).await;
    assert_eq!((count(&reader, "t").await, count(&reader, "n").await), (4, 6));
}

#[tokio::test]
async fn an_error_fails_the_block_until_rollback_and_savepoints_undo_part_of_it() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();

    client.batch_execute("BEGIN; INSERT INTO t VALUES (1, 'lost')").await.unwrap();
    assert_eq!(error_code(&client, "SELECT 1 / 0").await, "22012");
    assert_eq!(error_code(&client, "SELECT 1").await, "25P02");
    assert_eq!(error_code(&client, "INSERT INTO t VALUES (2, 'refused')").await, "25P02");
    // COMMIT of a failed block rolls it back.
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(count(&client, "t").await, 1);

    // Nested savepoints: each ROLLBACK TO undoes what came after it, and revives a failed block.
    client
        .batch_execute(
            "BEGIN; INSERT INTO t VALUES (1, 'a'); SAVEPOINT one; INSERT INTO t VALUES (2, 'b');
             SAVEPOINT two; INSERT INTO t VALUES (3, 'c'); ROLLBACK TO SAVEPOINT two",
        )
        .await
        .unwrap();
    assert_eq!(count(&client, "t").await, 3);
    assert_eq!(error_code(&client, "SELECT * FROM missing").await, "42P01");
    assert_eq!(error_code(&client, "SELECT 1").await, "25P02");
    client.batch_execute("ROLLBACK TO one").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT k FROM t ORDER BY k").await, [["0"], ["1"]]);
    client.batch_execute("RELEASE SAVEPOINT one").await.unwrap();
    assert_eq!(error_code(&client, "ROLLBACK TO one").await, "3B001");
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&client, "t").await, 1);
    assert_eq!(error_code(&client, "SAVEPOINT outside").await, "25P01");

    // READ ONLY blocks refuse writes, whichever way they are made read-only.
    client.batch_execute("BEGIN READ ONLY").await.unwrap();
    assert_eq!(error_code(&client, "INSERT INTO t VALUES (9, 'no')").await, "25006");
    client.batch_execute("ROLLBACK; BEGIN; SET TRANSACTION READ ONLY").await.unwrap();
    assert_eq!(error_code(&client, "CREATE TABLE no_table (a INT)").await, "25006");
    client.batch_execute("ROLLBACK; BEGIN READ ONLY; SELECT count(*) FROM t").await.unwrap();
    assert_eq!(error_code(&client, "SET TRANSACTION READ WRITE").await, "25001");
    // Outside a block SET TRANSACTION changes nothing, as in PostgreSQL.
    client.batch_execute("ROLLBACK; SET TRANSACTION READ ONLY; INSERT INTO t VALUES (4, 'written')").await.unwrap();
    client.batch_execute("ROLLBACK; SET default_transaction_read_only = on; BEGIN").await.unwrap();
    assert_eq!(error_code(&client, "DROP TABLE t").await, "25006");
    client.batch_execute("ROLLBACK; SET default_transaction_read_only = off").await.unwrap();
    // Outside a block every statement commits on its own, as before.
    client.batch_execute("INSERT INTO t VALUES (5, 'autocommit')").await.unwrap();
    assert_eq!(count(&server.connect().await, "t").await, 3);
}

/// A query string of several statements runs them one after the other, each answered before
/// the next starts: a SELECT that fails while its rows are sent stops the rest, the COMMIT
/// after it included, and fails the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_of_one_query_string_run_in_turn_in_a_block() {
    let server = TestServer::start();
    let warehouse = server.data_dir().join("warehouse");
    let client = server.connect().await;
    client.batch_execute(TABLES).await.unwrap();
    let failed = client.batch_execute("BEGIN; INSERT INTO t VALUES (7, 'x'); SELECT 1 / (k - k) FROM t; COMMIT").await;
    assert_eq!(sqlstate(&failed.unwrap_err()), "22012");
    assert_eq!(error_code(&client, "SELECT 1").await, "25P02", "the COMMIT after the error ran");
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&client, "t").await, 1);

    // Rows of a staged table are read in full before the ROLLBACK deletes its files.
    let messages = client
        .simple_query("BEGIN; INSERT INTO t SELECT id, 'x' FROM range(1, 50000); SELECT * FROM t; ROLLBACK")
        .await;
    let rows = messages.unwrap().iter().filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_))).count();
    assert_eq!(rows, 50000);
    assert_eq!(count(&client, "t").await, 1);
    assert_eq!(staging_dirs(&warehouse), Vec::<PathBuf>::new());

    // COMMIT AND CHAIN commits and opens the next block at once.
    client
        .batch_execute("BEGIN; INSERT INTO t VALUES (8, 'kept'); COMMIT AND CHAIN; INSERT INTO t VALUES (9, 'undone')")
        .await
        .unwrap();
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT k FROM t ORDER BY k").await, [["0"], ["8"]]);
    // Outside a block a read-only default refuses writes too.
    client.batch_execute("SET default_transaction_read_only = on").await.unwrap();
    assert_eq!(error_code(&client, "INSERT INTO t VALUES (10, 'no')").await, "25006");
}

/// The usual load in one transaction: a table created and filled by COPY, seen by others only
/// once committed, and gone with its files when rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_and_copied_into_in_a_block_is_published_or_dropped_whole() {
    let server = TestServer::start();
    let warehouse = server.data_dir().join("warehouse");
    let (client, other) = (server.connect().await, server.connect().await);
    for (end, published) in [("ROLLBACK", false), ("COMMIT", true)] {
        client.batch_execute("BEGIN; CREATE TABLE loaded (k BIGINT, v STRING) USING parquet").await.unwrap();
        let copied = crate::copy::copy_in(&client, "COPY loaded FROM STDIN", "1\tone\n2\ttwo\n").await.unwrap();
        assert_eq!(copied, 2);
        assert_eq!(count(&client, "loaded").await, 2);
        assert_eq!(error_code(&other, "SELECT * FROM loaded").await, "42P01");
        client.batch_execute(end).await.unwrap();
        match published {
            true => {
                assert_eq!(text_rows(&other, "SELECT k, v FROM loaded ORDER BY k").await, [["1", "one"], ["2", "two"]])
            }
            false => {
                assert_eq!(error_code(&other, "SELECT * FROM loaded").await, "42P01");
                assert!(!warehouse.join("default/loaded").exists(), "the rolled back table left files");
            }
        }
    }
}

/// TRUNCATE TABLE in a block: the block reads the table empty, others read it whole until the
/// block commits, and a rollback keeps every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_in_a_block_empties_the_table_only_once_committed() {
    let server = TestServer::start();
    let (client, other) = (server.connect().await, server.connect().await);
    client
        .batch_execute(
            "CREATE TABLE emptied (k INT, d STRING) USING parquet PARTITIONED BY (d);
             INSERT INTO emptied SELECT id, CAST(id % 3 AS STRING) FROM range(30)",
        )
        .await
        .unwrap();
    for (end, left) in [("ROLLBACK", 30), ("COMMIT", 20)] {
        client.batch_execute("BEGIN; TRUNCATE TABLE emptied PARTITION (d = '1')").await.unwrap();
        assert_eq!(count(&client, "emptied").await, 20);
        assert_eq!(count(&other, "emptied").await, 30);
        client.batch_execute(end).await.unwrap();
        assert_eq!(count(&other, "emptied").await, left);
    }
    // The partition stays, empty, as Spark keeps it.
    assert_eq!(text_rows(&other, "SHOW PARTITIONS emptied").await, [["d=0"], ["d=1"], ["d=2"]]);
    client.batch_execute("BEGIN; TRUNCATE TABLE emptied; COMMIT").await.unwrap();
    assert_eq!(count(&other, "emptied").await, 0);
    assert_eq!(error_code(&other, "BEGIN READ ONLY; TRUNCATE TABLE emptied").await, "25006");
}

/// A column added in a block is seen by the block alone until it commits; files written before
/// it read the new column as NULL, those written in the block with their values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_added_in_a_block_appear_only_once_committed() {
    let server = TestServer::start();
    let (client, other) = (server.connect().await, server.connect().await);
    client
        .batch_execute(
            "CREATE TABLE widened (k INT, d STRING) USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 2 BUCKETS;
             INSERT INTO widened VALUES (1, 'a')",
        )
        .await
        .unwrap();
    let columns = |rows: Vec<Vec<String>>| rows.into_iter().map(|row| row[0].clone()).take(3).collect::<Vec<_>>();
    for (end, added) in [("ROLLBACK", false), ("COMMIT", true)] {
        client.batch_execute("BEGIN; ALTER TABLE widened ADD COLUMNS (v BIGINT)").await.unwrap();
        client.batch_execute("INSERT INTO widened VALUES (2, 20, 'a')").await.unwrap();
        let in_block = text_rows(&client, "SELECT k, v FROM widened ORDER BY k").await;
        assert_eq!(in_block, [["1", "NULL"], ["2", "20"]]);
        assert_eq!(columns(text_rows(&other, "DESCRIBE widened").await), ["k", "d", "# Partition Information"]);
        client.batch_execute(end).await.unwrap();
        let seen = columns(text_rows(&other, "DESCRIBE widened").await);
        assert_eq!(seen == ["k", "v", "d"], added, "{end}: {seen:?}");
    }
    assert_eq!(
        text_rows(&other, "SELECT k, v, d FROM widened ORDER BY k").await,
        [["1", "NULL", "a"], ["2", "20", "a"]]
    );
}

/// A managed table renamed in a block: the block alone reads it under its new name, its own
/// writes before and after the rename included; ROLLBACK leaves no new directory; COMMIT moves
/// every file to the new name's directory, while a REPEATABLE READ block that read the table
/// before keeps reading it under its old name, and the old directory goes once that block ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_table_moves_its_files_at_commit() {
    let server = TestServer::start();
    let schema_dir = server.data_dir().join("warehouse").join("default");
    let (client, other) = (server.connect().await, server.connect().await);
    client
        .batch_execute(
            "CREATE TABLE named (k INT, d STRING) USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 2 BUCKETS;
             INSERT INTO named VALUES (1, 'a'), (2, 'b')",
        )
        .await
        .unwrap();
    let block = "BEGIN; INSERT INTO named VALUES (3, 'a'); ALTER TABLE named RENAME TO renamed;
                 INSERT INTO renamed VALUES (4, 'c')";
    let keys = |rows: Vec<Vec<String>>| rows.into_iter().map(|row| row[0].clone()).collect::<Vec<_>>();
    for end in ["ROLLBACK", "COMMIT"] {
        client.batch_execute(block).await.unwrap();
        assert_eq!(keys(text_rows(&client, "SELECT k FROM renamed ORDER BY k").await), ["1", "2", "3", "4"]);
        client.batch_execute("SAVEPOINT before_error").await.unwrap();
        assert_eq!(error_code(&client, "SELECT * FROM named").await, "42P01");
        client.batch_execute("ROLLBACK TO SAVEPOINT before_error").await.unwrap();
        assert_eq!(
            keys(text_rows(&client, "SHOW TABLES").await.into_iter().map(|r| r[1..].to_vec()).collect()),
            ["renamed"]
        );
        assert_eq!(keys(text_rows(&other, "SELECT k FROM named ORDER BY k").await), ["1", "2"]);
        assert_eq!(error_code(&other, "SELECT * FROM renamed").await, "42P01");
        if end == "COMMIT" {
            other.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM named").await.unwrap();
        }
        client.batch_execute(end).await.unwrap();
        if end == "ROLLBACK" {
            assert!(!schema_dir.join("renamed").exists(), "a rolled-back rename leaves no directory");
            assert!(staging_dirs(&schema_dir).is_empty());
        }
    }
    assert_eq!(keys(text_rows(&other, "SELECT k FROM named ORDER BY k").await), ["1", "2"], "the block's snapshot");
    assert!(!parquet_files(&schema_dir.join("named")).is_empty(), "kept while a block may read them");
    other.batch_execute("COMMIT").await.unwrap();
    assert_eq!(keys(text_rows(&other, "SELECT k FROM renamed ORDER BY k").await), ["1", "2", "3", "4"]);
    assert_eq!(error_code(&other, "SELECT * FROM named").await, "42P01");
    let location = text_rows(&other, "DESCRIBE EXTENDED renamed").await;
    let location = location.iter().find(|row| row[0] == "Location").map(|row| row[1].clone());
    assert_eq!(location, Some(format!("file:{}", schema_dir.join("renamed").display())));
    assert_eq!(parquet_files(&schema_dir.join("renamed")).len(), 4, "one file per bucket and partition written");
    assert!(staging_dirs(&schema_dir).is_empty());
    eventually("the old directory goes", || !schema_dir.join("named").exists()).await;
    // A managed table cannot take the name of a directory the warehouse holds already.
    std::fs::create_dir_all(schema_dir.join("stray")).unwrap();
    std::fs::write(schema_dir.join("stray").join("notes.txt"), "not a table").unwrap();
    assert_eq!(error_code(&other, "ALTER TABLE renamed RENAME TO stray").await, "42710");
    assert_eq!(keys(text_rows(&other, "SELECT k FROM renamed ORDER BY k").await), ["1", "2", "3", "4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_committer_wins() {
    let server = TestServer::start();
    let warehouse = server.data_dir().join("warehouse");
    let (a, b) = (server.connect().await, server.connect().await);
    a.batch_execute(TABLES).await.unwrap();

    // Overwrite against overwrite: the second COMMIT fails and publishes nothing.
    a.batch_execute("BEGIN; INSERT OVERWRITE t VALUES (1, 'a wins')").await.unwrap();
    b.batch_execute("BEGIN; INSERT OVERWRITE t VALUES (2, 'b loses'); INSERT INTO p VALUES (1, 'x')").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(error_code(&b, "COMMIT").await, "40001");
    assert_eq!(text_rows(&a, "SELECT k, v FROM t").await, [["1", "a wins"]]);
    assert_eq!(count(&a, "p").await, 0, "nothing of the losing block is published");
    b.batch_execute("SELECT 1").await.expect("a failed COMMIT ends the block");

    // Two appends both commit.
    a.batch_execute("BEGIN; INSERT INTO t VALUES (10, 'a')").await.unwrap();
    b.batch_execute("BEGIN; INSERT INTO t VALUES (20, 'b')").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    b.batch_execute("COMMIT").await.unwrap();
    assert_eq!(text_rows(&a, "SELECT k FROM t ORDER BY k").await, [["1"], ["10"], ["20"]]);

    // An append that did not see an overwrite committed meanwhile loses to it.
    a.batch_execute("BEGIN; INSERT INTO t VALUES (30, 'a')").await.unwrap();
    b.batch_execute("INSERT OVERWRITE t VALUES (40, 'b')").await.unwrap();
    assert_eq!(error_code(&a, "COMMIT").await, "40001");
    // DDL against a write.
    a.batch_execute("BEGIN; ALTER TABLE t SET TBLPROPERTIES ('owner' = 'a')").await.unwrap();
    b.batch_execute("INSERT INTO t VALUES (50, 'b')").await.unwrap();
    assert_eq!(error_code(&a, "COMMIT").await, "40001");
    // A compaction against a rewrite; against an append it commits.
    a.batch_execute("BEGIN; OPTIMIZE t").await.unwrap();
    b.batch_execute("INSERT INTO t VALUES (60, 'b')").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    a.batch_execute("BEGIN; OPTIMIZE t").await.unwrap();
    b.batch_execute("INSERT OVERWRITE t SELECT * FROM t").await.unwrap();
    assert_eq!(error_code(&a, "COMMIT").await, "40001");
    assert_eq!(text_rows(&a, "SELECT k FROM t ORDER BY k").await, [["40"], ["50"], ["60"]]);
    assert_eq!(staging_dirs(&warehouse), Vec::<PathBuf>::new(), "losing blocks' files are deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeatable_read_reads_one_snapshot_and_read_committed_each_statements() {
    let server = TestServer::start();
    let (a, b) = (server.connect().await, server.connect().await);
    a.batch_execute(TABLES).await.unwrap();
    a.batch_execute("INSERT INTO p VALUES (0, 'x')").await.unwrap();
    let both = "SELECT (SELECT count(*) FROM t) * 100 + (SELECT count(*) FROM p)";

    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ").await.unwrap();
    assert_eq!(text_rows(&a, "SHOW transaction_isolation").await[0][1], "repeatable read");
    assert_eq!(text_rows(&a, both).await, [["101"]]);
    b.batch_execute("INSERT INTO t VALUES (1, 'b'); INSERT INTO p VALUES (1, 'y')").await.unwrap();
    assert_eq!(text_rows(&a, both).await, [["101"]], "the snapshot holds both tables as they were");
    // Files an overwrite replaces stay readable for the snapshot that lists them.
    b.batch_execute("INSERT OVERWRITE t VALUES (7, 'new')").await.unwrap();
    assert_eq!(text_rows(&a, "SELECT k, v FROM t").await, [["0", "base"]]);
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(text_rows(&a, both).await, [["102"]]);

    // READ COMMITTED, the default: each statement sees what committed before it.
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(text_rows(&a, "SHOW transaction_isolation").await[0][1], "read committed");
    b.batch_execute("INSERT INTO t VALUES (8, 'b')").await.unwrap();
    assert_eq!(text_rows(&a, both).await, [["202"]]);
    a.batch_execute("COMMIT").await.unwrap();

    // The session's default, and SET TRANSACTION before the first read.
    a.batch_execute("SET default_transaction_isolation = 'serializable'; BEGIN").await.unwrap();
    assert_eq!(text_rows(&a, "SHOW transaction_isolation").await[0][1], "serializable");
    a.batch_execute("ROLLBACK; BEGIN; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").await.unwrap();
    assert_eq!(text_rows(&a, both).await, [["202"]]);
    assert_eq!(error_code(&a, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED").await, "25001");
    a.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_stat_activity_shows_blocks_and_a_block_left_idle_too_long_ends_its_session() {
    let server = TestServer::start();
    let (a, watcher) = (server.connect().await, server.connect().await);
    a.batch_execute(TABLES).await.unwrap();
    let pid = text_rows(&a, "SELECT pg_backend_pid()").await[0][0].clone();
    let state = format!("SELECT state, xact_start IS NOT NULL FROM pg_stat_activity WHERE pid = {pid}");
    a.batch_execute("BEGIN; INSERT INTO t VALUES (1, 'a')").await.unwrap();
    assert_eq!(text_rows(&watcher, &state).await, [["idle in transaction", "t"]]);
    let _ = a.batch_execute("SELECT * FROM missing").await;
    assert_eq!(text_rows(&watcher, &state).await, [["idle in transaction (aborted)", "t"]]);
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(text_rows(&watcher, &state).await, [["idle", "f"]]);

    a.batch_execute("SET idle_in_transaction_session_timeout = '300ms'; BEGIN; INSERT INTO t VALUES (2, 'a')")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(a.batch_execute("SELECT 1").await.is_err(), "the idle block's session was not ended");
    assert_eq!(count(&watcher, "t").await, 1, "the ended session's block was not rolled back");
    let warehouse = server.data_dir().join("warehouse");
    eventually("the ended block's staged files to go", || staging_dirs(&warehouse).is_empty()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !text_rows(&watcher, &state).await.is_empty() {
        assert!(Instant::now() < deadline, "the ended session stays in pg_stat_activity");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// psql with `ON_ERROR_ROLLBACK`: a savepoint before each statement of a block, rolled back to
/// when the statement fails; COMMIT of a failed block answers ROLLBACK.
#[test]
fn psql_rolls_back_only_the_failed_statement_with_on_error_rollback() {
    let server = TestServer::start();
    let script = "CREATE TABLE t (k BIGINT) USING parquet;
        BEGIN;
        INSERT INTO t VALUES (1);
        SELECT 1 / 0;
        INSERT INTO t VALUES (2);
        COMMIT;
        SELECT k FROM t ORDER BY k;
        \\set ON_ERROR_ROLLBACK off
        BEGIN;
        INSERT INTO t VALUES (3);
        SELECT 1 / 0;
        COMMIT;
        SELECT count(*) FROM t;";
    let output = Command::new("psql")
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_ROLLBACK=on", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
        .args(["-p", &server.port.to_string()])
        .env("LC_ALL", "C.UTF-8")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(script.as_bytes())?;
            child.wait_with_output()
        })
        .expect("psql runs (it is installed by .ci/run)");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "CREATE TABLE",
            "BEGIN",
            "INSERT 0 1",
            "INSERT 0 1",
            "COMMIT",
            "1",
            "2",
            "BEGIN",
            "INSERT 0 1",
            "ROLLBACK",
            "2"
        ]
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.matches("DIVIDE_BY_ZERO").count(), 2, "{stderr}");
}

fn python_transactions(driver: &str) {
    let python = python_env("python-clients", "requirements.txt");
    let server = TestServer::start();
    run_client(
        Command::new(python).arg(clients_dir().join("transactions.py")).arg(server.port.to_string()).arg(driver),
    );
}

#[test]
fn psycopg2_rolls_back_and_recovers_from_an_error() {
    python_transactions("psycopg2");
}

#[test]
fn psycopg3_nested_transaction_rolls_back_to_its_savepoint() {
    python_transactions("psycopg3");
}

#[test]
fn asyncpg_transaction_rolls_back_on_an_exception() {
    python_transactions("asyncpg");
}

#[test]
fn sqlalchemy_session_rolls_back_and_commits() {
    python_transactions("sqlalchemy");
}

#[test]
fn pgjdbc_without_autocommit_rolls_back_pipelines_and_savepoints() {
    let server = TestServer::start();
    run_client(&mut java_client("PgJdbcTransactions", server.port));
}

/// The steps of a COMMIT at which the server can stop (see `storage::commit::publish`).
const COMMIT_STEPS: [&str; 5] =
    ["staged", "pending-recorded", "first-write-moved", "files-moved", "metastore-committed"];

/// Every parquet file under the warehouse that the metastore does not list, and whether any
/// write is recorded as pending.
fn unlisted_files(data_dir: &Path) -> (Vec<PathBuf>, i64) {
    let metastore = rusqlite::Connection::open(data_dir.join("metastore.sqlite")).unwrap();
    let mut listed = metastore
        .prepare("SELECT t.location || '/' || f.path FROM data_files f JOIN tables t ON t.id = f.table_id")
        .unwrap();
    let listed: Vec<PathBuf> =
        listed.query_map([], |row| row.get::<_, String>(0)).unwrap().map(|p| PathBuf::from(p.unwrap())).collect();
    let pending: i64 = metastore.query_row("SELECT count(*) FROM pending_files", [], |row| row.get(0)).unwrap();
    let unlisted = parquet_files(&data_dir.join("warehouse")).into_iter().filter(|f| !listed.contains(f)).collect();
    (unlisted, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_killed_at_any_step_publishes_all_of_its_block_or_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    {
        let server = TestServer::start_on(&data_dir);
        let client = server.connect().await;
        client.batch_execute(TABLES).await.unwrap();
        for round in 0..COMMIT_STEPS.len() {
            let moved = format!("CREATE TABLE moved_{round} (k BIGINT); INSERT INTO moved_{round} VALUES ({round})");
            client.batch_execute(&moved).await.unwrap();
        }
    }
    for (round, step) in COMMIT_STEPS.iter().enumerate() {
        let log_path = temp.path().join(format!("{step}.log"));
        let mut server = TestServer::start_pausing_at(&data_dir, step, std::fs::File::create(&log_path).unwrap());
        let client = server.connect().await;
        let marker = format!("round-{round}");
        client
            .batch_execute(&format!(
                "BEGIN; INSERT INTO t SELECT id, '{marker}' FROM range(100);
                 INSERT INTO p VALUES ({round}, '{marker}'); CREATE TABLE made_{round} (k BIGINT);
                 ALTER TABLE moved_{round} RENAME TO renamed_{round}"
            ))
            .await
            .unwrap();
        let commit = tokio::spawn(async move { client.batch_execute("COMMIT").await });
        eventually(&format!("the server to pause at {step}"), || {
            std::fs::read_to_string(&log_path).unwrap_or_default().contains("paused at a commit step")
        })
        .await;
        server.kill();
        assert!(commit.await.unwrap().is_err(), "the COMMIT paused at {step} was answered");

        let server = TestServer::start_on(&data_dir);
        let client = server.connect().await;
        let seen = |table: &str, column: &str| {
            let query = format!("SELECT count(*) FROM {table} WHERE {column} = '{marker}'");
            let client = &client;
            async move { text_rows(client, &query).await[0][0].parse::<i64>().unwrap() }
        };
        let published = *step == "metastore-committed";
        assert_eq!(seen("t", "v").await, if published { 100 } else { 0 }, "t after a kill at {step}");
        assert_eq!(seen("p", "d").await, i64::from(published), "p after a kill at {step}");
        let made = client.batch_execute(&format!("SELECT * FROM made_{round}")).await;
        assert_eq!(made.is_ok(), published, "the created table after a kill at {step}");
        let renamed = if published { format!("renamed_{round}") } else { format!("moved_{round}") };
        let rows = text_rows(&client, &format!("SELECT k FROM {renamed}")).await;
        assert_eq!(rows, [[round.to_string()]], "the renamed table after a kill at {step}");
        assert_eq!(unlisted_files(&data_dir), (Vec::new(), 0), "files left after a kill at {step}");
        assert_eq!(staging_dirs(&data_dir.join("warehouse")), Vec::<PathBuf>::new(), "after a kill at {step}");
    }
}

/// How long the concurrency test runs its clients.
const CONCURRENT_RUN: Duration = Duration::from_secs(60);

/// What one client of the concurrency test saw happen.
#[derive(Default)]
struct Outcomes {
    committed_keys: Vec<i64>,
    abandoned_keys: Vec<i64>,
    commits: u64,
    conflicts: u64,
}

/// Runs `block` (which leaves a block open) and COMMIT: `Ok(true)` when it committed,
/// `Ok(false)` on 40001; any other error fails the test.
async fn commit_or_conflict(client: &Client, block: &str) -> bool {
    let outcome = match client.batch_execute(block).await {
        Ok(()) => client.batch_execute("COMMIT").await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => true,
        Err(e) if sqlstate(&e) == "40001" => {
            let _ = client.batch_execute("ROLLBACK").await;
            false
        }
        Err(e) => panic!("{block}: {e:?}"),
    }
}

/// Appends blocks of keys no other client writes; every fourth block is rolled back.
async fn appender(client: Client, id: i64, isolation: &'static str, until: Instant) -> Outcomes {
    let mut outcomes = Outcomes::default();
    let mut next = id * 1_000_000;
    let mut round = 0;
    while Instant::now() < until {
        round += 1;
        let keys: Vec<i64> = (next..next + 1 + round % 3).collect();
        next += keys.len() as i64;
        let values: Vec<String> = keys.iter().map(|k| format!("({k}, {id})")).collect();
        let block = format!("BEGIN ISOLATION LEVEL {isolation}; INSERT INTO acc VALUES {}", values.join(", "));
        if round % 4 == 0 {
            client.batch_execute(&block).await.unwrap();
            client.batch_execute("ROLLBACK").await.unwrap();
            outcomes.abandoned_keys.extend(keys);
        } else if commit_or_conflict(&client, &block).await {
            outcomes.commits += 1;
            outcomes.committed_keys.extend(keys);
        } else {
            outcomes.conflicts += 1;
            outcomes.abandoned_keys.extend(keys);
        }
    }
    outcomes
}

/// Reads the generation of `gen` and overwrites it with the next one: a lost update would
/// leave the generation below the number of commits.
async fn overwriter(client: Client, until: Instant) -> Outcomes {
    let mut outcomes = Outcomes::default();
    while Instant::now() < until {
        let block = "BEGIN ISOLATION LEVEL REPEATABLE READ; INSERT OVERWRITE gen SELECT k, g + 1 FROM gen";
        if commit_or_conflict(&client, block).await {
            outcomes.commits += 1;
        } else {
            outcomes.conflicts += 1;
        }
    }
    outcomes
}

/// Reads both tables twice in each REPEATABLE READ block: the two reads must agree.
async fn snapshot_reader(client: Client, until: Instant) -> Outcomes {
    let read = "SELECT (SELECT count(*) FROM acc), (SELECT sum(g) FROM gen), (SELECT count(*) FROM gen)";
    while Instant::now() < until {
        client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ").await.unwrap();
        let first = text_rows(&client, read).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let second = text_rows(&client, read).await;
        assert_eq!(first, second, "one REPEATABLE READ block read two snapshots");
        assert_eq!(first[0][2], "3", "gen does not hold its three rows: {first:?}");
        client.batch_execute("COMMIT").await.unwrap();
    }
    Outcomes::default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_in_blocks_lose_no_row_gain_no_row_and_lose_no_update() {
    let server = TestServer::start();
    let setup = server.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE acc (k BIGINT, writer BIGINT) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS;
             CREATE TABLE gen (k BIGINT, g BIGINT) USING parquet;
             INSERT INTO gen VALUES (1, 0), (2, 0), (3, 0)",
        )
        .await
        .unwrap();
    let until = Instant::now() + CONCURRENT_RUN;
    let mut appenders = Vec::new();
    for (id, isolation) in [(1, "READ COMMITTED"), (2, "READ COMMITTED"), (3, "REPEATABLE READ"), (4, "SERIALIZABLE")] {
        appenders.push(tokio::spawn(appender(server.connect().await, id, isolation, until)));
    }
    let (mut overwriters, mut readers) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        overwriters.push(tokio::spawn(overwriter(server.connect().await, until)));
        readers.push(tokio::spawn(snapshot_reader(server.connect().await, until)));
    }
    let (mut appends, mut overwrites) = (Outcomes::default(), Outcomes::default());
    for appender in appenders {
        let outcomes = appender.await.unwrap();
        appends.committed_keys.extend(outcomes.committed_keys);
        appends.abandoned_keys.extend(outcomes.abandoned_keys);
        appends.conflicts += outcomes.conflicts;
    }
    for overwriter in overwriters {
        let outcomes = overwriter.await.unwrap();
        overwrites.commits += outcomes.commits;
        overwrites.conflicts += outcomes.conflicts;
    }
    for reader in readers {
        reader.await.unwrap();
    }

    let mut stored: Vec<i64> =
        text_rows(&setup, "SELECT k FROM acc").await.iter().map(|row| row[0].parse().unwrap()).collect();
    stored.sort();
    appends.committed_keys.sort();
    assert!(appends.committed_keys.len() > 20, "too few appends committed: {}", appends.committed_keys.len());
    assert_eq!(appends.conflicts, 0, "appends to one table conflicted");
    assert_eq!(stored, appends.committed_keys, "the committed appends, each once, and nothing else");
    assert!(appends.abandoned_keys.iter().all(|k| stored.binary_search(k).is_err()));
    // Each committed overwrite moved the generation on by one from the one it read.
    let generations = text_rows(&setup, "SELECT DISTINCT g FROM gen").await;
    assert_eq!(generations, [[overwrites.commits.to_string()]], "an overwrite was lost");
    assert!(overwrites.conflicts > 0, "two overwriters of one table never conflicted in {CONCURRENT_RUN:?}");
    assert_eq!(staging_dirs(&server.data_dir().join("warehouse")), Vec::<PathBuf>::new());
}

//! Running the server: `pg_stat_statements` over psql and across a restart, the
//! slow-statement log in both formats, and a graceful shutdown on SIGTERM.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{CO_BUCKETED_TABLES, TestServer, parquet_files, sqlstate, text_rows};

/// `sql` run by psql with unaligned, tuples-only output (`|` between columns).
fn psql(server: &TestServer, sql: &str) -> String {
    let output = Command::new("psql")
        .args(["-X", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &server.port.to_string(), "-d", "postgres", "-c", sql])
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("psql runs (it is installed by .ci/run)");
    assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The figures of the workload's statements. Exchanges and pruned buckets are Spark's plans':
/// a bucketed INSERT shuffles once into its buckets, a count(*) once into one partition, and
/// `k = 3` reads one bucket of four.
const STATEMENTS: &str = "SELECT query, calls, rows, total_exec_time > 0, min_exec_time <= max_exec_time, \
     abs(mean_exec_time * calls - total_exec_time) < 0.001, exchanges, buckets_pruned, usename \
     FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE 'CREATE%' ORDER BY query";

#[tokio::test]
async fn pg_stat_statements_counts_normalised_statements_and_keeps_them_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut server = TestServer::start_on(&data_dir);
    psql(&server, "CREATE TABLE t (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS");
    psql(&server, "INSERT INTO t SELECT id, CAST(id AS STRING) FROM range(100)");
    for k in [3, 5, 7] {
        psql(&server, &format!("SELECT v FROM t WHERE k = {k}"));
    }
    psql(&server, "SELECT count(*) FROM t WHERE v = 'x' AND k > 1.5");
    // A statement that fails is not counted, as in PostgreSQL.
    assert!(server.connect().await.simple_query("SELECT k / 0 FROM t").await.is_err());
    let expected = "\
INSERT INTO t SELECT id, CAST(id AS STRING) FROM range($1)|1|100|t|t|t|1|0|postgres
SELECT count(*) FROM t WHERE v = $1 AND k > $2|1|1|t|t|t|1|0|postgres
SELECT v FROM t WHERE k = $1|3|3|t|t|t|0|9|postgres
";
    assert_eq!(psql(&server, STATEMENTS), expected);
    // The limit is shown as PostgreSQL's setting.
    assert_eq!(psql(&server, "SHOW pg_stat_statements.max"), "pg_stat_statements.max|5000\n");

    // A graceful restart keeps the figures.
    assert!(server.terminate(Duration::from_secs(30)).expect("exits on SIGTERM").success());
    let server = TestServer::start_on(&data_dir);
    assert_eq!(psql(&server, STATEMENTS), expected);
    psql(&server, "SELECT pg_stat_statements_reset()");
    assert_eq!(psql(&server, STATEMENTS), "");
}

/// The log lines of a server that logged every statement, after it ran a join.
async fn slow_log(format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let args = ["--log-format", format, "--log-min-duration-statement", "1h"];
    let server = TestServer::start_logging(&dir.path().join("data"), &args, log);
    let client = server.connect().await;
    client.batch_execute(CO_BUCKETED_TABLES).await.unwrap();
    // The server's hour is past every statement; the session logs all of its own from here.
    assert_eq!(text_rows(&client, "SHOW log_min_duration_statement").await, [["log_min_duration_statement", "1h"]]);
    client.batch_execute("SET log_min_duration_statement = 0").await.unwrap();
    assert_eq!(text_rows(&client, "SHOW log_min_duration_statement").await, [["log_min_duration_statement", "0"]]);
    assert_eq!(text_rows(&client, "SELECT count(*) FROM a JOIN b ON a.k = b.k").await, [["1000"]]);
    // As in PostgreSQL, only statements that complete are logged.
    let refused = client.batch_execute("SET log_min_duration_statement = -2").await.unwrap_err();
    assert_eq!(sqlstate(&refused), "22023");
    client.batch_execute("SET log_min_duration_statement = -1").await.unwrap();
    text_rows(&client, "SELECT 'not logged'").await;
    // Lines are written as they happen; the last may need a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap();
        if log.contains("bytes shuffled by exchanges") || Instant::now() > deadline {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_slow_statement_log_holds_each_statement_with_its_plan_in_json_and_text() {
    let log = slow_log("json").await;
    let events: Vec<serde_json::Value> =
        log.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect();
    let slow: Vec<&serde_json::Value> = events.iter().filter(|e| e["message"] == "slow statement").collect();
    let statements: Vec<&str> = slow.iter().map(|e| e["statement"].as_str().unwrap()).collect();
    let join_sql = "SELECT count(*) FROM a JOIN b ON a.k = b.k";
    assert_eq!(statements, ["SET log_min_duration_statement = 0", "SHOW log_min_duration_statement", join_sql]);
    let join = slow[2];
    assert_eq!((join["rows"].as_u64(), join["user"].as_str()), (Some(1), Some("postgres")));
    assert!(join["duration_ms"].as_f64().unwrap() > 0.0);
    let plan = join["plan"].as_str().unwrap();
    for part in ["== Physical Plan ==", "SortMergeJoin", "== Metrics ==", "FileSourceScanExec: output rows 1000"] {
        assert!(plan.contains(part), "{part} is not in the logged plan:\n{plan}");
    }

    let text = slow_log("text").await;
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("slow statement")).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[2].contains(join_sql) && lines[2].contains("SortMergeJoin"), "{}", lines[2]);
    assert!(!text.contains("not logged"));
}

/// Rows of `t` on a server started again on `data_dir`, and the files its directory holds.
async fn rows_after_restart(data_dir: &Path) -> (i64, usize) {
    let server = TestServer::start_on(data_dir);
    let rows = text_rows(&server.connect().await, "SELECT count(*) FROM t").await[0][0].parse().unwrap();
    (rows, parquet_files(&data_dir.join("warehouse")).len())
}

#[tokio::test]
async fn sigterm_lets_a_short_insert_finish_and_cancels_a_long_one_publishing_nothing() {
    for (rows, insert_runs_past_timeout) in [(200_000i64, false), (2_000_000_000, true)] {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let mut server = TestServer::start_with_args(&data_dir, &["--shutdown-timeout", "2"]);
        let client = server.connect().await;
        client
            .batch_execute("CREATE TABLE t (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS")
            .await
            .unwrap();
        let insert = tokio::spawn(async move {
            client.batch_execute(&format!("INSERT INTO t SELECT id, id * 2 FROM range({rows})")).await
        });
        let watcher = server.connect().await;
        let active = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'INSERT%' AND state = 'active'";
        while !insert.is_finished() && text_rows(&watcher, active).await != [["1"]] {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let started = Instant::now();
        let status = server.terminate(Duration::from_secs(30)).expect("the server exits");
        assert!(status.success(), "{status}");
        // Two seconds of grace, then the cancel, which stops the write at its next batch.
        assert!(started.elapsed() < Duration::from_secs(15), "took {:?} to exit", started.elapsed());
        let inserted = insert.await.unwrap();
        assert_eq!(inserted.is_err(), insert_runs_past_timeout, "{inserted:?}");
        let (found, files) = rows_after_restart(&data_dir).await;
        if insert_runs_past_timeout {
            assert_eq!((found, files), (0, 0), "a cancelled INSERT leaves nothing");
        } else {
            assert_eq!((found, files), (rows, 8), "a finished INSERT is there whole");
        }
    }
}

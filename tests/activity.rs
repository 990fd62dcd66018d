//! `pg_stat_activity` and `pg_stat_progress_copy` seen from a second connection while the
//! first runs a long statement or streams a COPY in.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt, pin_mut};
use tokio_postgres::{Client, NoTls};

use crate::common::{TestServer, sqlstate, text_rows};

/// Runs until cancelled: `range()` counts its rows one batch at a time.
const LONG_QUERY: &str = "SELECT count(*) FROM range(5000000000)";

/// What `probe` gives once it gives something, asking again every 20 ms for up to 30 s.
async fn wait_for<T, F: Future<Output = Option<T>>>(what: &str, mut probe: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn pid(client: &Client) -> String {
    text_rows(client, "SELECT pg_backend_pid()").await[0][0].clone()
}

/// `pid`'s row of `pg_stat_activity`: state, query, and whether the statement's times are set.
async fn activity(watcher: &Client, pid: &str) -> Option<Vec<String>> {
    let sql = format!(
        "SELECT state, query, query_start IS NOT NULL, xact_start = query_start, wait_event \
         FROM pg_stat_activity WHERE pid = {pid}"
    );
    text_rows(watcher, &sql).await.pop()
}

/// `pid`'s row once its statement is over: the backend turns idle as it answers
/// ReadyForQuery, which its client may read a moment before.
async fn idle(watcher: &Client, pid: &str) -> Vec<String> {
    wait_for("the backend to turn idle", || async { activity(watcher, pid).await.filter(|row| row[0] != "active") })
        .await
}

#[tokio::test]
async fn pg_stat_activity_shows_each_connection_and_its_statement() {
    let server = TestServer::start();
    let watcher = server.connect().await;
    let (runner, connection) =
        tokio_postgres::connect(&format!("{} application_name=activity_test", server.connection_string()), NoTls)
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let runner_pid = pid(&runner).await;

    let own = "SELECT pid, state, query, usename, backend_type, datname, client_addr, client_port > 0, \
               backend_start <= now() FROM pg_stat_activity WHERE pid = pg_backend_pid()";
    let watcher_pid = pid(&watcher).await;
    assert_eq!(
        text_rows(&watcher, own).await,
        [[watcher_pid.as_str(), "active", own, "postgres", "client backend", "spark_catalog", "127.0.0.1", "t", "t"]]
    );
    let listed = text_rows(&watcher, "SELECT pid, application_name FROM pg_stat_activity ORDER BY backend_start").await;
    assert_eq!(listed, [[watcher_pid.as_str(), ""], [runner_pid.as_str(), "activity_test"]]);
    assert_eq!(idle(&watcher, &runner_pid).await, ["idle", "SELECT pg_backend_pid()", "t", "NULL", "ClientRead"]);

    let cancel = runner.cancel_token();
    let long = tokio::spawn(async move {
        let result = runner.simple_query(LONG_QUERY).await.map(drop);
        (runner, result)
    });
    let running = wait_for("the long query to show as active", || async {
        activity(&watcher, &runner_pid).await.filter(|row| row[0] == "active")
    })
    .await;
    assert_eq!(running, ["active", LONG_QUERY, "t", "t", "NULL"]);

    cancel.cancel_query(NoTls).await.unwrap();
    let (runner, result) = tokio::time::timeout(Duration::from_secs(30), long).await.expect("cancelled").unwrap();
    assert_eq!(sqlstate(&result.unwrap_err()), "57014");
    assert_eq!(idle(&watcher, &runner_pid).await, ["idle", LONG_QUERY, "t", "NULL", "ClientRead"]);

    // A transaction block shows as PostgreSQL shows it, since ReadyForQuery reports it.
    runner.batch_execute("BEGIN").await.unwrap();
    assert_eq!(idle(&watcher, &runner_pid).await[..2], ["idle in transaction", "BEGIN"]);
    runner.batch_execute("COMMIT").await.unwrap();
    assert_eq!(idle(&watcher, &runner_pid).await[..2], ["idle", "COMMIT"]);
    // A name set in the session replaces the start-up parameter, and RESET brings it back.
    let name_of = |pid: String| {
        let watcher = &watcher;
        async move { text_rows(watcher, &format!("SELECT application_name FROM pg_stat_activity WHERE pid = {pid}")).await }
    };
    runner.batch_execute("SET application_name = 'nightly load'").await.unwrap();
    assert_eq!(name_of(runner_pid.clone()).await, [["nightly load"]]);
    runner.batch_execute("SELECT set_config('application_name', 'report', false)").await.unwrap();
    assert_eq!(name_of(runner_pid.clone()).await, [["report"]]);
    runner.batch_execute("RESET application_name").await.unwrap();
    assert_eq!(name_of(runner_pid.clone()).await, [["activity_test"]]);
    // A prepared statement shows its text, as the Parse message carried it.
    runner.query("SELECT id FROM range(10) WHERE id = $1", &[&4i64]).await.unwrap();
    assert_eq!(idle(&watcher, &runner_pid).await[..2], ["idle", "SELECT id FROM range(10) WHERE id = $1"]);

    drop(runner);
    connection.await.unwrap().unwrap();
    wait_for("the closed connection to leave pg_stat_activity", || async {
        activity(&watcher, &runner_pid).await.is_none().then_some(())
    })
    .await;
    let left = text_rows(&watcher, "SELECT count(*) FROM pg_stat_activity").await;
    assert_eq!(left, [["1"]]);
}

/// `pid`'s running COPY: relid, command, type, bytes and tuples processed.
async fn copy_progress(watcher: &Client, pid: &str) -> Option<Vec<String>> {
    let sql = format!(
        "SELECT relid, command, type, bytes_processed, tuples_processed, bytes_total, tuples_excluded, datname \
         FROM pg_stat_progress_copy WHERE pid = {pid}"
    );
    text_rows(watcher, &sql).await.pop()
}

#[tokio::test]
async fn pg_stat_progress_copy_counts_a_copy_as_its_data_streams_in() {
    let server = TestServer::start();
    let watcher = server.connect().await;
    let copier = server.connect().await;
    copier.batch_execute("CREATE TABLE t (k BIGINT, v STRING) USING parquet").await.unwrap();
    let relid = text_rows(&watcher, "SELECT oid FROM pg_class WHERE relname = 't'").await[0][0].clone();
    let copier_pid = pid(&copier).await;

    let sink = copier.copy_in("COPY t FROM STDIN").await.unwrap();
    pin_mut!(sink);
    let (mut bytes, mut rows) = (0, 0);
    let mut readings = Vec::new();
    for chunk in 0..3 {
        let data: String = (0..1000).map(|i| format!("{}\tvalue {i}\n", chunk * 1000 + i)).collect();
        sink.send(Bytes::from(data.clone())).await.unwrap();
        (bytes, rows) = (bytes + data.len(), rows + 1000);
        let expected = [bytes.to_string(), rows.to_string()];
        let progress = wait_for("the COPY's counters to take in the chunk", || async {
            copy_progress(&watcher, &copier_pid).await.filter(|row| row[3..5] == expected)
        })
        .await;
        assert_eq!(
            progress,
            [relid.as_str(), "COPY FROM", "PIPE", &expected[0], &expected[1], "0", "0", "spark_catalog"]
        );
        readings.push((bytes, rows));
    }
    assert!(readings.windows(2).all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1), "{readings:?}");
    assert_eq!(sink.finish().await.unwrap(), 3000);
    wait_for("the finished COPY to leave pg_stat_progress_copy", || async {
        copy_progress(&watcher, &copier_pid).await.is_none().then_some(())
    })
    .await;
    assert_eq!(text_rows(&watcher, "SELECT count(*) FROM t").await, [["3000"]]);
}

#[tokio::test]
async fn a_copy_to_stdout_is_listed_while_its_rows_go_out() {
    let server = TestServer::start();
    let watcher = server.connect().await;
    let copier = server.connect().await;
    let copier_pid = pid(&copier).await;

    // The client reads one message and no more: the server waits on the full socket.
    let stream = copier.copy_out("COPY (SELECT * FROM range(100000000)) TO STDOUT").await.unwrap();
    pin_mut!(stream);
    assert!(stream.next().await.unwrap().unwrap().ends_with(b"\n"));
    let sending = wait_for("the COPY TO to show", || async {
        copy_progress(&watcher, &copier_pid).await.filter(|row| row[4] != "0")
    })
    .await;
    assert_eq!(sending[..3], ["0", "COPY TO", "PIPE"]);
    let (bytes, rows): (u64, u64) = (sending[3].parse().unwrap(), sending[4].parse().unwrap());
    assert!(bytes >= rows * 2 && rows < 100000000, "{sending:?}");

    copier.cancel_token().cancel_query(NoTls).await.unwrap();
    // The COPY ends with the cancel's error, as from PostgreSQL, and the connection goes on.
    let ended = loop {
        match stream.next().await {
            Some(Ok(_)) => continue,
            other => break other,
        }
    };
    match ended {
        Some(Err(error)) => assert_eq!(sqlstate(&error), "57014", "{error:?}"),
        other => panic!("the COPY ended without its cancel: {other:?}"),
    }
    wait_for("the cancelled COPY to leave pg_stat_progress_copy", || async {
        copy_progress(&watcher, &copier_pid).await.is_none().then_some(())
    })
    .await;
    assert_eq!(text_rows(&copier, "SELECT 1").await, [["1"]]);
}

//! Client input that once reached a panic (or an abort) in the server: each is refused with
//! its SQLSTATE, and the connection and the server go on.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio_postgres::types::{Format, IsNull, ToSql, Type, to_sql_checked};

use crate::common::{TestServer, sqlstate, text_rows};

/// A parameter sent in text format with whatever type the statement declares, as libpq sends
/// parameters, so that the server's own text parsers read it.
#[derive(Debug)]
struct Text(&'static str);

impl ToSql for Text {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

/// A statement nesting deeper than the server's bounds is refused with 54001 (it overflowed a
/// worker's stack, aborting the server); one just under them runs.
#[tokio::test]
async fn deep_statements_are_refused_and_shallower_ones_run() {
    let server = TestServer::start();
    let client = server.connect().await;
    let too_deep = [
        format!("SELECT {}1", "1 + ".repeat(50_000)),
        format!("SELECT 1{}", "::BIGINT".repeat(5_000)),
        format!("SELECT 1{}", " UNION ALL SELECT 1".repeat(50_000)),
        // Chains under the bound each, nested in parentheses past it.
        format!("SELECT {}", (0..6).fold("1".to_string(), |inner, _| format!("({inner}) + {}1", "1 + ".repeat(200)))),
    ];
    for sql in &too_deep {
        let err = client.simple_query(sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), "54001", "{err:?}");
        let err = client.prepare(sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), "54001", "{err:?}");
    }

    // Deeper than a default 2 MiB stack held (debug builds overflowed near 500 levels).
    let chain = format!("SELECT {}1", "1 + ".repeat(600));
    assert_eq!(text_rows(&client, &chain).await, vec![vec!["601"]]);
    client
        .batch_execute("CREATE TABLE t USING parquet CLUSTERED BY (id) INTO 4 BUCKETS AS SELECT id FROM range(2000)")
        .await
        .unwrap();
    let ors = (0..600).map(|i| format!("id = {i}")).collect::<Vec<_>>().join(" OR ");
    assert_eq!(text_rows(&client, &format!("SELECT count(*) FROM t WHERE {ors}")).await, vec![vec!["600"]]);
    let plan = text_rows(&client, &format!("EXPLAIN FORMATTED SELECT count(*) FROM t WHERE {ors}")).await;
    assert!(plan[0][0].contains("Scan parquet"), "{plan:?}");
    let unions = format!("SELECT count(*) FROM (SELECT 1 AS one{}) u", " UNION ALL SELECT 1".repeat(300));
    assert_eq!(text_rows(&client, &unions).await, vec![vec!["301"]]);
}

/// `$n` past what a Bind message can carry (its count is 16 bits) is refused; the parameter
/// list was sized by the number, so `$4000000000` asked for tens of gigabytes.
#[tokio::test]
async fn parameter_numbers_past_the_protocol_limit_are_refused() {
    let server = TestServer::start();
    let client = server.connect().await;
    for sql in ["SELECT $4000000000::BIGINT", "SELECT $65536::BIGINT"] {
        let err = client.prepare(sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), "42P02", "{sql}: {err:?}");
    }
    let row = client.query_one("SELECT 41 + 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 42);
}

/// A text timestamptz whose offset has a two-byte character where a digit was sliced off.
#[tokio::test]
async fn timestamptz_text_with_a_multibyte_offset_is_invalid_input() {
    let server = TestServer::start();
    let client = server.connect().await;
    let statement = client.prepare_typed("SELECT $1", &[Type::TIMESTAMPTZ]).await.unwrap();
    let err = client.query(&statement, &[&Text("2026-01-02 03:04:05+aé1")]).await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P02", "{err:?}");
    let rows = client.query(&statement, &[&Text("2026-01-02 03:04:05+01")]).await.unwrap();
    assert_eq!(rows.len(), 1);
}

/// `pg_size_pretty` of the smallest bigint, whose absolute value overflowed.
#[tokio::test]
async fn pg_size_pretty_takes_every_bigint() {
    let server = TestServer::start();
    let client = server.connect().await;
    let rows = text_rows(
        &client,
        "SELECT pg_size_pretty(CAST('-9223372036854775808' AS BIGINT)), pg_size_pretty(CAST('9223372036854775807' AS BIGINT))",
    )
    .await;
    assert_eq!(rows, vec![vec!["-8192 PB", "8192 PB"]]);
}

/// A result wider than PostgreSQL's 1664 columns is refused with 54011 (its column count
/// wrapped in the RowDescription's 16 bits); one at the limit is answered.
#[tokio::test]
async fn results_wider_than_1664_columns_are_refused() {
    let server = TestServer::start();
    let client = server.connect().await;
    let select = |n: usize| format!("SELECT {}", (0..n).map(|i| format!("{i} AS c{i}")).collect::<Vec<_>>().join(", "));
    let err = client.simple_query(&select(1665)).await.unwrap_err();
    assert_eq!(sqlstate(&err), "54011", "{err:?}");
    let err = client.prepare(&select(1665)).await.unwrap_err();
    assert_eq!(sqlstate(&err), "54011", "{err:?}");
    let rows = text_rows(&client, &select(1664)).await;
    assert_eq!(rows[0].len(), 1664);
    assert_eq!(rows[0][1663], "1663");
}

/// Grouping sets are bounded as PostgreSQL bounds them (54000): a CUBE of 13 elements, or
/// more than 4096 sets in one GROUP BY, is refused before any set is enumerated (a CUBE of 30
/// asked for gigabytes); a CUBE of 12 runs.
#[tokio::test]
async fn grouping_sets_past_postgres_limits_are_refused() {
    let server = TestServer::start();
    let client = server.connect().await;
    let cube = |n: usize| {
        let keys: Vec<String> = (0..n).map(|i| format!("id + {i}")).collect();
        format!("SELECT count(*) FROM range(3) GROUP BY CUBE({})", keys.join(", "))
    };
    for statement in [cube(30), cube(13), format!("{}, ROLLUP(id, id)", cube(12))] {
        let err = client.simple_query(&statement).await.unwrap_err();
        assert_eq!(sqlstate(&err), "54000", "{statement}: {err:?}");
    }
    // The empty set is one group; each of the 4095 others groups the three ids apart.
    let counted = text_rows(&client, &format!("SELECT count(*) FROM ({}) sets", cube(12))).await;
    assert_eq!(counted, vec![vec![(1 + 4095 * 3).to_string()]]);
}

/// Strings sized by a client's numbers are bounded before they are built: past 1 GB with
/// PostgreSQL's 54000, past what `--memory-limit` leaves with 53200; smaller ones are built,
/// and the server's memory stays near its limit.
#[tokio::test]
async fn repeat_and_pad_lengths_are_bounded() {
    let server = TestServer::start_fresh(&["--memory-limit", "256MiB"]);
    let client = server.connect().await;
    for (statement, code) in [
        ("SELECT lpad('x', 2147483647, 'y')", "54000"),
        ("SELECT rpad('x', 2000000000)", "54000"),
        ("SELECT repeat('ab', 600000000)", "54000"),
        ("SELECT length(repeat('x', 1000000000))", "53200"),
        ("SELECT max(length(repeat('x', CAST(id AS INT) * 1000))) FROM range(30000)", "53200"),
    ] {
        let err = client.simple_query(statement).await.unwrap_err();
        assert_eq!(sqlstate(&err), code, "{statement}: {err:?}");
    }
    let rows = text_rows(
        &client,
        "SELECT length(repeat('ab', 1000)), lpad('x', 5, 'é'), rpad('abcdef', 3), length(lpad('', 1000000, 'xy'))",
    )
    .await;
    assert_eq!(rows, vec![vec!["2000", "ééééx", "abc", "1000000"]]);
    let peak = server.peak_memory();
    assert!(peak < 768 << 20, "the server peaked at {} MiB", peak >> 20);
}

/// How a statement reaches the server.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    /// A Query message: parsed, planned and run.
    Simple,
    /// A Parse message only (a driver's prepare): parsed and planned.
    Prepare,
}

/// Runs `statement` under `statement_timeout = timeout` on one connection of a fresh server;
/// after `settle`, another client's `SELECT 1` is answered within 3 s, `probes` times over,
/// while it runs; then the statement fails with 57014 within `bound_secs` of its start.
async fn times_out_and_stalls_no_one(
    protocol: Protocol,
    statement: String,
    timeout: &str,
    settle: Duration,
    probes: usize,
    bound_secs: u64,
) {
    let server = TestServer::start();
    let long = server.connect().await;
    long.batch_execute(&format!("SET statement_timeout = '{timeout}'")).await.unwrap();
    let started = Instant::now();
    let running = tokio::spawn(async move {
        match protocol {
            Protocol::Simple => long.simple_query(&statement).await.map(drop),
            Protocol::Prepare => long.prepare(&statement).await.map(drop),
        }
    });
    tokio::time::sleep(settle).await;
    let other = server.connect().await;
    for _ in 0..probes {
        let asked = Instant::now();
        assert_eq!(text_rows(&other, "SELECT 1").await, vec![vec!["1"]]);
        assert!(asked.elapsed().as_secs() < 3, "SELECT 1 waited {:?} behind the statement", asked.elapsed());
    }
    let err = running.await.unwrap().unwrap_err();
    assert_eq!(sqlstate(&err), "57014", "{protocol:?}: {err:?}");
    assert!(started.elapsed().as_secs() < bound_secs, "the timeout came after {:?}", started.elapsed());
}

/// Planning runs off the threads that serve connections: while a very wide statement plans
/// (seconds), other clients are answered at once, and `statement_timeout` stops the wait for
/// it (the width check after planning would otherwise answer 54011), in a Query message and
/// in a Parse message alike.
#[tokio::test]
async fn a_statement_that_plans_for_long_stalls_no_one_and_meets_its_timeout() {
    let wide = format!("SELECT {}", (0..8000).map(|i| format!("{i} AS c{i}")).collect::<Vec<_>>().join(", "));
    for protocol in [Protocol::Simple, Protocol::Prepare] {
        times_out_and_stalls_no_one(protocol, wide.clone(), "1s", Duration::ZERO, 5, 8).await;
    }
}

/// A planning abandoned at its statement's timeout stops soon after. A thousand-term sum that
/// overflows plans for minutes in a debug build; sent four times under a 1 s timeout, its
/// plannings would hold every planner place, and the next statement (from a client without a
/// timeout) would wait for one.
#[tokio::test]
async fn plannings_abandoned_at_their_timeout_stop_and_hold_no_planner_place() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("SET statement_timeout = '1s'").await.unwrap();
    let overflowing = format!("SELECT 2147483647{}", " + 1".repeat(990));
    for _ in 0..4 {
        let err = client.simple_query(&overflowing).await.unwrap_err();
        assert!(["57014", "22003"].contains(&sqlstate(&err).as_str()), "{err:?}");
    }
    let fresh = server.connect().await;
    let asked = Instant::now();
    assert_eq!(text_rows(&fresh, "SELECT 1").await, vec![vec!["1"]]);
    assert!(asked.elapsed().as_secs() < 10, "SELECT 1 waited {:?} for a planner place", asked.elapsed());
}

/// Queries run apart from the threads that serve connections: a cartesian product of thirty
/// small relations, whose operators compute for long between yields, meets its
/// `statement_timeout`, and other clients are answered while it runs.
#[tokio::test]
async fn a_runaway_cross_join_meets_its_timeout_and_stalls_no_one() {
    let relations: Vec<String> = (0..30).map(|i| format!("range(10) t{i}")).collect();
    let product = format!("SELECT count(*) FROM {}", relations.join(", "));
    times_out_and_stalls_no_one(Protocol::Simple, product, "2s", Duration::from_millis(500), 3, 10).await;
}

//! The PostgreSQL protocol as clients meet it: simple and extended query, text and binary
//! results, command tags, SQLSTATEs, sessions and concurrency.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::types::Type;

use crate::common::{TestServer, sqlstate, text_rows};

#[tokio::test]
async fn create_insert_select_and_restart_keeps_the_rows() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    {
        let server = TestServer::start_on(&data_dir);
        let client = server.connect().await;
        client
            .batch_execute("CREATE TABLE t (a BIGINT, s STRING) USING parquet; INSERT INTO t VALUES (1,'x'),(2,'y');")
            .await
            .unwrap();
        assert_eq!(text_rows(&client, "SELECT * FROM t ORDER BY a").await, vec![vec!["1", "x"], vec!["2", "y"]]);
    }
    let server = TestServer::start_on(&data_dir);
    let client = server.connect().await;
    assert_eq!(text_rows(&client, "SELECT count(*) FROM t").await, vec![vec!["2"]]);
    assert!(data_dir.join("metastore.sqlite").exists());
    let table_dir = data_dir.join("warehouse/default/t");
    let parquet_files = std::fs::read_dir(&table_dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".snappy.parquet"))
        .count();
    assert_eq!(parquet_files, 1, "one INSERT of a VALUES list writes one file");
}

#[tokio::test]
async fn command_tags_match_postgres() {
    let server = TestServer::start();
    let client = server.connect().await;
    let tags = |messages: Vec<SimpleQueryMessage>| -> Vec<u64> {
        messages
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::CommandComplete(n) => Some(n),
                _ => None,
            })
            .collect()
    };
    let created = client.simple_query("CREATE TABLE t (a INT)").await.unwrap();
    assert_eq!(tags(created), vec![0]);
    let inserted = client.simple_query("INSERT INTO t VALUES (1), (2), (3)").await.unwrap();
    assert_eq!(tags(inserted), vec![3]);
    assert_eq!(client.execute("INSERT INTO t SELECT a + 10 FROM t", &[]).await.unwrap(), 3);
    assert_eq!(client.execute("SELECT * FROM t", &[]).await.unwrap(), 6);
    assert_eq!(client.execute("INSERT OVERWRITE TABLE t SELECT 7", &[]).await.unwrap(), 1);
    assert_eq!(text_rows(&client, "SELECT a FROM t").await, vec![vec!["7"]]);
    let set = client.simple_query("SET spark.sql.shuffle.partitions = 8").await.unwrap();
    assert_eq!(tags(set), vec![0]);
    let dropped = client.simple_query("DROP TABLE t").await.unwrap();
    assert_eq!(tags(dropped), vec![0]);
}

#[tokio::test]
async fn errors_carry_sqlstates_and_the_connection_goes_on() {
    let server = TestServer::start();
    let client = server.connect().await;
    let cases = [
        ("SELECT * FROM nope", "42P01"),
        ("SELEC 1", "42601"),
        ("SELECT nope FROM (SELECT 1 AS a) s", "42703"),
        ("SELECT 1 / 0", "22012"),
        ("CREATE TABLE t (a INT) USING csv", "0A000"),
        ("CREATE TABLE t (a DECIMAL(50, 2))", "22023"),
        ("SELECT 'a' ~ '('", "2201B"),
        ("SELECT id, count(*) FROM range(3)", "42803"),
        ("SELECT count(*) FROM range(3) WHERE id IN (true, 'a', 1.5)", "42804"),
        ("SELECT 'a' RLIKE '[z-a]'", "2201B"),
        ("SELECT regexp_replace('a', '(', 'b')", "2201B"),
        ("SELECT count(*) FROM range(3) WHERE CAST(id AS STRING) ~ '('", "2201B"),
    ];
    for (sql, state) in cases {
        let err = client.simple_query(sql).await.expect_err(sql);
        assert_eq!(sqlstate(&err), state, "{sql}: {err:?}");
        assert_eq!(text_rows(&client, "SELECT 1").await, vec![vec!["1"]], "after {sql}");
    }
    client.batch_execute("CREATE TABLE t (a INT)").await.unwrap();
    let err = client.batch_execute("CREATE TABLE t (a INT)").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P07");
    client.batch_execute("CREATE TABLE IF NOT EXISTS t (a INT)").await.unwrap();
    // The extended protocol recovers too: the failed Parse is skipped up to Sync.
    let err = client.query("SELECT * FROM nope WHERE a = $1", &[&1i32]).await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01");
    let one: i64 = client.query_one("SELECT 1::BIGINT", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}

/// Spark's clauses for how a query's rows are spread over partitions are refused in words,
/// with the connection still usable.
#[tokio::test]
async fn spark_partitioning_clauses_are_refused_as_unsupported_features() {
    let server = TestServer::start();
    let client = server.connect().await;
    for clause in ["DISTRIBUTE BY", "SORT BY", "CLUSTER BY"] {
        let sql = format!("SELECT id FROM range(10) {clause} id");
        let err = client.simple_query(&sql).await.expect_err(&sql);
        let refused = err.as_db_error().map(|e| (e.code().code(), e.message()));
        assert_eq!(refused, Some(("0A000", format!("{clause} is not supported").as_str())), "{sql}");
        assert_eq!(text_rows(&client, "SELECT 1").await, vec![vec!["1"]], "after {sql}");
    }
}

#[tokio::test]
async fn a_failing_statement_stops_the_rest_of_a_simple_query() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (a INT)").await.unwrap();
    let err = client.batch_execute("INSERT INTO t VALUES (1); SELECT * FROM nope; INSERT INTO t VALUES (2)").await;
    assert_eq!(sqlstate(&err.unwrap_err()), "42P01");
    assert_eq!(text_rows(&client, "SELECT a FROM t").await, vec![vec!["1"]]);
}

#[tokio::test]
async fn parameters_and_binary_results() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE t (a BIGINT, s STRING); INSERT INTO t VALUES (1,'x'),(2,'y'),(3,NULL)")
        .await
        .unwrap();
    let statement = client.prepare("SELECT a, s FROM t WHERE a = $1").await.unwrap();
    assert_eq!(statement.params(), &[Type::INT8]);
    assert_eq!(statement.columns()[0].type_(), &Type::INT8);
    assert_eq!(statement.columns()[1].type_(), &Type::TEXT);
    let row = client.query_one(&statement, &[&2i64]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    assert_eq!(row.get::<_, &str>(1), "y");
    // A prepared statement reads the table as it is when executed, not when prepared.
    client.batch_execute("INSERT INTO t VALUES (2, 'z')").await.unwrap();
    assert_eq!(client.query(&statement, &[&2i64]).await.unwrap().len(), 2);
    let nulls = client.query("SELECT s FROM t WHERE a = $1", &[&3i64]).await.unwrap();
    assert_eq!(nulls[0].get::<_, Option<&str>>(0), None);

    client.execute("INSERT INTO t VALUES ($1, $2)", &[&10i64, &"ten"]).await.unwrap();
    let s: String = client.query_one("SELECT s FROM t WHERE a = $1", &[&10i64]).await.unwrap().get(0);
    assert_eq!(s, "ten");
}

#[tokio::test]
async fn every_result_type_in_text_and_binary() {
    let server = TestServer::start();
    let client = server.connect().await;
    let sql = "SELECT true AS b, CAST(2 AS SMALLINT) AS i2, CAST(3 AS INT) AS i4, CAST(4 AS BIGINT) AS i8, \
               CAST(1.5 AS FLOAT) AS f4, CAST(2.25 AS DOUBLE) AS f8, CAST(12.30 AS DECIMAL(10,2)) AS n, \
               'hé' AS t, DATE '2026-01-02' AS d, TIMESTAMP '2026-01-02 03:04:05.5' AS ts, \
               X'0102ff' AS bin, TIMESTAMP_NTZ '2026-01-02 03:04:05.5' AS ntz";
    let text = text_rows(&client, sql).await;
    assert_eq!(
        text,
        vec![vec![
            "t",
            "2",
            "3",
            "4",
            "1.5",
            "2.25",
            "12.30",
            "hé",
            "2026-01-02",
            "2026-01-02 03:04:05.5+00",
            "\\x0102ff",
            "2026-01-02 03:04:05.5"
        ]]
    );
    let row = client.query_one(sql, &[]).await.unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, i16>(1), 2);
    assert_eq!(row.get::<_, i32>(2), 3);
    assert_eq!(row.get::<_, i64>(3), 4);
    assert_eq!(row.get::<_, f32>(4), 1.5);
    assert_eq!(row.get::<_, f64>(5), 2.25);
    assert_eq!(row.columns()[6].type_(), &Type::NUMERIC);
    assert_eq!(row.get::<_, &str>(7), "hé");
    assert_eq!(row.get::<_, NaiveDate>(8), NaiveDate::from_ymd_opt(2026, 1, 2).unwrap());
    // Spark's TIMESTAMP is in the session's time zone (UTC), its TIMESTAMP_NTZ in none.
    let ts = NaiveDateTime::parse_from_str("2026-01-02 03:04:05.5", "%Y-%m-%d %H:%M:%S%.f").unwrap();
    assert_eq!(row.get::<_, DateTime<Utc>>(9), ts.and_utc());
    assert_eq!(row.get::<_, Vec<u8>>(10), vec![1, 2, 255]);
    assert_eq!(row.get::<_, NaiveDateTime>(11), ts);

    client
        .batch_execute("CREATE TABLE z (ts TIMESTAMP); INSERT INTO z VALUES (TIMESTAMP '2026-01-02 03:04:05')")
        .await
        .unwrap();
    let row = client.query_one("SELECT ts FROM z", &[]).await.unwrap();
    assert_eq!(row.columns()[0].type_(), &Type::TIMESTAMPTZ);
    let expected: DateTime<Utc> = ts.and_utc() - chrono::Duration::milliseconds(500);
    assert_eq!(row.get::<_, DateTime<Utc>>(0), expected);
}

#[tokio::test]
async fn spark_sql_functions_and_range() {
    let server = TestServer::start();
    let client = server.connect().await;
    let rows = text_rows(
        &client,
        "SELECT CAST(42 AS STRING), date_add(DATE '2026-01-01', 3), pmod(-7, 3), concat_ws('-', 'a', 'b')",
    )
    .await;
    assert_eq!(rows, vec![vec!["42", "2026-01-04", "2", "a-b"]]);
    assert_eq!(
        text_rows(&client, "SELECT count(*), sum(id), min(id), max(id) FROM range(1000)").await,
        vec![vec!["1000", "499500", "0", "999"]]
    );
    assert_eq!(
        text_rows(&client, "SELECT id FROM range(10, 0, -4) ORDER BY id").await,
        vec![vec!["2"], vec!["6"], vec!["10"]]
    );
    assert_eq!(text_rows(&client, "SELECT count(*) FROM generate_series(1, 5)").await, vec![vec!["5"]]);
}

#[tokio::test]
async fn sessions_are_separate_and_many_run_at_once() {
    let server = TestServer::start();
    let first = server.connect().await;
    let second = server.connect().await;
    first.batch_execute("SET spark.sql.shuffle.partitions = 7").await.unwrap();
    assert_eq!(text_rows(&first, "SHOW spark.sql.shuffle.partitions").await[0][1], "7");
    assert_eq!(
        text_rows(&second, "SHOW spark.sql.shuffle.partitions").await[0][1],
        "200",
        "the other session keeps the default"
    );
    let read_back =
        "SELECT current_setting('spark.sql.shuffle.partitions'), current_setting('spark.sql.adaptive.enabled')";
    assert_eq!(text_rows(&first, read_back).await, vec![vec!["7", "true"]], "current_setting reads SET and defaults");
    assert_eq!(text_rows(&second, read_back).await, vec![vec!["200", "true"]]);

    first.batch_execute("CREATE TABLE c (id BIGINT)").await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16i64 {
        let client = server.connect().await;
        tasks.push(tokio::spawn(async move {
            client.execute("INSERT INTO c VALUES ($1)", &[&i]).await.unwrap();
            client.query_one("SELECT count(*) FROM c", &[]).await.unwrap().get::<_, i64>(0)
        }));
    }
    for task in tasks {
        let seen = task.await.unwrap();
        assert!((1..=16).contains(&seen), "{seen}");
    }
    assert_eq!(text_rows(&first, "SELECT count(*), sum(id) FROM c").await, vec![vec!["16", "120"]]);
}

/// `SET key` without a value shows the setting; prepared, it describes the row it returns.
#[tokio::test]
async fn a_prepared_set_without_a_value_describes_its_row() {
    let server = TestServer::start();
    let client = server.connect().await;
    for expected in ["200", "7"] {
        let rows = client.query("SET spark.sql.shuffle.partitions", &[]).await.unwrap();
        let columns: Vec<&str> = rows[0].columns().iter().map(|c| c.name()).collect();
        assert_eq!(columns, ["key", "value"]);
        let row: Vec<String> = (0..2).map(|i| rows[0].get(i)).collect();
        assert_eq!(row, ["spark.sql.shuffle.partitions", expected]);
        client.batch_execute("SET spark.sql.shuffle.partitions = 7").await.unwrap();
    }
}

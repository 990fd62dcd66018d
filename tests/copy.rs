//! COPY FROM STDIN and COPY TO STDOUT through tokio-postgres and psql: formats, options,
//! table layouts, a bad line loading nothing, and a COPY larger than the server's memory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bucketsql::storage::bucket_hash::bucket_ids;
use bucketsql::storage::file_naming::bucket_id_of;
use bytes::Bytes;
use datafusion::arrow::array::{Array, ArrayRef, Int64Array};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::{SinkExt, TryStreamExt, pin_mut};
use tokio_postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

use crate::common::{TestServer, parquet_files, sqlstate, text_rows};

pub async fn copy_in(client: &Client, sql: &str, data: &str) -> Result<u64, tokio_postgres::Error> {
    let sink = client.copy_in(sql).await?;
    pin_mut!(sink);
    sink.send(Bytes::copy_from_slice(data.as_bytes())).await?;
    sink.finish().await
}

async fn copy_out(client: &Client, sql: &str) -> String {
    let stream = client.copy_out(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let chunks: Vec<Bytes> = stream.try_collect().await.unwrap();
    String::from_utf8(chunks.concat()).unwrap()
}

const PEOPLE: &str = "CREATE TABLE people (id BIGINT, name STRING, score DOUBLE, born DATE, seen TIMESTAMP, ok BOOLEAN, amount DECIMAL(10,2)) USING parquet";

#[tokio::test]
async fn text_format_round_trips() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(PEOPLE).await.unwrap();
    let data = "1\tAnn\t1.5\t2000-01-02\t2024-01-02 03:04:05+00\tt\t12.34\n\
                2\ttab\\there\\\\x\t\\N\t\\N\t\\N\tf\t-0.50\n\
                3\tline\\nbreak\t-2\t1999-12-31\t2024-06-30 23:59:59.123456+00\t\\N\t\\N\n";
    assert_eq!(copy_in(&client, "COPY people FROM STDIN", data).await.unwrap(), 3);
    assert_eq!(
        text_rows(&client, "SELECT id, name, score, ok FROM people ORDER BY id").await,
        vec![
            vec!["1", "Ann", "1.5", "t"],
            vec!["2", "tab\there\\x", "NULL", "f"],
            vec!["3", "line\nbreak", "-2", "NULL"]
        ]
    );
    assert_eq!(copy_out(&client, "COPY (SELECT * FROM people ORDER BY id) TO STDOUT").await, data);
    // A custom delimiter and NULL string, and the `\.` end marker.
    let piped =
        copy_out(&client, "COPY (SELECT id, score FROM people ORDER BY id) TO STDOUT (DELIMITER '|', NULL '')").await;
    assert_eq!(piped, "1|1.5\n2|\n3|-2\n");
    copy_in(&client, "COPY people (score, id) FROM STDIN WITH (DELIMITER '|', NULL '')", "9.5|4\n|5\n\\.\n")
        .await
        .unwrap();
    assert_eq!(
        text_rows(&client, "SELECT id, score, name FROM people WHERE id > 3 ORDER BY id").await,
        vec![vec!["4", "9.5", "NULL"], vec!["5", "NULL", "NULL"]]
    );
}

#[tokio::test]
async fn csv_format_with_header_delimiter_and_null() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(PEOPLE).await.unwrap();
    let data = "id;name;amount\n10;\"Smith; \"\"Jr\"\"\";NA\n11;;1.00\n12;\"multi\nline\";2.5\n";
    let sql = "COPY people (id, name, amount) FROM STDIN WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NA')";
    assert_eq!(copy_in(&client, sql, data).await.unwrap(), 3);
    assert_eq!(
        text_rows(&client, "SELECT id, name, amount, score FROM people ORDER BY id").await,
        vec![
            vec!["10", "Smith; \"Jr\"", "NULL", "NULL"],
            vec!["11", "", "1.00", "NULL"],
            vec!["12", "multi\nline", "2.50", "NULL"]
        ]
    );
    let out =
        copy_out(&client, "COPY (SELECT id, name, amount FROM people ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)")
            .await;
    assert_eq!(out, "id,name,amount\n10,\"Smith; \"\"Jr\"\"\",\n11,\"\",1.00\n12,\"multi\nline\",2.50\n");
    // The legacy spelling drivers and psql send.
    copy_in(&client, "COPY people (id, name) FROM STDIN WITH CSV HEADER", "id,name\n13,\n").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT name IS NULL FROM people WHERE id = 13").await, vec![vec!["t"]]);
    let out = copy_out(&client, "COPY people (id, name) TO STDOUT DELIMITER '|' CSV").await;
    assert!(out.contains("13|\n") && out.contains("12|\"multi\nline\"\n"), "{out}");
}

#[tokio::test]
async fn binary_format_round_trips() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE nums (k BIGINT, s STRING, x DOUBLE, b BOOLEAN) USING parquet").await.unwrap();
    let sink = client.copy_in("COPY nums FROM STDIN (FORMAT binary)").await.unwrap();
    let types = [Type::INT8, Type::TEXT, Type::FLOAT8, Type::BOOL];
    let writer = BinaryCopyInWriter::new(sink, &types);
    pin_mut!(writer);
    writer.as_mut().write(&[&1i64, &"one", &0.25f64, &true]).await.unwrap();
    writer.as_mut().write(&[&2i64, &None::<&str>, &-1e300f64, &None::<bool>]).await.unwrap();
    assert_eq!(writer.finish().await.unwrap(), 2);
    let stream = client.copy_out("COPY (SELECT * FROM nums ORDER BY k) TO STDOUT WITH (FORMAT binary)").await.unwrap();
    let rows: Vec<_> = BinaryCopyOutStream::new(stream, &types).try_collect().await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].get::<i64>(0), rows[0].get::<&str>(1), rows[0].get::<f64>(2)), (1, "one", 0.25));
    assert_eq!(
        (rows[1].get::<Option<&str>>(1), rows[1].get::<f64>(2), rows[1].get::<Option<bool>>(3)),
        (None, -1e300, None)
    );
}

/// Asserts every file holds only rows of the bucket its name gives; returns the file count.
fn assert_bucketed(dir: &Path, key: &str, buckets: u32) -> usize {
    let files = parquet_files(dir);
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let bucket = bucket_id_of(&name).unwrap_or_else(|| panic!("{name} names no bucket"));
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap()).unwrap().build().unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let keys: ArrayRef = batch.column_by_name(key).unwrap().clone();
            assert!(keys.as_any().downcast_ref::<Int64Array>().is_some());
            let ids = bucket_ids(&[Arc::clone(&keys)], keys.len(), buckets).unwrap();
            assert!(ids.iter().all(|id| *id == bucket), "{name} holds rows of other buckets");
        }
    }
    files.len()
}

#[tokio::test]
async fn copy_keeps_bucketed_and_partitioned_layouts() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE b (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS;
             CREATE TABLE p (k BIGINT, d DATE) USING parquet PARTITIONED BY (d)",
        )
        .await
        .unwrap();
    let data: String = (0..1000).map(|k| format!("{k}\tv{k}\n")).collect();
    assert_eq!(copy_in(&client, "COPY b FROM STDIN", &data).await.unwrap(), 1000);
    let dir = server.data_dir().join("warehouse/default/b");
    assert_eq!(assert_bucketed(&dir, "k", 4), 4, "one file per bucket");
    copy_in(&client, "COPY b (k) FROM STDIN", "5000\n5001\n").await.unwrap();
    assert!(assert_bucketed(&dir, "k", 4) <= 6);
    assert_eq!(text_rows(&client, "SELECT count(*), count(v) FROM b").await, vec![vec!["1002", "1000"]]);
    assert_eq!(text_rows(&client, "SELECT count(*) FROM b WHERE k = 5001").await, vec![vec!["1"]]);

    let data = "k,d\n1,2026-01-01\n2,2026-01-02\n3,2026-01-01\n";
    assert_eq!(copy_in(&client, "COPY p FROM STDIN CSV HEADER", data).await.unwrap(), 3);
    let dir = server.data_dir().join("warehouse/default/p");
    assert_eq!(parquet_files(&dir.join("d=2026-01-01")).len(), 1);
    assert_eq!(parquet_files(&dir.join("d=2026-01-02")).len(), 1);
    assert_eq!(
        text_rows(&client, "SELECT d, count(*) FROM p GROUP BY d ORDER BY d").await,
        vec![vec!["2026-01-01", "2"], vec!["2026-01-02", "1"]]
    );
}

#[tokio::test]
async fn a_bad_line_fails_the_copy_and_loads_nothing() {
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE t (k BIGINT, v STRING) USING parquet; INSERT INTO t VALUES (1, 'a')")
        .await
        .unwrap();
    let count = || async { text_rows(&client, "SELECT count(*) FROM t").await };

    let err = copy_in(&client, "COPY t FROM STDIN", "2\tb\n3\tc\nfour\td\n5\te\n").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P02");
    let message = err.as_db_error().unwrap().message();
    assert!(message.contains("line 3") && message.contains("four"), "{message}");
    assert_eq!(count().await, vec![vec!["1"]]);

    let err = copy_in(&client, "COPY t FROM STDIN (FORMAT csv, HEADER)", "k,v\n2,b\n3\n").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P04");
    assert!(err.as_db_error().unwrap().message().contains("line 3"), "{err:?}");
    let err = copy_in(&client, "COPY t FROM STDIN", "2\tb\textra\n").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P04");
    let err = copy_in(&client, "COPY t FROM STDIN CSV", "2,\"open\n").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P04");
    assert_eq!(count().await, vec![vec!["1"]]);

    // Planning errors come before the COPY starts, and the connection stays usable.
    let err = client.copy_out("COPY (SELECT nope FROM t) TO STDOUT").await.err().unwrap();
    assert_eq!(sqlstate(&err), "42703");
    let err = client.batch_execute("COPY missing FROM STDIN").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01");
    let err = client.batch_execute("COPY t FROM '/etc/passwd'").await.unwrap_err();
    assert_eq!(sqlstate(&err), "0A000");
    assert_eq!(count().await, vec![vec!["1"]]);
}

#[tokio::test]
async fn copy_query_to_stdout() {
    let server = TestServer::start();
    let client = server.connect().await;
    let out = copy_out(
        &client,
        "COPY (SELECT id * 2 AS x, CASE WHEN id = 1 THEN NULL ELSE 'a\tb' END AS s FROM range(3) ORDER BY x) TO STDOUT",
    )
    .await;
    assert_eq!(out, "0\ta\\tb\n2\t\\N\n4\ta\\tb\n");
    let out = copy_out(&client, "COPY (SELECT 1 AS one WHERE false) TO STDOUT (FORMAT csv, HEADER)").await;
    assert_eq!(out, "one\n");
}

#[tokio::test]
async fn psql_copy_both_directions() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (k BIGINT, v STRING) USING parquet").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.csv");
    std::fs::write(&input, "k,v\n1,one\n2,\"t,wo\"\n3,\n").unwrap();
    let psql = |command: String| {
        let output = Command::new("psql")
            .args([
                "-X",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                &server.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
            ])
            .arg(&command)
            .output()
            .expect("psql runs");
        assert!(output.status.success(), "{command}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(psql(format!("\\copy t FROM '{}' CSV HEADER", input.display())).trim(), "COPY 3");
    let output = dir.path().join("out.csv");
    let tag = psql(format!("\\copy (SELECT * FROM t ORDER BY k) TO '{}' CSV HEADER", output.display()));
    assert_eq!(tag.trim(), "COPY 3");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "k,v\n1,one\n2,\"t,wo\"\n3,\n");
    let text = dir.path().join("out.txt");
    psql(format!("\\copy t TO '{}'", text.display()));
    let mut lines: Vec<String> = std::fs::read_to_string(&text).unwrap().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, vec!["1\tone", "2\tt,wo", "3\t\\N"]);
    let more = dir.path().join("more.txt");
    std::fs::write(&more, "4\tfour\n5\t\\N\n").unwrap();
    assert_eq!(psql(format!("\\copy t FROM '{}'", more.display())).trim(), "COPY 2");
    assert_eq!(text_rows(&client, "SELECT count(*), count(v) FROM t").await, vec![vec!["5", "3"]]);
}

/// A CSV row of the large COPY: its key, a quoted payload of 82 to 101 bytes (with a comma),
/// and its partition.
fn event_row(k: u64) -> String {
    format!("{k},\"payload, {k:>12} {}\",{}\n", "x".repeat(60 + (k % 20) as usize), k % 4)
}

/// Sends `rows` of [`event_row`] to `COPY table FROM STDIN` in messages of about 1 MiB;
/// returns the bytes sent.
async fn copy_events(client: &Client, table: &str, rows: u64) -> u64 {
    let sink = client.copy_in(&format!("COPY {table} FROM STDIN (FORMAT csv)")).await.unwrap();
    pin_mut!(sink);
    let mut sent = 0;
    let mut message = String::new();
    for k in 0..rows {
        message.push_str(&event_row(k));
        if message.len() >= 1 << 20 || k == rows - 1 {
            sent += message.len() as u64;
            sink.send(Bytes::from(std::mem::take(&mut message))).await.unwrap();
        }
    }
    assert_eq!(sink.finish().await.unwrap(), rows);
    sent
}

/// A COPY several times `--memory-limit` streams into a bucketed, partitioned table: rows are
/// parsed, sorted (spilling) and written while they arrive, so every row lands and the COPY
/// costs no more memory than the table write itself. That cost (the memory pool, the buffers
/// outside it, the allocator's arenas; some 90 MiB over an idle server, whatever the size) is
/// measured first by an `INSERT … SELECT` of the same rows; the COPY may add at most half its
/// own size to that peak, whereas holding it whole would add its bytes and its Arrow batches,
/// well over its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_larger_than_memory_streams_into_the_table() {
    const ROWS: u64 = 1_600_000;
    let server = TestServer::start_fresh(&["--memory-limit", "64MiB"]);
    let client = server.connect().await;
    for table in ["inserted", "events"] {
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (k BIGINT, payload STRING, day INT) USING parquet
                 PARTITIONED BY (day) CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS"
            ))
            .await
            .unwrap();
    }
    let idle = server.peak_memory();
    let payload = "concat('payload, ', lpad(CAST(id AS STRING), 12, ' '), ' ', repeat('x', 60 + CAST(id % 20 AS INT)))";
    let insert = format!("INSERT INTO inserted SELECT id, {payload}, CAST(id % 4 AS INT) FROM range({ROWS})");
    client.batch_execute(&insert).await.unwrap();
    let inserted = server.peak_memory();
    let sent = copy_events(&client, "events", ROWS).await;
    let peak = server.peak_memory();
    eprintln!(
        "peak resident memory: idle {} MiB, after the INSERT {} MiB, after the COPY of {} MiB {} MiB",
        idle >> 20,
        inserted >> 20,
        sent >> 20,
        peak >> 20
    );

    let payload_bytes: u64 = (0..ROWS).map(|k| 82 + k % 20).sum();
    assert_eq!(
        text_rows(&client, "SELECT count(*), sum(k), sum(length(payload)), count(DISTINCT day) FROM events").await,
        vec![vec![ROWS.to_string(), (ROWS * (ROWS - 1) / 2).to_string(), payload_bytes.to_string(), "4".to_string()]]
    );
    assert_eq!(
        text_rows(&client, "SELECT count(*) FROM events WHERE day = 3 AND k % 4 = 3").await,
        vec![vec![(ROWS / 4).to_string()]]
    );
    let dir = server.data_dir().join("warehouse/default/events");
    for day in 0..4 {
        assert_eq!(assert_bucketed(&dir.join(format!("day={day}")), "k", 8), 8, "one file per bucket and partition");
    }
    assert!(
        peak < inserted + sent / 2,
        "peak resident memory {} MiB after a COPY of {} MiB, {} MiB after inserting the same rows",
        peak >> 20,
        sent >> 20,
        inserted >> 20
    );
}

/// Every file and directory below `dir`, relative to it.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        found.push(path.strip_prefix(dir).unwrap().to_path_buf());
        if path.is_dir() {
            found.extend(tree(&path).into_iter().map(|p| path.strip_prefix(dir).unwrap().join(p)));
        }
    }
    found.sort();
    found
}

/// A COPY that fails after many messages, once its first rows were staged, loads nothing and
/// leaves no file behind, whether its last line is bad, the client abandons it (CopyFail) or
/// the connection drops; the connection (when it lives) answers the next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_fails_late_leaves_nothing_behind() {
    const ROWS: usize = 100_000;
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE t (k BIGINT, v STRING) USING parquet; INSERT INTO t VALUES (-1, 'kept')")
        .await
        .unwrap();
    let dir = server.data_dir().join("warehouse/default/t");
    let before = tree(&dir);
    let messages: Vec<Bytes> = (0..ROWS)
        .collect::<Vec<_>>()
        .chunks(10_000)
        .map(|keys| Bytes::from(keys.iter().map(|k| format!("{k}\tvalue {k}\n")).collect::<String>()))
        .collect();
    // A failed COPY's staged files are removed as its write task winds down, which may end
    // just after the error reaches the client.
    let unchanged = || async {
        assert_eq!(text_rows(&client, "SELECT count(*), min(v) FROM t").await, vec![vec!["1", "kept"]]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while tree(&dir) != before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(tree(&dir), before);
    };

    let sink = client.copy_in("COPY t FROM STDIN").await.unwrap();
    pin_mut!(sink);
    for message in &messages {
        sink.send(message.clone()).await.unwrap();
    }
    sink.send(Bytes::from_static(b"last\tline\n")).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P02");
    let message = err.as_db_error().unwrap().message();
    assert!(message.contains(&format!("line {}", ROWS + 1)) && message.contains("\"last\""), "{message}");
    unchanged().await;

    {
        let sink = client.copy_in("COPY t FROM STDIN").await.unwrap();
        pin_mut!(sink);
        for message in &messages {
            sink.send(message.clone()).await.unwrap();
        }
        // Dropped unfinished: tokio-postgres sends CopyFail.
    }
    unchanged().await;

    let (other, connection) = tokio_postgres::connect(&server.connection_string(), NoTls).await.unwrap();
    let connection = tokio::spawn(connection);
    let sink = other.copy_in("COPY t FROM STDIN").await.unwrap();
    pin_mut!(sink);
    for message in &messages {
        sink.send(message.clone()).await.unwrap();
    }
    connection.abort();
    let _ = connection.await;
    // The server drops the COPY when it reads the end of the connection.
    unchanged().await;
}

//! `bucketsql bench --tpch` beside DuckDB: `bench/peers.py --tpch` runs TPC-H's 22 queries at a
//! small scale factor in the bench, on plain tables and on bucketed copies, then in DuckDB over
//! the very Parquet files the plain tables read, and fails on any answer that differs.

use std::process::Command;
use std::time::Duration;

use crate::clients::python_env;
use crate::common::{TestServer, run_logged, text_rows};

#[test]
fn tpch_answers_agree_with_duckdb_on_plain_and_bucketed_tables() {
    let python = python_env("python-random-queries", "random-queries-requirements.txt");
    let venv = python.parent().and_then(|bin| bin.parent()).expect("bin/python of a virtual environment");
    let data_dir = tempfile::tempdir().unwrap();
    let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/peers.py");
    let (status, output) = run_logged(
        Command::new(&python)
            .arg(peers)
            .arg(env!("CARGO_BIN_EXE_bucketsql"))
            .args(["--tpch", "0.01", "--runs", "1", "--venv"])
            .arg(venv)
            .arg("--data-dir")
            .arg(data_dir.path()),
        Duration::from_secs(600),
    );
    assert!(status.is_some_and(|s| s.success()), "peers.py --tpch failed ({status:?}):\n{output}");
    assert!(output.contains("22 of 22 answers agree with DuckDB"), "{output}");
    // Every query ran on both layouts, and the bucketed copies agree with the plain tables.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data_dir.path().join("tpch-report.json")).unwrap()).unwrap();
    let queries = report["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 22);
    for query in queries {
        assert!(query["difference"].is_null(), "{query}");
        for layout in ["plain", "bucketed"] {
            assert!(query[layout]["median_ms"].as_f64().unwrap() > 0.0, "{query}");
            assert!(query[layout]["rows_scanned"].as_u64().unwrap() > 0, "{query}");
        }
    }
    // The bucketed copies save the exchanges of joins and groupings on their keys: Q18 groups
    // lineitem by the order key and joins it to orders on it.
    let exchanges = |n: usize, layout: &str| queries[n - 1][layout]["exchanges"].as_u64().unwrap();
    assert!(exchanges(18, "bucketed") < exchanges(18, "plain"), "Q18: {}", queries[17]);

    // Runtime filters wait for files of 64 MB, far above this scale's, and filter shuffled
    // joins only: at any size, with no broadcast, on the same plain tables, the queries they
    // filter answer as those checked above.
    let server = TestServer::start_on(data_dir.path());
    let filtered = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let client = server.connect().await;
        let mut filtered = 0;
        for query in queries {
            let sql = query["sql"].as_str().unwrap();
            client.batch_execute("SET spark.sql.autoBroadcastJoinThreshold = -1").await.unwrap();
            client.batch_execute("SET bucketsql.runtimeFilter.applicationSideScanSizeThreshold = 0").await.unwrap();
            let analyzed = text_rows(&client, &format!("EXPLAIN ANALYZE {sql}")).await.concat().concat();
            let with_filters = text_rows(&client, sql).await;
            client.batch_execute("SET bucketsql.runtimeFilter.enabled = false").await.unwrap();
            let without = text_rows(&client, sql).await;
            client.batch_execute("RESET").await.unwrap();
            assert_eq!(with_filters, without, "{sql}");
            assert!(!without.is_empty(), "{sql}");
            filtered += usize::from(analyzed.contains("rows dropped by the other side's keys"));
        }
        filtered
    });
    assert!(filtered >= 5, "runtime filters dropped rows in {filtered} of the 22 queries");
}

/// `--warehouse` places the bench's bucketed copies, as it places `serve`'s managed tables;
/// `--spark-connect`, which times only the bench's own join, is refused with TPC-H.
#[test]
fn tpch_bucketed_copies_go_to_the_warehouse_given() {
    let data_dir = tempfile::tempdir().unwrap();
    let warehouse = tempfile::tempdir().unwrap();
    let (status, output) = run_logged(
        Command::new(env!("CARGO_BIN_EXE_bucketsql"))
            .args(["bench", "--tpch", "0.01", "--runs", "1", "--data-dir"])
            .arg(data_dir.path())
            .arg("--warehouse")
            .arg(warehouse.path()),
        Duration::from_secs(600),
    );
    assert!(status.is_some_and(|s| s.success()), "bench --tpch failed ({status:?}):\n{output}");
    let files = |dir: std::path::PathBuf| -> Vec<String> {
        let entries = std::fs::read_dir(&dir).map(|entries| entries.flatten().collect::<Vec<_>>()).unwrap_or_default();
        entries
            .iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".parquet"))
            .collect()
    };
    let written = files(warehouse.path().join("default").join("lineitem_bucketed"));
    assert_eq!(written.len(), 16, "one file per bucket of lineitem_bucketed: {written:?}\n{output}");
    assert!(files(data_dir.path().join("warehouse").join("default").join("lineitem_bucketed")).is_empty());

    let (status, output) = run_logged(
        Command::new(env!("CARGO_BIN_EXE_bucketsql"))
            .args(["bench", "--tpch", "0.01", "--spark-connect", "sc://127.0.0.1:1", "--data-dir"])
            .arg(data_dir.path()),
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{output}");
    assert!(output.contains("'--tpch <SF>' cannot be used with '--spark-connect <URL>'"), "{output}");
}

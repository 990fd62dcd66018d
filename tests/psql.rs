//! psql 15 against the server: the backslash commands people look around with, their output
//! compared line by line with `tests/psql/session.expected`.

use std::path::PathBuf;
use std::process::Command;

use crate::common::TestServer;

const SETUP: &str = "
    CREATE TABLE plain_events (id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), created DATE);
    CREATE TABLE bucketed_events (user_id BIGINT COMMENT 'who clicked', ts TIMESTAMP, amount DOUBLE, kind STRING)
        USING parquet PARTITIONED BY (kind) CLUSTERED BY (user_id) SORTED BY (user_id) INTO 8 BUCKETS
        COMMENT 'clicks';
    INSERT INTO plain_events VALUES (1, 'one', 1.50, DATE '2026-01-01'), (2, 'two', 2.25, NULL);
    INSERT INTO bucketed_events VALUES (1, TIMESTAMP '2026-01-01 10:00:00', 1.0, 'view'),
        (2, TIMESTAMP '2026-01-01 11:00:00', 2.0, 'view'), (2, TIMESTAMP '2026-01-02 09:00:00', 9.5, 'buy');
";

/// `\timing` prints how long each query took.
fn mask(output: &str) -> String {
    output
        .lines()
        .map(|line| if line.starts_with("Time: ") { "Time: <masked>" } else { line })
        .map(|line| format!("{line}\n"))
        .collect()
}

#[tokio::test]
async fn psql_session_matches_expected_output() {
    let server = TestServer::start();
    server.connect().await.batch_execute(SETUP).await.expect("setup");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/psql");
    // One pipe for both streams: psql flushes its output before it reports an error, so the
    // error lands where it happened.
    let output = Command::new("sh")
        .args(["-c", "exec psql -X -h 127.0.0.1 -p \"$0\" -U postgres -d postgres -f session.sql 2>&1"])
        .arg(server.port.to_string())
        .current_dir(&dir)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("psql runs (it is installed by .ci/run)");
    let actual = mask(&String::from_utf8_lossy(&output.stdout));
    let expected = std::fs::read_to_string(dir.join("session.expected")).unwrap();
    if actual != expected {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("psql-session.actual");
        std::fs::write(&path, &actual).unwrap();
        panic!("psql output differs from tests/psql/session.expected (actual output in {})\n{actual}", path.display());
    }
}

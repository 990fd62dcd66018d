//! Runs every sqllogictest file in `sql-fixtures/` over the wire, each against a fresh server.
//! Errors are matched against `<SQLSTATE>: <message>`, so fixtures can expect a state.

use std::path::PathBuf;

use async_trait::async_trait;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::common::TestServer;

struct WireDb {
    client: Client,
}

#[derive(Debug)]
struct WireError(String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

#[async_trait]
impl AsyncDB for WireDb {
    type Error = WireError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, WireError> {
        let messages = self.client.simple_query(sql).await.map_err(|e| {
            let state = e.code().map(|c| c.code().to_string()).unwrap_or_default();
            let message = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string());
            WireError(format!("{state}: {message}"))
        })?;
        let mut rows = Vec::new();
        let mut width = None;
        let mut affected = 0;
        for message in messages {
            match message {
                SimpleQueryMessage::RowDescription(columns) => width = Some(columns.len()),
                SimpleQueryMessage::Row(row) => {
                    width = Some(row.len());
                    // sqllogictest's conventions for NULL and the empty string.
                    let cell = |i| match row.get(i) {
                        None => "NULL".to_string(),
                        Some("") => "(empty)".to_string(),
                        Some(text) => text.to_string(),
                    };
                    rows.push((0..row.len()).map(cell).collect());
                }
                SimpleQueryMessage::CommandComplete(n) => affected = n,
                _ => {}
            }
        }
        Ok(match width {
            Some(width) => DBOutput::Rows { types: vec![DefaultColumnType::Any; width], rows },
            None => DBOutput::StatementComplete(affected),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "bucketsql"
    }

    async fn sleep(duration: std::time::Duration) {
        tokio::time::sleep(duration).await;
    }
}

fn fixture_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sql-fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("sql-fixtures exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_fixtures_pass_over_the_wire() {
    let files = fixture_files();
    assert!(!files.is_empty(), "no .slt files in sql-fixtures/");
    for file in files {
        let server = TestServer::start();
        let connection_string = server.connection_string();
        let mut runner = sqllogictest::Runner::new(move || {
            let connection_string = connection_string.clone();
            async move {
                let (client, connection) = tokio_postgres::connect(&connection_string, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| WireError(e.to_string()))?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(WireDb { client })
            }
        });
        if let Err(e) = runner.run_file_async(&file).await {
            panic!("{}: {e}", file.display());
        }
    }
}

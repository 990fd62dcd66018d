//! Client input that once reached a panic (or an abort) in the server: each is refused with
//! its SQLSTATE, and the connection and the server go on.

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

//! A failed Spark Connect call as the client sees it: Spark's own SQLSTATE where Spark gives
//! one (the `sqlState` of the `ErrorInfo` it attaches, else the `SQLSTATE: …` its message
//! ends with), so that a statement failing on Spark fails with the code it has locally; and
//! PostgreSQL's connection codes where Spark could not be reached (08001) or went away
//! during a statement (08006).

use std::collections::HashSet;
use std::sync::Mutex;

use prost::Message;
use tonic::{Code, Status};

use super::proto::google_rpc::{ErrorInfo, Status as RpcStatus};
use super::url::SparkConnectUrl;
use crate::error::SqlError;

/// How far the call had come when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No answer from Spark yet: a refused connection is "could not connect".
    Connecting,
    /// Spark had answered: a lost connection breaks the statement.
    Answering,
}

pub fn status_error(status: &Status, url: &SparkConnectUrl, stage: Stage) -> SqlError {
    if status.code() == Code::Unavailable || is_transport_failure(status) {
        let reason = deepest_cause(status).unwrap_or_else(|| status.message().to_string());
        return match stage {
            Stage::Connecting => could_not_connect(url, reason),
            Stage::Answering => {
                SqlError::new("08006", format!("the connection to Spark Connect at {url} was lost: {reason}"))
            }
        };
    }
    match status.code() {
        Code::Cancelled | Code::DeadlineExceeded => SqlError::query_canceled("canceling statement on Spark"),
        Code::Unauthenticated | Code::PermissionDenied => {
            SqlError::new("28000", format!("Spark Connect at {url} refused the credentials: {}", status.message()))
        }
        _ => {
            let (message, from_text) = split_sqlstate(status.message());
            let state = spark_sqlstate(status).or(from_text);
            SqlError::new(state.and_then(interned).unwrap_or("XX000"), message)
        }
    }
}

/// A call that never reached Spark's service: tonic reports these with the transport's error
/// as the source, not a status the server sent.
fn is_transport_failure(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// 08001: Spark could not be reached, for `reason`.
pub fn could_not_connect(url: &SparkConnectUrl, reason: impl std::fmt::Display) -> SqlError {
    SqlError::new("08001", format!("could not connect to Spark Connect at {url}: {reason}"))
}

/// The words of the deepest cause under `error`: "Connection refused" rather than
/// "transport error". `None` where nothing lies under it.
pub fn deepest_cause(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut deepest = None;
    let mut source = error.source();
    while let Some(cause) = source {
        deepest = Some(cause.to_string());
        source = cause.source();
    }
    deepest
}

/// The `sqlState` Spark puts in the `ErrorInfo` of a failure's details.
fn spark_sqlstate(status: &Status) -> Option<String> {
    let details = RpcStatus::decode(status.details()).ok()?;
    details
        .details
        .iter()
        .filter(|any| any.type_url.ends_with("google.rpc.ErrorInfo"))
        .filter_map(|any| ErrorInfo::decode(any.value.as_slice()).ok())
        .find_map(|info| info.metadata.get("sqlState").cloned())
}

/// Spark's message without the ` SQLSTATE: 22012` it ends its first line with (PostgreSQL
/// carries the code on its own), and that code.
fn split_sqlstate(message: &str) -> (String, Option<String>) {
    const MARK: &str = " SQLSTATE: ";
    let Some(at) = message.find(MARK) else {
        return (message.to_string(), None);
    };
    let code: String = message[at + MARK.len()..].chars().take(5).collect();
    let rest = &message[at + MARK.len() + code.len()..];
    (format!("{}{rest}", &message[..at]), Some(code))
}

/// Distinct SQLSTATEs kept: Spark uses a few hundred; past this, a server sending made-up
/// codes gets XX000.
const MAX_INTERNED: usize = 4096;

/// A SQLSTATE as the `'static` code an error carries: five digits or capital letters, each
/// distinct code allocated once.
fn interned(code: String) -> Option<&'static str> {
    static CODES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    if code.len() != 5 || !code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        return None;
    }
    let mut codes = CODES.lock().unwrap_or_else(|p| p.into_inner());
    let codes = codes.get_or_insert_with(HashSet::new);
    if let Some(known) = codes.get(code.as_str()) {
        return Some(known);
    }
    if codes.len() >= MAX_INTERNED {
        return None;
    }
    let code: &'static str = Box::leak(code.into_boxed_str());
    codes.insert(code);
    Some(code)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use prost_types::Any;

    fn url() -> SparkConnectUrl {
        SparkConnectUrl::parse("sc://127.0.0.1:1").unwrap()
    }

    #[test]
    fn takes_the_sqlstate_spark_attaches() {
        let info = ErrorInfo {
            reason: "org.apache.spark.SparkArithmeticException".into(),
            domain: "org.apache.spark".into(),
            metadata: HashMap::from([("sqlState".to_string(), "22012".to_string())]),
        };
        let details = RpcStatus {
            code: Code::Internal as i32,
            message: "x".into(),
            details: vec![Any {
                type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                value: info.encode_to_vec(),
            }],
        };
        let status = Status::with_details(
            Code::Internal,
            "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012",
            details.encode_to_vec().into(),
        );
        let error = status_error(&status, &url(), Stage::Answering);
        assert_eq!(error.code, "22012");
        assert_eq!(error.message, "[DIVIDE_BY_ZERO] Division by zero.");
    }

    #[test]
    fn reads_the_sqlstate_from_the_message_without_details() {
        let status = Status::new(
            Code::Internal,
            "[TABLE_OR_VIEW_NOT_FOUND] The table `t` cannot be found. SQLSTATE: 42P01; line 1 pos 14",
        );
        let error = status_error(&status, &url(), Stage::Answering);
        assert_eq!(error.code, "42P01");
        assert_eq!(error.message, "[TABLE_OR_VIEW_NOT_FOUND] The table `t` cannot be found.; line 1 pos 14");
        assert_eq!(status_error(&Status::internal("boom"), &url(), Stage::Answering).code, "XX000");
        let made_up = Status::new(Code::Internal, "x SQLSTATE: 2201");
        assert_eq!(status_error(&made_up, &url(), Stage::Answering).code, "XX000");
    }

    #[test]
    fn an_unavailable_server_is_a_connection_failure() {
        let status = Status::unavailable("tcp connect error");
        assert_eq!(status_error(&status, &url(), Stage::Connecting).code, "08001");
        assert_eq!(status_error(&status, &url(), Stage::Answering).code, "08006");
        assert_eq!(status_error(&Status::cancelled("x"), &url(), Stage::Answering).code, "57014");
    }
}

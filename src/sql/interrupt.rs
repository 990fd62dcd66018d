//! Ending a statement early: at its `statement_timeout`, here, or on a client's
//! CancelRequest (`crate::server::cancel`).
//!
//! A query's rows are computed while the client reads them, after the statement has
//! returned its lazy row stream, so both also cut that stream short.

use std::future::Future;
use std::time::Duration;

use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{FutureExt, Stream, StreamExt, stream};
use tokio::time::{Instant, sleep_until, timeout_at};

use super::error::SqlError;

/// PostgreSQL's largest `statement_timeout` (`INT_MAX` milliseconds).
const MAX_MILLIS: f64 = i32::MAX as f64;

/// The `statement_timeout` that `value` sets, read as PostgreSQL reads it: milliseconds, or
/// a number with one of the units `us`, `ms`, `s`, `min`, `h`, `d`; `None` (`0`) is off.
pub fn parse_statement_timeout(value: &str) -> Result<Option<Duration>, SqlError> {
    let text = value.trim();
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len()));
    let invalid = || SqlError::invalid_parameter(format!("invalid value for parameter \"statement_timeout\": \"{value}\""));
    let number: f64 = number.trim().parse().map_err(|_| invalid())?;
    let unit_millis = match unit {
        "" | "ms" => 1.0,
        "us" => 1e-3,
        "s" => 1e3,
        "min" => 6e4,
        "h" => 3.6e6,
        "d" => 8.64e7,
        _ => return Err(invalid()),
    };
    let millis = (number * unit_millis).round();
    if !(0.0..=MAX_MILLIS).contains(&millis) {
        return Err(SqlError::invalid_parameter(format!(
            "{value} is outside the valid range for parameter \"statement_timeout\" (0 .. {MAX_MILLIS})"
        )));
    }
    Ok((millis > 0.0).then(|| Duration::from_millis(millis as u64)))
}

fn timed_out() -> SqlError {
    SqlError::query_canceled("canceling statement due to statement timeout")
}

/// Runs the part of a statement that comes before its rows (planning, a whole write) until
/// `deadline`.
pub async fn within<T>(
    deadline: Option<Instant>,
    work: impl Future<Output = Result<T, SqlError>>,
) -> Result<T, SqlError> {
    match deadline {
        Some(deadline) => timeout_at(deadline, work).await.unwrap_or_else(|_| Err(timed_out())),
        None => work.await,
    }
}

/// `rows` until `deadline`.
pub fn limit(rows: SendableRecordBatchStream, deadline: Option<Instant>) -> SendableRecordBatchStream {
    let Some(deadline) = deadline else {
        return rows;
    };
    let schema = rows.schema();
    let stop = sleep_until(deadline).map(|()| Err(DataFusionError::External(Box::new(timed_out()))));
    Box::pin(RecordBatchStreamAdapter::new(schema, until(rows, stop)))
}

/// `items` until `stop` resolves, then the item `stop` gives, and the end.
pub fn until<T: Send + 'static>(
    items: impl Stream<Item = T> + Send + 'static,
    stop: impl Future<Output = T> + Send + 'static,
) -> impl Stream<Item = T> + Send + 'static {
    stream::unfold(Some((items.boxed(), stop.boxed())), |state| async move {
        let (mut items, mut stop) = state?;
        tokio::select! {
            biased;
            last = &mut stop => Some((last, None)),
            item = items.next() => item.map(|item| (item, Some((items, stop)))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_timeout_units_as_postgresql_reads_them() {
        assert_eq!(parse_statement_timeout("1000").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(parse_statement_timeout("1s").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(parse_statement_timeout(" 500ms ").unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(parse_statement_timeout("1.5min").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(parse_statement_timeout("0").unwrap(), None);
        assert_eq!(parse_statement_timeout("0s").unwrap(), None);
        for bad in ["abc", "", "1 sec", "10S", "-1", "1e3", "30d"] {
            assert_eq!(parse_statement_timeout(bad).unwrap_err().code, "22023", "{bad}");
        }
    }

    #[tokio::test]
    async fn until_ends_with_the_stop_item() {
        let items = stream::iter(0..).then(|i| async move {
            tokio::task::yield_now().await;
            i
        });
        let stop = tokio::time::sleep(Duration::from_millis(20)).map(|()| -1);
        let seen: Vec<i64> = until(items, stop).collect().await;
        assert_eq!(seen.last(), Some(&-1));
        assert!(seen.len() > 1);
    }
}

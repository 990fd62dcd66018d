//! Ending a statement early: at its `statement_timeout`, here, or on a client's
//! CancelRequest from the wire front end.
//!
//! A query's rows are computed while the client reads them, after the statement has
//! returned its lazy row stream, so both also cut that stream short.

use std::future::Future;
use std::sync::{Arc, LazyLock};

use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{FutureExt, Stream, StreamExt, stream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, sleep_until};

use crate::error::SqlError;
use crate::planner::abandoned_planning;

/// The error of a statement stopped at its `statement_timeout`.
pub fn timed_out() -> SqlError {
    SqlError::query_canceled("canceling statement due to statement timeout")
}

/// Plannings running at once, one per core. A planning whose statement timed out runs on to
/// its end unseen and keeps its place meanwhile, so that statements timing out one after the
/// other cannot pile up plannings, and their memory, without bound.
static PLANNERS: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(std::thread::available_parallelism().map_or(2, |cores| cores.get()))));

/// Runs `work` (planning) on a blocking thread of the runtime, not on one of its workers:
/// planning a large statement is seconds of CPU without an await point, which would hold a
/// worker, and every connection waiting on it, and which a `statement_timeout` around this
/// call could not stop. Stopped waiting for (the timeout), the work runs on unseen until our
/// rules see it abandoned ([`abandoned_planning`]); planning changes nothing.
pub async fn off_workers<T: Send + 'static>(
    work: impl Future<Output = Result<T, SqlError>> + Send + 'static,
) -> Result<T, SqlError> {
    let place = Arc::clone(&PLANNERS).acquire_owned().await.map_err(|e| SqlError::internal(e.to_string()))?;
    let runtime = tokio::runtime::Handle::current();
    let waiter = abandoned_planning::Waiter::default();
    let planning = waiter.planning();
    tokio::task::spawn_blocking(move || {
        let planned = planning.run(|| runtime.block_on(work));
        drop(place);
        planned
    })
    .await
    .map_err(|e| SqlError::internal(format!("planning failed: {e}")))?
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
    use std::time::Duration;

    use super::*;

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

//! The runtime queries run on, apart from the one that serves connections.
//!
//! An operator's poll can compute for long without yielding (a nested-loop join over a
//! cartesian product, an aggregate draining a fast input). On the runtime that serves the
//! connections it would hold a worker, and with two of them busy no timer fires, no
//! CancelRequest is read and no other client is answered: `statement_timeout` and cancel
//! would wait for the query they are meant to stop. Statements run here instead; the serving
//! runtime only waits for them, so it can always give up waiting, and giving up aborts the
//! work at its next yield.

use std::future::Future;
use std::sync::LazyLock;

use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::SqlError;

/// Stack of every thread that runs or plans statements. A statement's AST and plans are
/// cloned, visited and dropped by recursion, a frame or more per level of nesting; 64 MiB
/// holds the deepest statement the parser accepts, also in debug builds, whose frames are
/// largest. Only the pages a statement touches are committed.
pub const THREAD_STACK_BYTES: usize = 64 << 20;

/// Threads each runtime keeps for blocking work (planning, spill files). Each reserves a
/// [`THREAD_STACK_BYTES`] stack; tokio's default of 512 would let a busy server reserve 32 GiB
/// of address space, which a data-size limit (`RLIMIT_DATA`) counts. Plannings are fewer
/// (one per core, `sql::interrupt`); spill reads and writes wait for a thread.
pub const MAX_BLOCKING_THREADS: usize = 16;

/// Batches a running query may compute ahead of its client.
const BATCHES_AHEAD: usize = 2;

static EXECUTOR: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("bucketsql-exec")
        .thread_stack_size(THREAD_STACK_BYTES)
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .enable_all()
        .build()
        .expect("the query runtime starts")
});

/// Aborts its task when dropped: whoever stopped waiting stops the work too.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts `work` on the query runtime (a write fed from the connection, like COPY's).
pub fn spawn<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    EXECUTOR.spawn(work)
}

/// Runs `work` on the query runtime until `deadline`; `None` when it was stopped there.
/// Stopping waits until the work has ended, so that nothing of it goes on unseen: a write
/// past its deadline is either gone or, if it finished first, its outcome stands. Dropping
/// the returned future aborts the work without waiting.
pub async fn run<T: Send + 'static>(
    deadline: Option<Instant>,
    work: impl Future<Output = Result<T, SqlError>> + Send + 'static,
) -> Result<Option<T>, SqlError> {
    let mut task = AbortOnDrop(EXECUTOR.spawn(work));
    let ended = match deadline {
        None => (&mut task.0).await,
        Some(deadline) => tokio::select! {
            ended = &mut task.0 => ended,
            () = tokio::time::sleep_until(deadline) => {
                task.0.abort();
                match (&mut task.0).await {
                    Err(e) if e.is_cancelled() => return Ok(None),
                    ended => ended,
                }
            }
        },
    };
    ended.map_err(|e| SqlError::internal(format!("statement failed: {e}")))?.map(Some)
}

/// `rows` computed on the query runtime, at most [`BATCHES_AHEAD`] batches ahead of the
/// reader; dropping the returned stream aborts the computation.
pub fn drive(mut rows: SendableRecordBatchStream) -> SendableRecordBatchStream {
    let schema = rows.schema();
    let (sender, receiver) = tokio::sync::mpsc::channel(BATCHES_AHEAD);
    let task = AbortOnDrop(EXECUTOR.spawn(async move {
        while let Some(batch) = rows.next().await {
            let failed = batch.is_err();
            if sender.send(batch).await.is_err() || failed {
                return;
            }
        }
    }));
    let batches = futures::stream::unfold((receiver, task), |(mut receiver, task)| async move {
        let batch = receiver.recv().await?;
        Some((batch, (receiver, task)))
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, batches.map(|b: Result<_, DataFusionError>| b)))
}

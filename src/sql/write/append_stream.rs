//! Appending rows to a table while they arrive (`COPY ... FROM STDIN`). The batches pass
//! through a bounded channel into one staged write of the table, so the bucketing repartition,
//! the sort (which spills under the memory pool) and the Parquet writers run as the data
//! comes, and a full channel makes the sender wait: what the append holds stays small however
//! large the input. Nothing is visible until [`TableAppend::finish`] publishes the whole write
//! in one commit; an append dropped before that ends its write, whose staged files go.

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::datasource::provider_as_source;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use futures::stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::stage::stage_write;
use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::table::WriteMode;
use crate::error::SqlError;
use crate::exec::executor;
use crate::planner::table_provider::table_schema;
use crate::sql::names::existing_table;
use crate::sql::session::Session;
use crate::storage::commit::StagedFiles;

/// Batches waiting for the write: a few keep the writers busy, and bound what waits in memory
/// outside the memory pool.
const CHANNEL_BATCHES: usize = 2;

enum Input {
    Batch(RecordBatch),
    /// All the rows have come. A channel that closes without it was abandoned, and the
    /// write fails rather than stage a part of the input.
    End,
}

/// One table write fed batch by batch.
pub struct TableAppend {
    session: Arc<Session>,
    table: TableRef,
    input: mpsc::Sender<Input>,
    write: JoinHandle<Result<StagedFiles, SqlError>>,
}

impl TableAppend {
    /// Starts the write of `schema.table`; the batches pushed must have the table's columns
    /// in order.
    pub fn start(session: Arc<Session>, schema: &str, table: &str) -> Result<Self, SqlError> {
        let meta = existing_table(&session, schema, table)?;
        let (sender, receiver) = mpsc::channel(CHANNEL_BATCHES);
        let columns = table_schema(&meta)?;
        let partition = ChannelPartition { schema: Arc::clone(&columns), input: Mutex::new(Some(receiver)) };
        let source = StreamingTable::try_new(columns, vec![Arc::new(partition)])?;
        let plan = LogicalPlanBuilder::scan(table, provider_as_source(Arc::new(source)), None)?.build()?;
        let target = TableRef::of(&meta);
        // On the query runtime, with the statements' writes: its memory is reused by theirs.
        let writer = Arc::clone(&session);
        let write = executor::spawn(async move { stage_write(&writer, &meta, plan).await });
        Ok(TableAppend { session, table: target, input: sender, write })
    }

    /// Hands one batch to the write, waiting while it is behind (which holds the sender
    /// back). If the write has failed, its error; the append is then over.
    pub async fn push(self, batch: RecordBatch) -> Result<Self, SqlError> {
        if self.input.send(Input::Batch(batch)).await.is_ok() {
            return Ok(self);
        }
        // The write stopped reading, which it does only when it fails.
        match staged(self.write).await {
            Err(e) => Err(e),
            Ok(_) => Err(SqlError::internal("the table write ended before its input")),
        }
    }

    /// Ends the input, waits for the write and hands all its files to the session's
    /// transaction as one append; returns the number of rows appended.
    pub async fn finish(self) -> Result<usize, SqlError> {
        // A write that already failed reports its error below.
        let _ = self.input.send(Input::End).await;
        let staged = staged(self.write).await?;
        let rows = staged.files.iter().map(|f| f.rows as usize).sum();
        if !staged.files.is_empty() {
            let change = CatalogChange::Write { table: self.table, mode: WriteMode::Append, files: staged.described() };
            self.session.tables.write(change, Some(staged))?;
        }
        Ok(rows)
    }

    /// Ends the write without publishing anything, and waits until its staged files are gone.
    pub async fn abort(self) {
        drop(self.input);
        let _ = self.write.await;
    }
}

/// The write's outcome: its staging area and files, or why it failed.
async fn staged(write: JoinHandle<Result<StagedFiles, SqlError>>) -> Result<StagedFiles, SqlError> {
    write.await.map_err(|e| SqlError::internal(format!("write task failed: {e}")))?
}

/// The channel's batches as the one partition of the write's source.
#[derive(Debug)]
struct ChannelPartition {
    schema: SchemaRef,
    input: Mutex<Option<mpsc::Receiver<Input>>>,
}

impl PartitionStream for ChannelPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = Arc::clone(&self.schema);
        let Some(input) = self.input.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            let error = DataFusionError::Internal("the rows to append were read twice".to_string());
            return Box::pin(RecordBatchStreamAdapter::new(schema, stream::once(async { Err(error) })));
        };
        let batches = stream::unfold(Some(input), |input| async move {
            let mut input = input?;
            match input.recv().await {
                Some(Input::Batch(batch)) => Some((Ok(batch), Some(input))),
                Some(Input::End) => None,
                None => Some((Err(DataFusionError::Execution("the rows to append were abandoned".to_string())), None)),
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, batches))
    }
}

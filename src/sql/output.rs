//! What a statement gives back to the wire front end: rows, a command tag, a transaction
//! boundary or a COPY to carry out (its format, table and rows), and the prepared form of a
//! statement. This is the whole contract between `sql` and `server`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

use super::activity::CopyReport;
use super::dialect::BucketSqlStatement;

/// What a statement returns to the client.
pub enum Output {
    Rows {
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
    },
    /// A command tag such as `CREATE TABLE` or `INSERT 0 3` (`rows` fills the count).
    Command {
        tag: &'static str,
        rows: Option<usize>,
    },
    TransactionStart(&'static str),
    TransactionEnd(&'static str),
    /// A `COPY ... FROM STDIN` waiting for its data.
    CopyIn(CopyIn),
    CopyOut(CopyOut),
}

impl Output {
    pub(crate) fn command(tag: &'static str) -> Self {
        Output::Command { tag, rows: None }
    }
}

/// A statement parsed for the extended protocol, with what Describe reports about it.
#[derive(Clone)]
pub struct Prepared {
    /// The text the client sent, which `pg_stat_activity` shows while the statement runs.
    pub sql: String,
    pub statement: BucketSqlStatement,
    /// Types of `$1..$n` as Describe reports them: the client's where it declared one, else
    /// the statement's; `None` where nothing fixes one.
    pub parameter_types: Vec<Option<DataType>>,
    /// Types the statement itself gives `$1..$n` (a column compared with, the table column
    /// inserted into): bound values are converted to these, whatever type the client sent.
    pub planned_types: Vec<Option<DataType>>,
    /// Row shape, for statements that return rows.
    pub result_schema: Option<SchemaRef>,
}

/// A one-shot result from batches already in memory.
pub(crate) fn rows_output(schema: SchemaRef, batches: Vec<RecordBatch>) -> Output {
    let stream = futures::stream::iter(batches.into_iter().map(Ok));
    Output::Rows { schema: Arc::clone(&schema), stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)) }
}

/// EXPLAIN's one column.
pub(crate) fn plan_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]))
}

/// A single-column boolean batch, e.g. Spark's `isTemporary`.
pub(crate) fn bool_column(values: impl IntoIterator<Item = bool>) -> ArrayRef {
    Arc::new(BooleanArray::from(values.into_iter().collect::<Vec<_>>()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    Binary,
}

/// The format options of one COPY, PostgreSQL's defaults filled in.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub header: bool,
    pub delimiter: u8,
    pub null: String,
    pub quote: u8,
    pub escape: u8,
}

/// A `COPY ... FROM STDIN` waiting for its data.
pub struct CopyIn {
    pub schema: String,
    pub table: String,
    pub table_schema: SchemaRef,
    /// The table column each input field goes to; the other columns get NULL.
    pub columns: Vec<usize>,
    pub options: CopyOptions,
    /// `pg_stat_progress_copy`'s row, counted as the data arrives, gone with the COPY.
    pub progress: CopyReport,
}

/// The rows of a `COPY ... TO STDOUT`.
pub struct CopyOut {
    pub options: CopyOptions,
    pub schema: SchemaRef,
    pub stream: SendableRecordBatchStream,
    /// `pg_stat_progress_copy`'s row, counted as the rows go out, gone with them.
    pub progress: CopyReport,
}

//! What turns a map task's routed rows into batches per output partition: copying values
//! column by column (`scatter`) or reordering batches (`gather`), whichever the map writer
//! (`map_output`) picks for the schema.

use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result;

/// What a batcher hands over: a batch of rows for one output partition.
pub(super) type Routed = (usize, RecordBatch);

/// Turns a map task's routed rows into batches per output partition.
pub(super) trait Batcher: Send {
    /// Takes `batch`, whose row `i` goes to partition `ids[i]`; batches it completes go to `done`.
    fn push(&mut self, batch: RecordBatch, ids: &[u32], done: &mut Vec<Routed>) -> Result<()>;
    /// Hands over every row it still has.
    fn flush(&mut self, done: &mut Vec<Routed>) -> Result<()>;
    /// The memory the rows it still has take.
    fn buffered_bytes(&self) -> usize;
}

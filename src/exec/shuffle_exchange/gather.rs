//! Routing a map task's rows of any types: reordered by partition a few batches at a time,
//! then copied out partition by partition.
//!
//! Routed batches are staged until their rows average [`ROWS_PER_RUN`] per partition, then
//! reordered by partition together (a counting sort and one interleave, while they are in
//! cache), so that each partition's rows of them are one run: at 200 partitions one batch alone
//! would leave runs of 40 rows, each a copy of its own. Every `partitions × batch_size` rows the
//! runs are copied, column by column, into batches of at most `batch_size` rows per partition.
//! Schemas whose columns are all of plain types take the one-copy `scatter` instead; this is
//! for the rest (nested, dictionary-encoded, fixed-size binary, null columns).

use std::mem;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayData, MutableArrayData, RecordBatch, RecordBatchOptions, make_array};
use datafusion::arrow::compute::interleave_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::Result;

use super::batcher::{Batcher, Routed};
use super::grouped::Grouped;

/// The rows per output partition a map task reorders together, on average: fewer make each
/// partition's share of them a copy too short to be worth its call.
const ROWS_PER_RUN: usize = 256;

/// Rows `start..end` of pending batch `batch`.
#[derive(Clone, Copy)]
struct Run {
    batch: u32,
    start: u32,
    end: u32,
}

impl Run {
    fn len(&self) -> u32 {
        self.end - self.start
    }
}

/// `runs` cut into pieces of at most `batch_size` rows, a run split where a piece fills up.
fn chunks_of_rows(runs: &[Run], batch_size: usize) -> Vec<Vec<Run>> {
    let batch_size = batch_size as u32;
    let mut chunks = Vec::new();
    let (mut chunk, mut rows) = (Vec::new(), 0);
    for run in runs {
        let mut run = *run;
        while run.len() > 0 {
            let taken = run.len().min(batch_size - rows);
            chunk.push(Run { end: run.start + taken, ..run });
            run.start += taken;
            rows += taken;
            if rows == batch_size {
                chunks.push(mem::take(&mut chunk));
                rows = 0;
            }
        }
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

pub(super) struct Gather {
    schema: SchemaRef,
    batch_size: usize,
    /// Routed input batches not reordered yet, and the partition of each of their rows.
    staged: Vec<RecordBatch>,
    staged_ids: Vec<u32>,
    /// Input batches not gathered yet, each ordered by partition, and per output partition the
    /// runs of those batches bound for it.
    pending: Vec<RecordBatch>,
    routes: Vec<Vec<Run>>,
    pending_rows: usize,
    /// Memory of the staged and pending batches.
    pending_bytes: usize,
    /// The staged rows by partition.
    grouped: Grouped,
}

impl Gather {
    pub(super) fn new(schema: SchemaRef, partitions: usize, batch_size: usize) -> Self {
        Gather {
            schema,
            batch_size,
            staged: Vec::new(),
            staged_ids: Vec::new(),
            pending: Vec::new(),
            routes: vec![Vec::new(); partitions],
            pending_rows: 0,
            pending_bytes: 0,
            grouped: Grouped::new(partitions),
        }
    }

    /// The staged batches as one pending batch ordered by partition, with each partition's run.
    fn route_staged(&mut self) -> Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let index = self.pending.len() as u32;
        self.grouped.group(&self.staged_ids);
        for (partition, route) in self.routes.iter_mut().enumerate() {
            let run = self.grouped.range(partition);
            if !run.is_empty() {
                route.push(Run { batch: index, start: run.start, end: run.end });
            }
        }
        let staged_rows: Vec<(usize, usize)> =
            self.staged.iter().enumerate().flat_map(|(b, batch)| (0..batch.num_rows()).map(move |r| (b, r))).collect();
        let order: Vec<(usize, usize)> = self.grouped.rows().iter().map(|row| staged_rows[*row as usize]).collect();
        let sources: Vec<&RecordBatch> = self.staged.iter().collect();
        let routed = interleave_record_batch(&sources, &order)?;
        let staged_bytes: usize = self.staged.iter().map(RecordBatch::get_array_memory_size).sum();
        self.pending_bytes = self.pending_bytes - staged_bytes + routed.get_array_memory_size();
        self.pending_rows += routed.num_rows();
        self.pending.push(routed);
        self.staged.clear();
        self.staged_ids.clear();
        Ok(())
    }
}

impl Batcher for Gather {
    fn push(&mut self, batch: RecordBatch, ids: &[u32], done: &mut Vec<Routed>) -> Result<()> {
        self.pending_bytes += batch.get_array_memory_size();
        self.staged_ids.extend_from_slice(ids);
        self.staged.push(batch);
        if self.staged_ids.len() >= self.routes.len() * ROWS_PER_RUN {
            self.route_staged()?;
        }
        if self.pending_rows >= self.routes.len() * self.batch_size {
            self.flush(done)?;
        }
        Ok(())
    }

    /// Copies the pending rows into batches of at most `batch_size` rows per partition, column
    /// by column, each partition's runs in turn.
    fn flush(&mut self, done: &mut Vec<Routed>) -> Result<()> {
        self.route_staged()?;
        if self.pending.is_empty() {
            return Ok(());
        }
        let columns: Vec<Vec<ArrayData>> = (0..self.schema.fields().len())
            .map(|column| self.pending.iter().map(|batch| batch.column(column).to_data()).collect())
            .collect();
        for (partition, route) in self.routes.iter_mut().enumerate() {
            for chunk in chunks_of_rows(route, self.batch_size) {
                let rows = chunk.iter().map(Run::len).sum::<u32>() as usize;
                let arrays = columns
                    .iter()
                    .map(|sources| {
                        let mut array = MutableArrayData::new(sources.iter().collect(), false, rows);
                        for run in &chunk {
                            array.try_extend(run.batch as usize, run.start as usize, run.end as usize)?;
                        }
                        Ok(make_array(array.freeze()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let options = RecordBatchOptions::new().with_row_count(Some(rows));
                done.push((partition, RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)?));
            }
            route.clear();
        }
        self.pending.clear();
        self.pending_rows = 0;
        self.pending_bytes = 0;
        Ok(())
    }

    fn buffered_bytes(&self) -> usize {
        let routes: usize = self.routes.iter().map(|r| r.capacity() * mem::size_of::<Run>()).sum();
        self.pending_bytes + routes
    }
}

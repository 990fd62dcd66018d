//! Reading the exchange's output: whole partitions, or the parts adaptive execution asks for.
//!
//! Spark's `ShuffledRowRDD` reads a list of `ShufflePartitionSpec`s: `CoalescedPartitionSpec`
//! (a range of whole reducer partitions, small ones coalesced), `PartialReducerPartitionSpec`
//! (one reducer partition from a range of map tasks: a skewed partition split in pieces) and
//! `PartialMapperPartitionSpec` (a range of partitions from one map task: a local read).
//! `ShuffleReadSpec` names the same three. A part, one map task's output for one partition, is
//! read as its batches held in memory, then its segments spilled to disk; small batches (what
//! a tight memory limit leaves in small runs) are gathered to about `batch_size` rows.
//! Where we differ: Spark's shuffle files outlive their readers so a stage can be retried; here
//! output is consumed as it is read. Each part goes to one read only, its memory returns to
//! the pool batch by batch, and a spill file is deleted when no unread segment is left in it.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::BatchCoalescer;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use futures::Stream;
use tokio::sync::Semaphore;

use super::map_part::MapPart;
use super::spill::SpilledSegments;

/// Which part of the exchange's output a read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShuffleReadSpec {
    /// Whole partitions (several, when coalesced): every map task's output for each.
    Partitions(Range<usize>),
    /// One partition's output from the map tasks `maps` only: a piece of a skewed partition.
    PartialReducer { partition: usize, maps: Range<usize> },
    /// One map task's output for `partitions`: a local read.
    PartialMapper { map: usize, partitions: Range<usize> },
}

impl ShuffleReadSpec {
    /// The `(map, partition)` parts read, in reading order.
    pub(super) fn parts(&self, maps: usize, partitions: usize) -> Result<Vec<(usize, usize)>> {
        let within = |range: &Range<usize>, end: usize| range.start <= range.end && range.end <= end;
        let parts: Option<Vec<(usize, usize)>> = match self {
            ShuffleReadSpec::Partitions(range) => within(range, partitions)
                .then(|| range.clone().flat_map(|partition| (0..maps).map(move |map| (map, partition))).collect()),
            ShuffleReadSpec::PartialReducer { partition, maps: range } => (*partition < partitions
                && within(range, maps))
            .then(|| range.clone().map(|map| (map, *partition)).collect()),
            ShuffleReadSpec::PartialMapper { map, partitions: range } => (*map < maps && within(range, partitions))
                .then(|| range.clone().map(|partition| (*map, partition)).collect()),
        };
        parts.ok_or_else(|| {
            DataFusionError::Internal(format!(
                "exchange read {self:?} out of range: {maps} map tasks, {partitions} partitions"
            ))
        })
    }
}

/// Where a batch of a part comes from. Batches read back from a spill file go through the
/// coalescer (which copies them) whatever their size: they are decoded in place from one read's
/// buffer, so each would count the whole read against the memory pool of whatever holds it
/// (a sort holding a partition's batches counted tens of times its rows, ran out and spilled).
#[derive(Clone, Copy)]
enum Origin {
    Memory,
    Spill,
}

/// Streams the parts handed to one read.
pub(super) struct PartsReader {
    parts: VecDeque<MapPart>,
    /// The spilled segments of the part being read, and batches read back from them.
    spilled: Option<SpilledSegments>,
    read_back: VecDeque<RecordBatch>,
    small: BatchCoalescer,
    batch_size: usize,
    reads: Arc<Semaphore>,
    finished: bool,
}

impl PartsReader {
    pub(super) fn new(parts: Vec<MapPart>, schema: SchemaRef, batch_size: usize, reads: Arc<Semaphore>) -> Self {
        let batch_size = batch_size.max(1);
        PartsReader {
            parts: parts.into(),
            spilled: None,
            read_back: VecDeque::new(),
            small: BatchCoalescer::new(schema, batch_size),
            batch_size,
            reads,
            finished: false,
        }
    }

    pub(super) fn into_stream(self) -> impl Stream<Item = Result<RecordBatch>> + Send {
        futures::stream::unfold(self, |mut reader| async move { reader.next().await.map(|batch| (batch, reader)) })
    }

    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.small.next_completed_batch() {
                return Some(Ok(batch));
            }
            if self.finished {
                return None;
            }
            let pushed = match self.fetch().await {
                Ok(Some((batch, Origin::Memory))) if batch.num_rows() * 2 >= self.batch_size => {
                    return Some(Ok(batch));
                }
                Ok(Some((batch, _))) => self.small.push_batch(batch),
                Ok(None) => {
                    self.finished = true;
                    self.small.finish_buffered_batch()
                }
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            };
            if let Err(e) = pushed {
                self.finished = true;
                return Some(Err(e.into()));
            }
        }
    }

    /// The next batch of the parts: each part's batches in memory, then its spilled segments.
    async fn fetch(&mut self) -> Result<Option<(RecordBatch, Origin)>> {
        loop {
            if let Some(batch) = self.read_back.pop_front() {
                return Ok(Some((batch, Origin::Spill)));
            }
            if let Some(spilled) = &mut self.spilled {
                match spilled.next_batches(&self.reads).await? {
                    Some(batches) => self.read_back.extend(batches),
                    // Done with this file, which may now be deleted.
                    None => self.spilled = None,
                }
                continue;
            }
            let Some(part) = self.parts.front_mut() else { return Ok(None) };
            if let Some(batch) = part.pop() {
                return Ok(Some((batch, Origin::Memory)));
            }
            self.spilled = part.take_spilled();
            self.parts.pop_front();
        }
    }
}

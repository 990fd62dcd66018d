//! Spark's `RangePartitioner`: the bounds that split a global sort's rows into partitions of
//! about equal size, from a sample of the sort keys.
//!
//! Spark samples about 20 keys per output partition (at most a million), spread over the map
//! tasks (three times the even share each, reservoir-sampled), weighs each sampled key by how
//! many rows its map task read per key sampled, and walks the sorted sample, taking a bound
//! every `total weight / partitions`; equal keys give one bound, so there may be fewer
//! partitions with rows than asked for. A row goes to the number of bounds below its key. Keys
//! compare as the sort orders them (descending, nulls first or last) through Arrow's row
//! format. Where we differ: the sample is taken in the map tasks' one pass over their input,
//! not by a job of its own, and a map task holding far more rows than the rest is not sampled
//! again.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::error::Result;
use datafusion::physical_expr::LexOrdering;

/// Keys sampled per output partition (`RangePartitioner`'s `samplePointsPerPartitionHint`).
const SAMPLE_POINTS_PER_PARTITION: usize = 20;
const MAX_SAMPLE: usize = 1_000_000;

/// How many keys each of `maps` map tasks samples for `partitions` output partitions.
pub(super) fn sample_size_per_map(partitions: usize, maps: usize) -> usize {
    let sample = (SAMPLE_POINTS_PER_PARTITION * partitions).min(MAX_SAMPLE);
    (3 * sample).div_ceil(maps.max(1))
}

/// The sort keys of a batch in Arrow's row format, compared as the sort orders them.
#[derive(Debug, Clone)]
pub(super) struct SortKeys {
    ordering: LexOrdering,
    converter: Arc<RowConverter>,
}

impl SortKeys {
    pub(super) fn try_new(ordering: LexOrdering, schema: &Schema) -> Result<Self> {
        let fields = ordering
            .iter()
            .map(|e| Ok(SortField::new_with_options(e.expr.data_type(schema)?, e.options)))
            .collect::<Result<Vec<_>>>()?;
        Ok(SortKeys { ordering, converter: Arc::new(RowConverter::new(fields)?) })
    }

    fn columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        self.ordering.iter().map(|e| e.expr.evaluate(batch)?.into_array(batch.num_rows())).collect()
    }
}

/// A map task's reservoir sample of sort keys, and how many rows it saw.
pub(super) struct KeySample {
    keys: SortKeys,
    capacity: usize,
    sampled: Vec<OwnedRow>,
    rows_seen: u64,
    /// A xorshift state seeded by the map task, so a query samples alike on every run.
    state: u64,
}

impl KeySample {
    pub(super) fn new(keys: SortKeys, capacity: usize, map: usize) -> Self {
        let state = 0x9E37_79B9_7F4A_7C15 ^ (map as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        KeySample { keys, capacity: capacity.max(1), sampled: Vec::new(), rows_seen: 0, state }
    }

    fn next_random(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// Offers every row of `batch` to the reservoir; only the rows kept are converted.
    pub(super) fn offer(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut taken: Vec<(u32, Option<usize>)> = Vec::new();
        for row in 0..batch.num_rows() {
            let seen = self.rows_seen + row as u64;
            if (seen as usize) < self.capacity {
                taken.push((row as u32, None));
            } else {
                let slot = self.next_random() % (seen + 1);
                if (slot as usize) < self.capacity {
                    taken.push((row as u32, Some(slot as usize)));
                }
            }
        }
        self.rows_seen += batch.num_rows() as u64;
        if taken.is_empty() {
            return Ok(());
        }
        let indices = UInt32Array::from_iter_values(taken.iter().map(|(row, _)| *row));
        let columns = self
            .keys
            .columns(batch)?
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()?;
        let rows = self.keys.converter.convert_columns(&columns)?;
        for ((_, slot), row) in taken.iter().zip(rows.iter()) {
            match slot {
                None => self.sampled.push(row.owned()),
                Some(slot) => self.sampled[*slot] = row.owned(),
            }
        }
        Ok(())
    }
}

/// Where each row of a batch goes: the number of bounds below its key.
#[derive(Debug, Clone)]
pub(super) struct RangeRouter {
    keys: SortKeys,
    bounds: Arc<Vec<OwnedRow>>,
    partitions: usize,
}

impl RangeRouter {
    /// Spark's `RangePartitioner.determineBounds` over every map task's sample.
    pub(super) fn from_samples(samples: Vec<KeySample>, partitions: usize, keys: SortKeys) -> Self {
        let mut candidates: Vec<(OwnedRow, f64)> = Vec::new();
        for sample in samples {
            if sample.sampled.is_empty() {
                continue;
            }
            let weight = sample.rows_seen as f64 / sample.sampled.len() as f64;
            candidates.extend(sample.sampled.into_iter().map(|row| (row, weight)));
        }
        candidates.sort_by(|a, b| a.0.row().cmp(&b.0.row()));
        let step = candidates.iter().map(|(_, w)| w).sum::<f64>() / partitions as f64;
        let mut bounds: Vec<OwnedRow> = Vec::new();
        let (mut cumulative, mut target) = (0.0, step);
        for (key, weight) in candidates {
            if bounds.len() + 1 >= partitions {
                break;
            }
            cumulative += weight;
            if cumulative >= target && bounds.last().is_none_or(|last| key.row() > last.row()) {
                bounds.push(key);
                target += step;
            }
        }
        RangeRouter { keys, bounds: Arc::new(bounds), partitions }
    }

    /// The partitions rows go to, some perhaps empty.
    pub(super) fn partitions(&self) -> usize {
        self.partitions
    }

    pub(super) fn partition_ids(&self, batch: &RecordBatch) -> Result<Vec<u32>> {
        let rows = self.keys.converter.convert_columns(&self.keys.columns(batch)?)?;
        Ok(rows.iter().map(|row| self.bounds.partition_point(|bound| bound.row() < row) as u32).collect())
    }
}

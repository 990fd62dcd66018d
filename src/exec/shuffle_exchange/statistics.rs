//! What the map side of an exchange produced, per map task and output partition.
//!
//! Spark's `MapOutputTracker` collects a `MapStatus` from every map task (the size of its
//! output for each reducer partition) and sums them into `MapOutputStatistics`'s
//! `bytesByPartitionId`, which adaptive query execution reads to coalesce small partitions,
//! split skewed ones by map ranges. The stage's own statistics, which pick broadcast joins and
//! which EXPLAIN prints, are the exchange's `dataSize` instead: its rows' size as `UnsafeRow`s,
//! counted here the same way. Where we differ: the per-partition figures are exact (Spark rounds
//! them in `HighlyCompressedMapStatus`), in Arrow memory size of the batches rather than
//! compressed bytes on disk, and rows are counted too.

/// Bytes and rows each map task produced for each output partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOutputStatistics {
    /// `bytes[map][partition]`: Arrow memory size of the batches, before any spilling.
    pub bytes: Vec<Vec<u64>>,
    /// `rows[map][partition]`.
    pub rows: Vec<Vec<u64>>,
    /// Spark's `dataSize`: the rows' size as `UnsafeRow`s, what the stage's statistics report.
    data_size: u64,
    partitions: usize,
}

impl MapOutputStatistics {
    pub(super) fn new(bytes: Vec<Vec<u64>>, rows: Vec<Vec<u64>>, data_size: u64, partitions: usize) -> Self {
        MapOutputStatistics { bytes, rows, data_size, partitions }
    }

    /// Figures for tests: `bytes[map][partition]` over `partitions`, one row for each byte.
    #[cfg(test)]
    pub(crate) fn of_bytes(bytes: Vec<Vec<u64>>, partitions: usize) -> Self {
        MapOutputStatistics { rows: bytes.clone(), data_size: bytes.iter().flatten().sum(), bytes, partitions }
    }

    pub fn map_count(&self) -> usize {
        self.bytes.len()
    }

    pub fn partition_count(&self) -> usize {
        self.partitions
    }

    /// Spark's `bytesByPartitionId`: each partition's bytes over all map tasks.
    pub fn bytes_by_partition(&self) -> Vec<u64> {
        self.by_partition(&self.bytes)
    }

    /// Each partition's rows over all map tasks.
    #[cfg(test)]
    pub fn rows_by_partition(&self) -> Vec<u64> {
        self.by_partition(&self.rows)
    }

    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().flatten().sum()
    }

    /// What Spark's `ShuffleQueryStage` reports as its `sizeInBytes`.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    pub fn total_rows(&self) -> u64 {
        self.rows.iter().flatten().sum()
    }

    fn by_partition(&self, figures: &[Vec<u64>]) -> Vec<u64> {
        let mut totals = vec![0; self.partitions];
        for map in figures {
            for (total, figure) in totals.iter_mut().zip(map) {
                *total += figure;
            }
        }
        totals
    }
}

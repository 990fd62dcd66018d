//! The grouping of a batch's rows by output partition, in a file of its own because both
//! batchers (`scatter`, `gather`) start with it.

use std::ops::Range;

/// One input batch's rows by partition: partition `p`'s are `rows[starts[p]..starts[p + 1]]`,
/// in their order in the batch.
pub(super) struct Grouped {
    rows: Vec<u32>,
    starts: Vec<u32>,
}

impl Grouped {
    pub(super) fn new(partitions: usize) -> Self {
        Grouped { rows: Vec::new(), starts: vec![0; partitions + 1] }
    }

    /// Groups rows `0..ids.len()` by `ids` (a counting sort).
    pub(super) fn group(&mut self, ids: &[u32]) {
        self.starts.fill(0);
        for id in ids {
            self.starts[*id as usize + 1] += 1;
        }
        for partition in 1..self.starts.len() {
            self.starts[partition] += self.starts[partition - 1];
        }
        self.rows.resize(ids.len(), 0);
        let mut next = self.starts.clone();
        for (row, id) in ids.iter().enumerate() {
            let slot = &mut next[*id as usize];
            self.rows[*slot as usize] = row as u32;
            *slot += 1;
        }
    }

    /// Where partition `partition`'s rows are in [`Self::rows`].
    pub(super) fn range(&self, partition: usize) -> Range<u32> {
        self.starts[partition]..self.starts[partition + 1]
    }

    pub(super) fn len(&self, partition: usize) -> usize {
        self.range(partition).len()
    }

    /// Every row, partition by partition.
    pub(super) fn rows(&self) -> &[u32] {
        &self.rows
    }

    /// Each partition's rows, partition by partition.
    pub(super) fn partitions(&self) -> impl Iterator<Item = &[u32]> {
        self.starts.windows(2).map(|range| &self.rows[range[0] as usize..range[1] as usize])
    }
}

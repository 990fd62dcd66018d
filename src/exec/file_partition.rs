//! Spark's `FilePartition.getFilePartitions`: how a non-bucketed scan cuts its files into
//! splits and packs the splits into partitions.
//!
//! Each file is cut into splits of at most `maxSplitBytes` (Parquet is splittable).
//! `maxSplitBytes` is `spark.sql.files.maxPartitionBytes`, lowered so that the files (each
//! counted with `spark.sql.files.openCostInBytes` for opening it) spread over at least
//! `spark.sql.files.minPartitionNum` partitions (the number of cores unless set), but never
//! below the open cost. The splits, largest first, are packed "next fit decreasing": a
//! partition is closed when the next split would take it past `maxSplitBytes`.
//!
//! So a large single file is read by several partitions, as Spark reads it, and many small
//! files share one. Spark 4's `spark.sql.files.maxPartitionNum` (unset by default) is not
//! read. Bucketed scans keep one partition per bucket and do not come here.
//!
//! A split reads the row groups whose midpoint lies in its byte range, as Spark's reader
//! (parquet-java's `filterFileMetaDataByMidpoint`) gives them: [`row_group_midpoints`] reads
//! the midpoints from the file's footer and [`Split::row_groups`] selects by them, because
//! DataFusion's reader, given a byte range, would take the row groups whose first page lies
//! in it instead (lineitem at SF1 would be read as 28 and 25 row groups, where Spark reads
//! 27 and 26).

use std::ops::Range;

use datafusion::datasource::physical_plan::parquet::{ParquetAccessPlan, RowGroupAccess};
use datafusion::parquet::file::metadata::ParquetMetaData;

use crate::catalog::table::DataFile;

/// The settings that decide how files are cut and packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSplitting {
    /// `spark.sql.files.maxPartitionBytes`.
    pub max_partition_bytes: u64,
    /// `spark.sql.files.openCostInBytes`.
    pub open_cost: u64,
    /// `spark.sql.files.minPartitionNum`, else the default parallelism.
    pub min_partitions: usize,
}

/// A byte range of one file, read by one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    pub file: &'a DataFile,
    pub range: Range<u64>,
}

impl Split<'_> {
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// Whether the split is its whole file.
    pub fn is_whole_file(&self) -> bool {
        self.range.start == 0 && self.range.end == self.file.byte_size
    }

    /// The row groups of its file (their `midpoints`) that the split reads: those whose
    /// midpoint lies in its range, so that every row group is read by exactly one split.
    pub fn row_groups(&self, midpoints: &[u64]) -> ParquetAccessPlan {
        ParquetAccessPlan::new(
            midpoints
                .iter()
                .map(|midpoint| match self.range.contains(midpoint) {
                    true => RowGroupAccess::Scan,
                    false => RowGroupAccess::Skip,
                })
                .collect(),
        )
    }
}

/// Each row group's midpoint as parquet-java places it: the offset of its first column's
/// first page (the dictionary page's, when it comes first) plus half its compressed size. A
/// row group without columns has no rows; it is given to the first split.
pub fn row_group_midpoints(footer: &ParquetMetaData) -> Vec<u64> {
    footer
        .row_groups()
        .iter()
        .map(|group| {
            let Some(first) = group.columns().first() else { return 0 };
            let data = first.data_page_offset();
            let start = first.dictionary_page_offset().map_or(data, |dictionary| dictionary.min(data));
            (start + group.compressed_size() / 2).max(0) as u64
        })
        .collect()
}

impl FileSplitting {
    /// Spark's `FilePartition.maxSplitBytes`.
    pub fn max_split_bytes(&self, files: &[&DataFile]) -> u64 {
        let total: u64 = files.iter().map(|f| f.byte_size + self.open_cost).sum();
        let per_core = total / self.min_partitions.max(1) as u64;
        self.max_partition_bytes.min(self.open_cost.max(per_core)).max(1)
    }

    /// The partitions of a scan of `files`, each the splits it reads.
    pub fn partitions<'a>(&self, files: &[&'a DataFile]) -> Vec<Vec<Split<'a>>> {
        let max_split = self.max_split_bytes(files);
        let mut splits: Vec<Split<'a>> = files
            .iter()
            .flat_map(|file| {
                (0..file.byte_size.max(1))
                    .step_by(max_split as usize)
                    .map(move |start| Split { file, range: start..(start + max_split).min(file.byte_size) })
            })
            .collect();
        // Largest first; ties in the order of the files' paths, so that plans repeat.
        splits.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.file.path.cmp(&b.file.path)));
        let mut partitions = Vec::new();
        let mut current: Vec<Split<'a>> = Vec::new();
        let mut current_size = 0;
        for split in splits {
            if current_size + split.len() > max_split && !current.is_empty() {
                partitions.push(std::mem::take(&mut current));
                current_size = 0;
            }
            current_size += split.len() + self.open_cost;
            current.push(split);
        }
        if !current.is_empty() {
            partitions.push(current);
        }
        partitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn file(path: &str, bytes: u64) -> DataFile {
        DataFile { path: path.into(), partition: String::new(), bucket: None, row_count: 1, byte_size: bytes }
    }

    /// Spark's defaults on two cores.
    const DEFAULTS: FileSplitting =
        FileSplitting { max_partition_bytes: 128 * MB, open_cost: 4 * MB, min_partitions: 2 };

    fn sizes(partitions: &[Vec<Split>]) -> Vec<Vec<u64>> {
        partitions.iter().map(|p| p.iter().map(Split::len).collect()).collect()
    }

    #[test]
    fn one_large_file_is_read_in_splits_of_max_split_bytes() {
        let lineitem = file("lineitem.parquet", 300 * MB);
        let partitions = DEFAULTS.partitions(&[&lineitem]);
        // (300 + 4) / 2 = 152 MB per core, capped at 128 MB.
        assert_eq!(sizes(&partitions), [vec![128 * MB], vec![128 * MB], vec![44 * MB]]);
        let ranges: Vec<Range<u64>> = partitions.iter().map(|p| p[0].range.clone()).collect();
        assert_eq!(ranges, [0..128 * MB, 128 * MB..256 * MB, 256 * MB..300 * MB]);
    }

    #[test]
    fn a_mid_sized_file_is_split_so_that_every_core_reads_part_of_it() {
        let orders = file("orders.parquet", 60 * MB);
        // (60 + 4) / 2 = 32 MB.
        assert_eq!(sizes(&DEFAULTS.partitions(&[&orders])), [vec![32 * MB], vec![28 * MB]]);
    }

    #[test]
    fn small_files_are_packed_counting_their_open_cost() {
        let files: Vec<DataFile> = (0..6).map(|i| file(&format!("f{i}"), MB)).collect();
        let refs: Vec<&DataFile> = files.iter().collect();
        // (6 × 5 MB) / 2 = 15 MB: three files (5 MB each with the open cost) per partition.
        assert_eq!(DEFAULTS.max_split_bytes(&refs), 15 * MB);
        assert_eq!(sizes(&DEFAULTS.partitions(&refs)), [vec![MB; 3], vec![MB; 3]]);
        // A tiny table stays in one partition: the split never goes below the open cost.
        let tiny = file("tiny", 1000);
        assert_eq!(DEFAULTS.max_split_bytes(&[&tiny]), 4 * MB);
        assert_eq!(DEFAULTS.partitions(&[&tiny]).len(), 1);
    }

    #[test]
    fn splits_are_packed_largest_first_next_fit() {
        let files = [file("a", 100 * MB), file("b", 20 * MB), file("c", 90 * MB), file("d", 10 * MB)];
        let refs: Vec<&DataFile> = files.iter().collect();
        let splitting = FileSplitting { min_partitions: 1, ..DEFAULTS };
        // 128 MB per split. a (104 MB with its open cost) has no room for c; c (94) takes b
        // (94 + 20 fits, 118 with the cost) and then d (118 + 10 is not past 128).
        let partitions = splitting.partitions(&refs);
        let names: Vec<Vec<&str>> =
            partitions.iter().map(|p| p.iter().map(|s| s.file.path.as_str()).collect()).collect();
        assert_eq!(names, [vec!["a"], vec!["c", "b", "d"]]);
        assert!(partitions.iter().flatten().all(Split::is_whole_file));
    }

    #[test]
    fn an_empty_file_is_one_empty_split() {
        let empty = file("empty", 0);
        let partitions = DEFAULTS.partitions(&[&empty]);
        assert_eq!(partitions.len(), 1);
        assert_eq!(partitions[0][0].range, 0..0);
    }
}

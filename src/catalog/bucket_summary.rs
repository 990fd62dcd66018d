//! How a bucketed table's rows spread over its buckets, from the committed file list alone:
//! what `SHOW BUCKETS`, `DESCRIBE EXTENDED` and EXPLAIN's advice report without reading data.

use super::table::DataFile;

/// Files, rows and bytes per bucket id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSummary {
    pub files: Vec<u64>,
    pub rows: Vec<u64>,
    pub bytes: Vec<u64>,
}

impl BucketSummary {
    /// The buckets of `files` (a file without a bucket id counts nowhere).
    pub fn of<'a>(num_buckets: u32, files: impl IntoIterator<Item = &'a DataFile>) -> Self {
        let n = num_buckets as usize;
        let mut summary = BucketSummary { files: vec![0; n], rows: vec![0; n], bytes: vec![0; n] };
        for file in files {
            let Some(bucket) = file.bucket.map(|b| b as usize).filter(|b| *b < n) else { continue };
            summary.files[bucket] += 1;
            summary.rows[bucket] += file.row_count;
            summary.bytes[bucket] += file.byte_size;
        }
        summary
    }

    pub fn total_rows(&self) -> u64 {
        self.rows.iter().sum()
    }

    /// The largest bucket's rows over the mean bucket's; `None` for a table without rows.
    pub fn skew(&self) -> Option<f64> {
        let total = self.total_rows();
        let largest = self.rows.iter().max().copied()?;
        (total > 0).then(|| largest as f64 * self.rows.len() as f64 / total as f64)
    }

    /// The bucket holding the most rows, and its share of all rows.
    pub fn largest(&self) -> Option<(usize, f64)> {
        let total = self.total_rows();
        let (bucket, rows) = self.rows.iter().enumerate().max_by_key(|(i, rows)| (**rows, std::cmp::Reverse(*i)))?;
        (total > 0).then(|| (bucket, *rows as f64 / total as f64))
    }

    pub fn empty_buckets(&self) -> usize {
        self.rows.iter().filter(|rows| **rows == 0).count()
    }

    /// Mean size of the table's bucket files; `None` without files.
    pub fn mean_file_bytes(&self) -> Option<u64> {
        let files: u64 = self.files.iter().sum();
        (files > 0).then(|| self.bytes.iter().sum::<u64>() / files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bucket: u32, rows: u64, bytes: u64) -> DataFile {
        DataFile {
            path: format!("f{bucket}"),
            partition: String::new(),
            bucket: Some(bucket),
            row_count: rows,
            byte_size: bytes,
        }
    }

    #[test]
    fn sums_per_bucket_and_measures_skew() {
        let files = [file(0, 10, 100), file(0, 30, 300), file(2, 40, 200), file(9, 5, 5)];
        let summary = BucketSummary::of(4, &files);
        assert_eq!(summary.rows, vec![40, 0, 40, 0]);
        assert_eq!(summary.files, vec![2, 0, 1, 0]);
        assert_eq!(summary.empty_buckets(), 2);
        assert_eq!(summary.skew(), Some(2.0));
        assert_eq!(summary.largest(), Some((0, 0.5)));
        assert_eq!(summary.mean_file_bytes(), Some(200));
        let empty = BucketSummary::of(3, &[]);
        assert_eq!((empty.skew(), empty.largest(), empty.mean_file_bytes()), (None, None, None));
    }
}

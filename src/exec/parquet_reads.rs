//! How a scan reads its Parquet files: each footer through the runtime's footer cache, so
//! that a file's footer is fetched once while it stays cached (the cache is bounded, a share
//! of `--memory-limit`), and every read request counted. Beside DataFusion's own count of
//! the bytes read, EXPLAIN ANALYZE and the web UI show the requests of each scan: on object
//! storage each one is a request to the store.
//!
//! Spark reads each footer again per task unless its file-status cache holds it; the figures
//! are ours, not Spark's.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::Result;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{CachedParquetFileReaderFactory, ParquetFileReaderFactory};
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use futures::future::BoxFuture;
use object_store::ObjectStore;

/// The name of the count of a scan's read requests among its metrics.
pub const READ_REQUESTS: &str = "read_requests";

#[derive(Debug)]
pub struct CountedReads {
    inner: CachedParquetFileReaderFactory,
    footers: Arc<FileMetadataCache>,
}

impl CountedReads {
    pub fn new(store: Arc<dyn ObjectStore>, footers: Arc<FileMetadataCache>) -> Self {
        CountedReads { inner: CachedParquetFileReaderFactory::new(store, Arc::clone(&footers)), footers }
    }

    /// The footer of `file`, through the cache, for planning: its request counts in no
    /// scan's figures, and the scan that reads the file then finds the footer cached.
    pub async fn footer(&self, file: PartitionedFile) -> Result<Arc<ParquetMetaData>> {
        let mut reader = self.inner.create_reader(0, file, None, &ExecutionPlanMetricsSet::new())?;
        Ok(reader.get_metadata(None).await?)
    }
}

impl ParquetFileReaderFactory for CountedReads {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let requests = MetricBuilder::new(metrics).counter(READ_REQUESTS, partition_index);
        let footer_cached = self.footers.contains_key(&file.object_meta.location);
        let inner = self.inner.create_reader(partition_index, file, metadata_size_hint, metrics)?;
        Ok(Box::new(CountingReader { inner, requests, footer_cached }))
    }
}

struct CountingReader {
    inner: Box<dyn AsyncFileReader + Send>,
    requests: Count,
    /// Whether the footer came from the cache, costing no request.
    footer_cached: bool,
}

impl AsyncFileReader for CountingReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, datafusion::parquet::errors::Result<Bytes>> {
        self.requests.add(1);
        self.inner.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, datafusion::parquet::errors::Result<Vec<Bytes>>> {
        self.requests.add(ranges.len());
        self.inner.get_byte_ranges(ranges)
    }

    /// A footer fetched counts as one request (two when it is larger than the first read
    /// guessed, which is not told apart).
    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, datafusion::parquet::errors::Result<Arc<ParquetMetaData>>> {
        if !std::mem::replace(&mut self.footer_cached, true) {
            self.requests.add(1);
        }
        self.inner.get_metadata(options)
    }
}

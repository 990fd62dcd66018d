//! Spark's `FileSourceScanExec` over one committed version of a table.
//!
//! A bucketed scan has one output partition per bucket (all files of that bucket across the
//! selected Hive partitions; pruned buckets stay as empty partitions) and reports
//! `hashpartitioning(bucket columns, n)`, which lets joins and aggregates on the bucket key
//! skip the exchange. Coalesced to `m` buckets, partition `i` reads buckets `b` with
//! `b % m == i`. A non-bucketed scan spreads files over the session's cores by size. Rows are
//! read by DataFusion's Parquet source, with projection and row-group pruning.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use datafusion::common::cast::as_boolean_array;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::expressions::{Column, IsNotNullExpr};
use datafusion::physical_expr::{EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties};
use futures::{StreamExt, TryStreamExt};

use super::file_partition::{FileSplitting, row_group_midpoints};
use super::parquet_reads::CountedReads;
use crate::catalog::table::{BucketSpec, DataFile, TableMeta};
use crate::storage::object_stores::scan_path;
use crate::storage::partition_path::partition_values;

/// Whether the scan reads by bucket, and if not, why not (Spark's EXPLAIN wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketedStatus {
    Bucketed,
    /// `spark.sql.sources.bucketing.enabled=false`.
    DisabledByConfiguration,
    /// `DisableUnnecessaryBucketedScan` found nothing that profits from the buckets.
    DisabledByQueryPlanner,
    /// Some bucket column is not among the columns read.
    BucketColumnsNotRead,
    /// The table has no bucket spec.
    NotBucketedTable,
}

impl BucketedStatus {
    /// The `Bucketed:` line of EXPLAIN FORMATTED, `None` for tables without buckets.
    pub fn explain(&self) -> Option<&'static str> {
        Some(match self {
            BucketedStatus::Bucketed => "true",
            BucketedStatus::DisabledByConfiguration => "false (disabled by configuration)",
            BucketedStatus::DisabledByQueryPlanner => "false (disabled by query planner)",
            BucketedStatus::BucketColumnsNotRead => "false (bucket column(s) not read)",
            BucketedStatus::NotBucketedTable => return None,
        })
    }
}

/// What the planner decided about the scan, kept for EXPLAIN.
#[derive(Debug, Clone, Default)]
pub struct ScanFilters {
    /// Spark's data source filters (`IsNotNull(k)`, `EqualTo(k,42)`) handed to the reader.
    pub pushed: Vec<String>,
    /// Filters on partition columns, applied by skipping partition directories.
    pub partition: Vec<Arc<dyn PhysicalExpr>>,
    /// The rest, as expressions over the table's columns.
    pub data: Vec<Arc<dyn PhysicalExpr>>,
}

#[derive(Debug, Clone)]
pub struct FileSourceScanExec {
    request: ScanRequest,
    /// The row groups' midpoints of each file read in several splits, by path.
    midpoints: HashMap<String, Vec<u64>>,
    coalesced_to: Option<u32>,
    inner: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

/// What the planner decided a scan reads.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    pub table: Arc<TableMeta>,
    /// The table's columns, partition columns last.
    pub table_schema: SchemaRef,
    /// Table column indices read, in output order.
    pub projection: Vec<usize>,
    /// Files of the selected partitions.
    pub files: Vec<DataFile>,
    /// Bucket pruning: `selected[b]` for every bucket, `None` when all are read.
    pub selected_buckets: Option<Vec<bool>>,
    pub status: BucketedStatus,
    /// Spark's `spark.sql.legacy.bucketedTableScan.outputOrdering`.
    pub sorted_output: bool,
    pub filters: ScanFilters,
    /// The data filters joined with AND, for Parquet row-group pruning.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    /// How a non-bucketed scan cuts its files into partitions.
    pub splitting: FileSplitting,
    /// Spark's `spark.sql.parquet.recordLevelFilter.enabled`: filter rows while decoding.
    pub record_level_filter: bool,
    /// How the files are read: footers through the runtime's cache, requests counted.
    pub reads: Arc<CountedReads>,
    /// The filter's leading conjuncts, applied in the scan over string columns read as views.
    pub prefilter: Option<ViewPrefilter>,
}

/// String columns read as views (`Utf8View`) and filtered by the leading conjuncts of the
/// filter above while still views (`planner::view_prefilter`).
///
/// A string column read as `Utf8` has every value copied out of its page, which for a
/// dictionary-encoded column is a copy per row; as views, a row is 16 bytes pointing into the
/// page, and comparing one with a literal looks at its length and first bytes. The rows that
/// pass are then copied as `Utf8`, which every operator above reads. The filter above still
/// applies the whole condition, as Spark's does over its scan.
#[derive(Debug, Clone)]
pub struct ViewPrefilter {
    /// Table column indices read as views.
    pub columns: Vec<usize>,
    /// The conjuncts, over the columns read (in output order), the strings among them views.
    pub condition: Arc<dyn PhysicalExpr>,
    /// All pushed filters over the table's columns, those strings views, for pruning.
    pub pruning: Option<Arc<dyn PhysicalExpr>>,
}

impl ViewPrefilter {
    /// `schema` with its columns `columns` read as views.
    pub fn with_views(schema: &Schema, columns: &[usize]) -> Schema {
        let fields = schema.fields().iter().enumerate().map(|(i, f)| match columns.contains(&i) {
            true => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            false => Arc::clone(f),
        });
        Schema::new(fields.collect::<Vec<FieldRef>>())
    }

    /// `rows` filtered by the condition, the views among them back to `Utf8` (`schema`).
    fn apply(&self, rows: SendableRecordBatchStream, schema: SchemaRef) -> SendableRecordBatchStream {
        let (condition, output) = (Arc::clone(&self.condition), Arc::clone(&schema));
        let filtered = rows.filter_map(move |batch| {
            let kept = batch.and_then(|batch| {
                let passed = condition.evaluate(&batch)?.into_array(batch.num_rows())?;
                let kept = filter_record_batch(&batch, as_boolean_array(&passed)?)?;
                let columns = kept
                    .columns()
                    .iter()
                    .zip(output.fields())
                    .map(|(column, field)| cast(column, field.data_type()))
                    .collect::<Result<_, _>>()?;
                Ok(RecordBatch::try_new(Arc::clone(&output), columns)?)
            });
            std::future::ready(match kept {
                Ok(batch) if batch.num_rows() == 0 => None,
                kept => Some(kept),
            })
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, filtered))
    }
}

impl FileSourceScanExec {
    /// The scan `request` asks for. The footers of the files it reads in several splits are
    /// read now, for their row groups' places.
    pub async fn try_new(request: ScanRequest) -> Result<Self> {
        let placeholder: Arc<dyn ExecutionPlan> =
            Arc::new(datafusion::physical_plan::empty::EmptyExec::new(Arc::new(Schema::empty())));
        let mut scan = FileSourceScanExec {
            request,
            midpoints: HashMap::new(),
            coalesced_to: None,
            properties: Arc::clone(placeholder.properties()),
            inner: placeholder,
        };
        // Whether the scan reads by bucket may still change (`with_status`), so a bucketed
        // table's large files are looked at as well.
        let selected = scan.selected_files();
        let max_split = scan.request.splitting.max_split_bytes(&selected);
        let partition_columns = scan.partition_columns()?;
        let split_files: Vec<&DataFile> = selected.into_iter().filter(|file| file.byte_size > max_split).collect();
        let footers = split_files.iter().map(|file| {
            let partitioned = scan.partitioned_file(file, &partition_columns);
            async { scan.request.reads.footer(partitioned?).await }
        });
        let footers = futures::future::try_join_all(footers).await?;
        scan.midpoints = split_files
            .iter()
            .zip(footers)
            .map(|(file, footer)| (file.path.clone(), row_group_midpoints(&footer)))
            .collect();
        scan.rebuild()?;
        Ok(scan)
    }

    pub fn table(&self) -> &TableMeta {
        &self.request.table
    }

    /// All of the table's columns, partition columns last.
    pub fn table_schema(&self) -> &Schema {
        &self.request.table_schema
    }

    pub fn bucket_spec(&self) -> Option<&BucketSpec> {
        self.request.table.bucket_spec.as_ref()
    }

    pub fn status(&self) -> BucketedStatus {
        self.request.status
    }

    pub fn is_bucketed(&self) -> bool {
        self.request.status == BucketedStatus::Bucketed
    }

    pub fn coalesced_to(&self) -> Option<u32> {
        self.coalesced_to
    }

    pub fn filters(&self) -> &ScanFilters {
        &self.request.filters
    }

    pub fn selected_bucket_count(&self) -> Option<usize> {
        let spec = self.bucket_spec()?;
        Some(
            self.request
                .selected_buckets
                .as_ref()
                .map_or(spec.num_buckets as usize, |s| s.iter().filter(|b| **b).count()),
        )
    }

    /// Partition directories read, relative to the table location.
    pub fn selected_partitions(&self) -> Vec<&str> {
        let mut partitions: Vec<&str> = self.request.files.iter().map(|f| f.partition.as_str()).collect();
        partitions.sort_unstable();
        partitions.dedup();
        partitions
    }

    /// Columns stored in the files that the scan reads (Spark's `ReadSchema`).
    pub fn read_schema(&self) -> SchemaRef {
        let fields: Vec<FieldRef> = self
            .request
            .projection
            .iter()
            .map(|i| Arc::new(self.request.table_schema.field(*i).clone()))
            .filter(|f| !self.request.table.partition_columns.contains(f.name()))
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// Files the scan reads after partition and bucket pruning.
    pub fn files_read(&self) -> usize {
        self.request.files.iter().filter(|f| self.bucket_selected(f.bucket)).count()
    }

    /// Spark's size estimate of a file relation: the table's catalog statistics
    /// (`spark.sql.statistics.totalSize`, from `ANALYZE TABLE` or declared with `ALTER TABLE
    /// .. SET TBLPROPERTIES`) when the scan reads the whole table, else the bytes of the files
    /// read (as Spark's `PruneFileSourcePartitions` replaces the statistics of a pruned scan).
    pub fn size_in_bytes(&self) -> u64 {
        self.declared_size().unwrap_or_else(|| self.bytes_read())
    }

    /// The catalog statistics' size, where it is the scan's estimate.
    pub fn declared_size(&self) -> Option<u64> {
        let table = &self.request.table;
        let whole_table = self.request.files.len() == table.files.len()
            && self.request.selected_buckets.as_ref().is_none_or(|selected| selected.iter().all(|b| *b));
        let declared = table.declared_size()?;
        whole_table.then_some(declared)
    }

    /// Bytes of the files read, after partition and bucket pruning.
    pub fn bytes_read(&self) -> u64 {
        self.request.files.iter().filter(|f| self.bucket_selected(f.bucket)).map(|f| f.byte_size).sum()
    }

    /// A copy with another bucketing decision (`DisableUnnecessaryBucketedScan`).
    pub fn with_status(&self, status: BucketedStatus) -> Result<Self> {
        let mut scan = self.clone();
        scan.request.status = status;
        scan.rebuild()?;
        Ok(scan)
    }

    /// A copy reading `buckets` coalesced buckets (`CoalesceBucketsInJoin`).
    pub fn with_coalesced_buckets(&self, buckets: u32) -> Result<Self> {
        let mut scan = self.clone();
        scan.coalesced_to = Some(buckets);
        scan.rebuild()?;
        Ok(scan)
    }

    fn bucket_selected(&self, bucket: Option<u32>) -> bool {
        match (&self.request.selected_buckets, bucket) {
            (Some(selected), Some(b)) => selected.get(b as usize).copied().unwrap_or(false),
            _ => true,
        }
    }

    /// The ordering of a bucketed scan: the longest prefix of the sort columns that is read.
    /// Every file is sorted on them as written, so a bucket of one file is in order; as Spark,
    /// the scan reports no order once any bucket (of the partitions read) has several files.
    fn output_ordering(&self) -> Option<LexOrdering> {
        let spec = self.bucket_spec()?;
        if !self.request.sorted_output || !self.is_bucketed() || self.coalesced_to.is_some() {
            return None;
        }
        let mut buckets = HashSet::with_capacity(self.request.files.len());
        if !self.request.files.iter().all(|file| buckets.insert(file.bucket)) {
            return None;
        }
        let sort_exprs: Vec<PhysicalSortExpr> = spec
            .sort_columns
            .iter()
            .map_while(|c| {
                self.output_index(c).map(|i| PhysicalSortExpr::new(Arc::new(Column::new(c, i)), Default::default()))
            })
            .collect();
        LexOrdering::new(sort_exprs)
    }

    fn output_index(&self, column: &str) -> Option<usize> {
        self.request.projection.iter().position(|i| self.request.table_schema.field(*i).name() == column)
    }

    /// The files of the selected buckets (all, when none were pruned).
    fn selected_files(&self) -> Vec<&DataFile> {
        self.request.files.iter().filter(|f| self.bucket_selected(f.bucket)).collect()
    }

    /// The table's Hive partition columns and their types.
    fn partition_columns(&self) -> Result<Vec<(String, DataType)>> {
        let schema = &self.request.table_schema;
        let columns = self.request.table.partition_columns.iter();
        columns.map(|c| Ok((c.clone(), schema.field_with_name(c)?.data_type().clone()))).collect()
    }

    /// `file` as DataFusion's reader takes it, whole, with its values of `partition_columns`.
    fn partitioned_file(&self, file: &DataFile, partition_columns: &[(String, DataType)]) -> Result<PartitionedFile> {
        let external = |e| DataFusionError::External(Box::new(e));
        let values = partition_values(&file.partition, partition_columns).map_err(external)?;
        let mut partitioned = PartitionedFile::new(String::new(), file.byte_size).with_partition_values(values);
        (_, partitioned.object_meta.location) = scan_path(&self.request.table.file_path(file)).map_err(external)?;
        Ok(partitioned)
    }

    fn rebuild(&mut self) -> Result<()> {
        let partition_columns = self.partition_columns()?;
        let (store, _) = scan_path(&self.request.table.location).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let selected = self.selected_files();

        let ordering = self.output_ordering();
        let (groups, partitioning) = match (self.is_bucketed(), self.bucket_spec()) {
            (true, Some(spec)) => {
                let count = self.coalesced_to.unwrap_or(spec.num_buckets) as usize;
                let mut groups = vec![Vec::new(); count];
                for file in &selected {
                    let bucket = file.bucket.ok_or_else(|| {
                        DataFusionError::Internal(format!("file {} of a bucketed table has no bucket id", file.path))
                    })?;
                    groups[bucket as usize % count].push(self.partitioned_file(file, &partition_columns)?);
                }
                let keys = spec
                    .bucket_columns
                    .iter()
                    .map(|c| {
                        let index = self.output_index(c).ok_or_else(|| {
                            DataFusionError::Internal(format!("bucket column {c} is not read by a bucketed scan"))
                        })?;
                        Ok(Arc::new(Column::new(c, index)) as Arc<dyn PhysicalExpr>)
                    })
                    .collect::<Result<Vec<_>>>()?;
                (groups, Partitioning::Hash(keys, count))
            }
            _ => {
                let mut groups = Vec::new();
                for partition in self.request.splitting.partitions(&selected) {
                    let mut files = Vec::with_capacity(partition.len());
                    for split in partition {
                        let file = self.partitioned_file(split.file, &partition_columns)?;
                        files.push(match split.is_whole_file() {
                            true => file,
                            false => {
                                let midpoints = self.midpoints.get(&split.file.path).ok_or_else(|| {
                                    DataFusionError::Internal(format!(
                                        "the footer of {}, read in splits, was not read when the scan was planned",
                                        split.file.path
                                    ))
                                })?;
                                file.with_extension(split.row_groups(midpoints))
                            }
                        });
                    }
                    groups.push(files);
                }
                if groups.is_empty() {
                    // No file: one empty partition.
                    groups.push(Vec::new());
                }
                let count = groups.len();
                (groups, Partitioning::UnknownPartitioning(count))
            }
        };

        let partition_fields: Vec<FieldRef> = partition_columns
            .iter()
            .map(|(name, _)| Ok(Arc::new(self.request.table_schema.field_with_name(name)?.clone())))
            .collect::<Result<_>>()?;
        let viewed = self.request.prefilter.as_ref().map_or(&[][..], |prefilter| &prefilter.columns);
        let file_fields: Vec<FieldRef> = ViewPrefilter::with_views(&self.request.table_schema, viewed)
            .fields()
            .iter()
            .filter(|f| !self.request.table.partition_columns.contains(f.name()))
            .cloned()
            .collect();
        let table_schema = TableSchema::builder(Arc::new(Schema::new(file_fields)))
            .with_table_partition_cols(partition_fields)
            .build();
        let mut source = ParquetSource::new(table_schema)
            .with_parquet_file_reader_factory(Arc::clone(&self.request.reads) as Arc<dyn ParquetFileReaderFactory>);
        let pruning = match &self.request.prefilter {
            Some(prefilter) => prefilter.pruning.as_ref(),
            None => self.request.predicate.as_ref(),
        };
        if let Some(predicate) = pruning {
            // Row groups and pages the statistics rule out are skipped. With record-level
            // filtering, the rest is filtered while decoding: the filter columns first, the
            // others only for the rows that pass (late materialization). The Filter above still
            // applies the whole condition, as Spark's does over its scan.
            source =
                source.with_predicate(Arc::clone(predicate)).with_pushdown_filters(self.request.record_level_filter);
        }
        // Partition i must read exactly bucket i: a declared partitioning keeps DataFusion
        // from letting partitions steal each other's files.
        let declared = matches!(partitioning, Partitioning::Hash(..)).then(|| partitioning.clone());
        let config = FileScanConfigBuilder::new(store, Arc::new(source))
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .with_projection_indices(Some(self.request.projection.clone()))?
            .with_output_partitioning(declared)
            .with_preserve_order(self.request.sorted_output)
            .build();
        let inner: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);

        // The prefilter's views leave the scan as `Utf8` again.
        let schema = match &self.request.prefilter {
            Some(_) => Arc::new(Schema::new(
                inner
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| match f.data_type() {
                        DataType::Utf8View => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8)),
                        _ => Arc::clone(f),
                    })
                    .collect::<Vec<FieldRef>>(),
            )),
            None => inner.schema(),
        };
        let mut equivalence = EquivalenceProperties::new(Arc::clone(&schema));
        if let Some(ordering) = ordering {
            equivalence.add_ordering(ordering);
        }
        self.properties =
            Arc::new(PlanProperties::new(equivalence, partitioning, EmissionType::Incremental, Boundedness::Bounded));
        self.inner = inner;
        Ok(())
    }
}

impl DisplayAs for FileSourceScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "FileSourceScanExec: {}.{} bucketed={:?}",
            self.request.table.schema, self.request.table.name, self.request.status
        )?;
        // In full, all that decides the rows read: two scans that print alike read alike.
        if let DisplayFormatType::Verbose = t {
            write!(f, "{}", self.rows_read(&self.request.filters))?;
        }
        Ok(())
    }
}

impl FileSourceScanExec {
    /// All that decides the rows the scan reads, were its filters `filters`.
    fn rows_read(&self, filters: &ScanFilters) -> String {
        let files: Vec<&str> = self.request.files.iter().map(|file| file.path.as_str()).collect();
        format!(
            " projection={:?} filters={filters:?} selected_buckets={:?} coalesced_to={:?} files={files:?}",
            self.request.projection, self.request.selected_buckets, self.coalesced_to
        )
    }

    /// The scan as its full display shows it, less its filters' null checks of columns
    /// (`IsNotNull(c)` pushed, `c IS NOT NULL` among the data filters), and the columns whose
    /// checks were left out.
    pub fn shown_without_null_checks(&self) -> (String, Vec<String>) {
        let mut columns = Vec::new();
        let mut filters = self.request.filters.clone();
        filters.data.retain(|filter| match null_checked_column(filter) {
            Some(column) => {
                columns.push(column.to_string());
                false
            }
            None => true,
        });
        filters.pushed.retain(|pushed| !columns.iter().any(|column| *pushed == format!("IsNotNull({column})")));
        let shown = format!(
            "FileSourceScanExec: {}.{} bucketed={:?}{}",
            self.request.table.schema,
            self.request.table.name,
            self.request.status,
            self.rows_read(&filters)
        );
        (shown, columns)
    }

    /// Whether no row the scan reads has `column` NULL, by its files' footers: in every file
    /// the column, by its exact name as the reader takes it, is required, or every row
    /// group's statistics count no NULL in it. Footers
    /// come through the runtime's cache, which the scan reads them from when it runs.
    pub async fn holds_no_null(&self, column: &str) -> Result<bool> {
        let partition_columns = self.partition_columns()?;
        let files: Vec<PartitionedFile> = self
            .request
            .files
            .iter()
            .map(|file| self.partitioned_file(file, &partition_columns))
            .collect::<Result<_>>()?;
        let reads = Arc::clone(&self.request.reads);
        let footers = futures::stream::iter(files)
            .map(move |file| {
                let reads = Arc::clone(&reads);
                async move { reads.footer(file).await }
            })
            .buffer_unordered(FOOTERS_AT_ONCE);
        futures::pin_mut!(footers);
        while let Some(footer) = footers.try_next().await? {
            if !holds_no_null_in(&footer, column) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The footers read at once to learn whether a column holds a NULL.
const FOOTERS_AT_ONCE: usize = 16;

/// Whether the file of `footer` holds no NULL in its top-level column `column`.
fn holds_no_null_in(footer: &ParquetMetaData, column: &str) -> bool {
    let schema = footer.file_metadata().schema_descr();
    let found = (0..schema.num_columns()).find(|&index| {
        let leaf = schema.column(index);
        leaf.path().parts().len() == 1 && leaf.name() == column
    });
    let Some(index) = found else { return false };
    let counted_none = || {
        footer
            .row_groups()
            .iter()
            .all(|group| group.column(index).statistics().and_then(|statistics| statistics.null_count_opt()) == Some(0))
    };
    schema.column(index).max_def_level() == 0 || counted_none()
}

/// The column `expr` checks is not NULL, if that is all it does.
pub fn null_checked_column(expr: &Arc<dyn PhysicalExpr>) -> Option<&str> {
    let check = expr.downcast_ref::<IsNotNullExpr>()?;
    check.arg().downcast_ref::<Column>().map(Column::name)
}

impl ExecutionPlan for FileSourceScanExec {
    fn name(&self) -> &str {
        "FileSourceScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        match &self.request.predicate {
            Some(predicate) => f(predicate),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let rows = self.inner.execute(partition, context)?;
        Ok(match &self.request.prefilter {
            Some(prefilter) => prefilter.apply(rows, self.schema()),
            None => rows,
        })
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    use super::{ParquetMetaData, holds_no_null_in};

    /// The footer of a file of one BIGINT column `k` holding `values`, in row groups of two
    /// rows, with statistics as `statistics` says.
    fn footer(values: Vec<Option<i64>>, nullable: bool, statistics: EnabledStatistics) -> ParquetMetaData {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, nullable)]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(Int64Array::from(values)) as ArrayRef]);
        let properties =
            WriterProperties::builder().set_max_row_group_row_count(Some(2)).set_statistics_enabled(statistics).build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, schema, Some(properties)).unwrap();
        writer.write(&batch.unwrap()).unwrap();
        writer.close().unwrap();
        SerializedFileReader::new(Bytes::from(file)).unwrap().metadata().clone()
    }

    #[test]
    fn a_column_holds_no_null_when_required_or_counted_none_in_every_row_group() {
        let chunk = EnabledStatistics::Chunk;
        assert!(holds_no_null_in(&footer(vec![Some(1), Some(2), Some(3)], false, EnabledStatistics::None), "k"));
        assert!(holds_no_null_in(&footer(vec![Some(1), Some(2), Some(3)], true, chunk), "k"));
        // The reader takes a column by its exact name: one named otherwise is read as NULL.
        assert!(!holds_no_null_in(&footer(vec![Some(1), Some(2), Some(3)], true, chunk), "K"));
        // A NULL in the second row group only.
        assert!(!holds_no_null_in(&footer(vec![Some(1), Some(2), None], true, chunk), "k"));
        // Without statistics an optional column may hold NULLs.
        assert!(!holds_no_null_in(&footer(vec![Some(1), Some(2), Some(3)], true, EnabledStatistics::None), "k"));
        // A column the file lacks is NULL in every row.
        assert!(!holds_no_null_in(&footer(vec![Some(1)], false, chunk), "other"));
    }
}

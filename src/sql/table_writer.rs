//! Writes rows into a table's layout, as Spark's `InsertIntoHadoopFsRelationCommand` does:
//! rows go to their Hive partition directory and their Spark bucket
//! (`pmod(murmur3(bucket columns), n)`), sorted within each file by the SORTED BY columns.
//!
//! The plan: the table's columns plus a bucket-id column → a repartition on
//! (partition values, bucket id) over the session's cores, so each (partition, bucket) lives
//! in exactly one writer → a sort by (partition values, bucket id, sort columns) inside each
//! writer, which spills to disk past the memory budget → one file per (partition, bucket).
//! Spark writes one file per (task, partition, bucket); we write one per (partition, bucket)
//! per write, which keeps the small-file count at the bucket count.

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, col, lit};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use datafusion::prelude::SessionContext;

use crate::catalog::metastore::{BucketSpec, ColumnMeta};
use crate::config::SparkConf;
use crate::error::SqlError;
use crate::exec::sort::SortExec;
use crate::planner::create_physical_plan;
use crate::planner::hints::QueryHints;
use crate::sql::functions::spark_hash::spark_hash_udf;
use crate::sql::history::RunningStatement;
use crate::storage::commit::StagedWrite;
use crate::storage::parquet_writer::{StagedFile, WriteLayout, write_partitions};

const BUCKET_ID_COLUMN: &str = "__bucket_id";

/// The parts of a table definition that decide where rows are written.
pub struct TableLayout<'a> {
    pub columns: Vec<String>,
    pub partition_columns: &'a [String],
    pub bucket_spec: Option<&'a BucketSpec>,
}

impl<'a> TableLayout<'a> {
    pub fn new(columns: &[ColumnMeta], partition_columns: &'a [String], bucket_spec: Option<&'a BucketSpec>) -> Self {
        TableLayout { columns: columns.iter().map(|c| c.name.clone()).collect(), partition_columns, bucket_spec }
    }
}

/// Runs `plan`, whose output columns are the table's columns in order, and writes its rows
/// into `write`'s staging directory in the table's layout.
pub async fn write_table(
    ctx: &SessionContext,
    plan: LogicalPlan,
    layout: &TableLayout<'_>,
    write: &StagedWrite,
) -> Result<Vec<StagedFile>, SqlError> {
    let state = ctx.state();
    let file_schema = |indices: &[usize], schema: &Schema| -> Arc<Schema> {
        Arc::new(Schema::new(indices.iter().map(|i| schema.field(*i).clone()).collect::<Vec<Field>>()))
    };
    if layout.partition_columns.is_empty() && layout.bucket_spec.is_none() {
        let physical = create_physical_plan(&state, &plan, &QueryHints::default()).await?;
        show_running(&state, &physical);
        let layout = WriteLayout::unpartitioned(physical.schema());
        return write_partitions(physical, ctx.task_ctx(), layout, write.staging_dir(), write.id).await;
    }

    let plan = match layout.bucket_spec {
        Some(spec) => {
            let mut exprs: Vec<Expr> =
                layout.columns.iter().map(|c| Ok(col(qualified(&plan, c)?))).collect::<Result<_, SqlError>>()?;
            exprs.push(bucket_id_expr(&plan, spec)?.alias(BUCKET_ID_COLUMN));
            LogicalPlanBuilder::from(plan).project(exprs)?.build()?
        }
        None => plan,
    };
    let input = create_physical_plan(&state, &plan, &QueryHints::default()).await?;
    let schema = input.schema();
    let index = |name: &str| -> Result<usize, SqlError> { Ok(schema.index_of(name)?) };

    let partition_columns: Vec<(usize, String)> =
        layout.partition_columns.iter().map(|c| Ok((index(c)?, c.clone()))).collect::<Result<_, SqlError>>()?;
    let bucket_column = layout.bucket_spec.map(|_| index(BUCKET_ID_COLUMN)).transpose()?;
    let data_columns: Vec<usize> = layout
        .columns
        .iter()
        .filter(|c| !layout.partition_columns.contains(c))
        .map(|c| index(c))
        .collect::<Result<_, SqlError>>()?;

    let column = |i: usize| -> Arc<dyn PhysicalExpr> { Arc::new(Column::new(schema.field(i).name(), i)) };
    let keys: Vec<usize> = partition_columns.iter().map(|(i, _)| *i).chain(bucket_column).collect();
    let sort_columns: Vec<usize> = match layout.bucket_spec {
        Some(spec) => spec.sort_columns.iter().map(|c| index(c)).collect::<Result<_, SqlError>>()?,
        None => Vec::new(),
    };
    let writers = state.config().target_partitions().max(1);
    let distributed: Arc<dyn ExecutionPlan> = Arc::new(RepartitionExec::try_new(
        input,
        Partitioning::Hash(keys.iter().map(|i| column(*i)).collect(), writers),
    )?);
    let ordering = LexOrdering::new(
        keys.iter().chain(&sort_columns).map(|i| PhysicalSortExpr::new(column(*i), SortOptions::new(false, true))),
    )
    .expect("at least one partition or bucket key");
    let sorted: Arc<dyn ExecutionPlan> =
        Arc::new(SortExec::new(ordering, distributed).with_preserve_partitioning(true));
    show_running(&state, &sorted);

    let sorted_by = layout.bucket_spec.map(|spec| spec.sort_columns.clone()).unwrap_or_default();
    let layout = WriteLayout {
        file_schema: file_schema(&data_columns, &schema),
        sorted_by,
        partition_columns,
        bucket_column,
        data_columns,
    };
    write_partitions(sorted, ctx.task_ctx(), layout, write.staging_dir(), write.id).await
}

/// Gives the statement's query history entry the plan the write runs.
fn show_running(state: &SessionState, plan: &Arc<dyn ExecutionPlan>) {
    if let Some(running) = state.config().get_extension::<RunningStatement>() {
        let conf = state.config().get_extension::<SparkConf>().map(|c| c.as_ref().clone()).unwrap_or_default();
        running.planned(plan, conf);
    }
}

/// `pmod(hash(bucket columns), n)`: Spark's `HashPartitioning.partitionIdExpression`.
fn bucket_id_expr(plan: &LogicalPlan, spec: &BucketSpec) -> Result<Expr, SqlError> {
    let args =
        spec.bucket_columns.iter().map(|c| Ok(col(qualified(plan, c)?))).collect::<Result<Vec<_>, SqlError>>()?;
    let hash = Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(spark_hash_udf()), args));
    let n = lit(spec.num_buckets as i32);
    Ok((hash % n.clone() + n.clone()) % n)
}

/// A column of `plan` by name, carrying its qualifier so that names are unambiguous.
fn qualified(plan: &LogicalPlan, name: &str) -> Result<datafusion::common::Column, SqlError> {
    let (qualifier, field) = plan.schema().qualified_field_with_unqualified_name(name)?;
    Ok(datafusion::common::Column::new(qualifier.cloned(), field.name()))
}

//! Writes rows into a table's layout, as Spark's `InsertIntoHadoopFsRelationCommand` does:
//! rows go to their Hive partition directory and their Spark bucket
//! (`pmod(murmur3(bucket columns), n)`), sorted within each file by the SORTED BY columns.
//!
//! The plan for a bucketed table: an exchange on the bucket columns into as many partitions as
//! buckets (Spark's `HashPartitioning`, whose partition ids are the bucket ids), so each bucket
//! is one partition → a sort of each bucket by (partition values, sort columns), which spills
//! past the memory budget → one file per (partition, bucket). A bucket's rows are sorted where
//! they fit the caches, not gathered from everywhere in a writer's share of the table. Without
//! buckets: a repartition on the partition values over the session's cores, then a sort by
//! them. Spark writes one file per (task, partition, bucket); we write one per (partition,
//! bucket) per write, which keeps the small-file count at the bucket count.

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use datafusion::prelude::SessionContext;

use crate::catalog::table::{BucketSpec, ColumnMeta};
use crate::config::SparkConf;
use crate::error::SqlError;
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
use crate::exec::sort::SortExec;
use crate::planner::create_static_plan;
use crate::planner::hints::QueryHints;
use crate::sql::history::RunningStatement;
use crate::storage::commit::StagedWrite;
use crate::storage::parquet_writer::{StagedFile, WriteLayout, write_partitions};

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
/// for `write` in the table's layout.
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
        let physical = create_static_plan(&state, &plan, &QueryHints::default()).await?;
        show_running(&state, &physical)?;
        let layout = WriteLayout::unpartitioned(physical.schema());
        return write_partitions(physical, ctx.task_ctx(), layout, write.target(), write.id).await;
    }

    let input = create_static_plan(&state, &plan, &QueryHints::default()).await?;
    let schema = input.schema();
    let index = |name: &str| -> Result<usize, SqlError> { Ok(schema.index_of(name)?) };
    let column = |i: usize| -> Arc<dyn PhysicalExpr> { Arc::new(Column::new(schema.field(i).name(), i)) };

    let partition_columns: Vec<(usize, String)> =
        layout.partition_columns.iter().map(|c| Ok((index(c)?, c.clone()))).collect::<Result<_, SqlError>>()?;
    let data_columns: Vec<usize> = layout
        .columns
        .iter()
        .filter(|c| !layout.partition_columns.contains(c))
        .map(|c| index(c))
        .collect::<Result<_, SqlError>>()?;
    let mut sort_columns: Vec<usize> = partition_columns.iter().map(|(i, _)| *i).collect();

    let distributed: Arc<dyn ExecutionPlan> = match layout.bucket_spec {
        Some(spec) => {
            let keys = spec.bucket_columns.iter().map(|c| Ok(column(index(c)?))).collect::<Result<_, SqlError>>()?;
            for c in &spec.sort_columns {
                sort_columns.push(index(c)?);
            }
            let partitioning = ExchangePartitioning::Hash(keys, spec.num_buckets as usize);
            Arc::new(ShuffleExchangeExec::new(input, partitioning, Some("the bucketed write".to_string())))
        }
        None => {
            let keys = partition_columns.iter().map(|(i, _)| column(*i)).collect();
            Arc::new(RepartitionExec::try_new(
                input,
                Partitioning::Hash(keys, state.config().target_partitions().max(1)),
            )?)
        }
    };
    let ordering =
        LexOrdering::new(sort_columns.iter().map(|i| PhysicalSortExpr::new(column(*i), SortOptions::new(false, true))));
    let sorted: Arc<dyn ExecutionPlan> = match ordering {
        Some(ordering) => Arc::new(SortExec::new(ordering, distributed).with_preserve_partitioning(true)),
        None => distributed,
    };
    show_running(&state, &sorted)?;

    let sorted_by = layout.bucket_spec.map(|spec| spec.sort_columns.clone()).unwrap_or_default();
    let layout = WriteLayout {
        file_schema: file_schema(&data_columns, &schema),
        sorted_by,
        partition_columns,
        bucketed: layout.bucket_spec.is_some(),
        data_columns,
    };
    write_partitions(sorted, ctx.task_ctx(), layout, write.target(), write.id).await
}

/// Gives the statement's query history entry the plan the write runs.
fn show_running(state: &SessionState, plan: &Arc<dyn ExecutionPlan>) -> Result<(), SqlError> {
    if let Some(running) = state.config().get_extension::<RunningStatement>() {
        running.planned(plan, SparkConf::of(state.config())?.as_ref().clone());
    }
    Ok(())
}

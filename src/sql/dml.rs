//! `INSERT INTO` / `INSERT OVERWRITE`: DataFusion plans the source (column lists, casts to
//! the table's types, parameters); we run it, write it in the table's layout and commit.

use std::sync::Arc;

use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, LogicalPlanBuilder, WriteOp};
use datafusion::prelude::SessionContext;

use super::output::Output;
use super::session::Session;
use crate::catalog::metastore::{DataFile, TableMeta, WriteMode};
use crate::error::SqlError;
use crate::planner::table_provider::ParquetTable;
use crate::sql::table_writer::{TableLayout, write_table};
use crate::storage::commit::StagedWrite;
use crate::storage::parquet_writer::StagedFile;

/// `static_directory`: an INSERT OVERWRITE of static partition values replaces what lies
/// under their directory (`d=x`), and only that.
pub async fn insert(
    session: &Session,
    plan: LogicalPlan,
    static_directory: Option<String>,
) -> Result<Output, SqlError> {
    let LogicalPlan::Dml(DmlStatement { target, op, input, .. }) = plan else {
        return Err(SqlError::internal("INSERT did not plan to a write"));
    };
    let table = datafusion::datasource::source_as_provider(&target)?;
    let table = table
        .downcast_ref::<ParquetTable>()
        .ok_or_else(|| SqlError::feature_not_supported("only tables can be written to"))?;
    let meta = table.meta();
    let mode = match op {
        WriteOp::Insert(InsertOp::Append) => WriteMode::Append,
        WriteOp::Insert(InsertOp::Overwrite) if let Some(directory) = static_directory => {
            WriteMode::OverwriteUnder(directory)
        }
        // Spark's `spark.sql.sources.partitionOverwriteMode`: `static` replaces the whole
        // table, `dynamic` only the partitions the write produces.
        WriteOp::Insert(InsertOp::Overwrite)
            if session.spark_conf().dynamic_partition_overwrite && !meta.partition_columns.is_empty() =>
        {
            WriteMode::OverwritePartitions
        }
        WriteOp::Insert(InsertOp::Overwrite) => WriteMode::Overwrite,
        other => return Err(SqlError::feature_not_supported(format!("{other} is not supported"))),
    };
    let metastore = &session.engine.metastore;
    let appends = mode == WriteMode::Append;
    let files = write_and_publish(session, meta, Arc::unwrap_or_clone(input), |described| {
        metastore.commit_write(meta.id, mode, described)
    })
    .await?;
    let rows = files.iter().map(|f| f.rows as usize).sum();
    if !appends {
        session.engine.janitor.files_retired()?;
    }
    Ok(Output::Command { tag: "INSERT", rows: Some(rows) })
}

/// Runs `plan` (the table's columns in order), writes its rows in the table's layout and
/// publishes them with `commit`, which makes them part of the table.
async fn write_and_publish(
    session: &Session,
    meta: &TableMeta,
    plan: LogicalPlan,
    commit: impl FnOnce(&[DataFile]) -> Result<(), SqlError>,
) -> Result<Vec<StagedFile>, SqlError> {
    let (write, files) = stage_write(&session.ctx, meta, plan).await?;
    write.publish(&session.engine.metastore, &files, commit)?;
    Ok(files)
}

/// Runs `plan` (the table's columns in order) and writes its rows in the table's layout into
/// a staging directory, where no reader sees them until the write is published.
pub(super) async fn stage_write(
    ctx: &SessionContext,
    meta: &TableMeta,
    plan: LogicalPlan,
) -> Result<(StagedWrite, Vec<StagedFile>), SqlError> {
    let write = StagedWrite::new(&meta.location);
    let layout = TableLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let files = write_table(ctx, plan, &layout, &write).await?;
    Ok((write, files))
}

pub(super) fn existing_table(session: &Session, schema: &str, table: &str) -> Result<TableMeta, SqlError> {
    session
        .engine
        .metastore
        .table(schema, table)?
        .ok_or_else(|| SqlError::undefined_table(format!("relation \"{schema}.{table}\" does not exist")))
}

/// `OPTIMIZE t`: rewrites the table so that each (partition, bucket) is one file sorted on
/// the SORTED BY columns, replacing the files it read in one commit. With one sorted file per
/// bucket, a bucketed scan can report its order
/// (`spark.sql.legacy.bucketedTableScan.outputOrdering`) and sort-merge joins skip their sorts.
pub async fn optimize(session: &Session, schema: &str, table: &str) -> Result<Output, SqlError> {
    let meta = existing_table(session, schema, table)?;
    let snapshot = Arc::new(ParquetTable::new(meta.clone()));
    let plan = LogicalPlanBuilder::scan(table, provider_as_source(snapshot), None)?.build()?;
    let metastore = &session.engine.metastore;
    let files =
        write_and_publish(session, &meta, plan, |described| metastore.commit_rewrite(meta.id, &meta.files, described))
            .await?;
    session.engine.janitor.files_retired()?;
    Ok(Output::Command { tag: "OPTIMIZE", rows: Some(files.len()) })
}

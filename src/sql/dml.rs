//! `INSERT INTO` / `INSERT OVERWRITE`: DataFusion plans the source (column lists, casts to
//! the table's types, parameters); we run it, write it in the table's layout and commit.

use std::sync::Arc;

use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp};

use super::error::SqlError;
use super::session::{Output, Session};
use crate::catalog::metastore::{TableMeta, WriteMode};
use crate::catalog::provider::ParquetTable;
use crate::storage::commit::StagedWrite;
use crate::storage::table_writer::{TableLayout, write_table};

/// Spark's `spark.sql.sources.partitionOverwriteMode`: `static` replaces the whole table,
/// `dynamic` only the partitions the write produces.
pub const PARTITION_OVERWRITE_MODE: &str = "spark.sql.sources.partitionoverwritemode";

pub async fn insert(session: &Session, plan: LogicalPlan) -> Result<Output, SqlError> {
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
        WriteOp::Insert(InsertOp::Overwrite) => overwrite_mode(session, meta)?,
        other => return Err(SqlError::feature_not_supported(format!("{other} is not supported"))),
    };

    let write = StagedWrite::new(&meta.location);
    let layout = TableLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let files = write_table(&session.ctx, Arc::unwrap_or_clone(input), &layout, &write).await?;
    let rows = files.iter().map(|f| f.rows as usize).sum();
    let metastore = &session.engine.metastore;
    write.publish(metastore, &files, |described| metastore.commit_write(meta.id, mode, described))?;
    if mode != WriteMode::Append {
        session.engine.janitor.files_retired()?;
    }
    Ok(Output::Command { tag: "INSERT", rows: Some(rows) })
}

fn overwrite_mode(session: &Session, meta: &TableMeta) -> Result<WriteMode, SqlError> {
    let setting = session.variable(PARTITION_OVERWRITE_MODE).unwrap_or_else(|| "static".to_string());
    match setting.to_lowercase().as_str() {
        "static" => Ok(WriteMode::Overwrite),
        "dynamic" if meta.partition_columns.is_empty() => Ok(WriteMode::Overwrite),
        "dynamic" => Ok(WriteMode::OverwritePartitions),
        other => Err(SqlError::invalid_parameter(format!(
            "spark.sql.sources.partitionOverwriteMode must be static or dynamic, not {other}"
        ))),
    }
}

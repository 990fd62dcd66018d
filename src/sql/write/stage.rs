//! A write's rows staged in the table's layout, and published: what INSERT, OPTIMIZE, COPY and
//! CREATE TABLE … AS share between running a plan and committing its files.

use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;

use super::table_writer::{TableLayout, write_table};
use crate::catalog::metastore::{DataFile, TableMeta};
use crate::error::SqlError;
use crate::sql::session::Session;
use crate::storage::commit::StagedWrite;
use crate::storage::parquet_writer::StagedFile;

/// Runs `plan` (the table's columns in order), writes its rows in the table's layout and
/// publishes them with `commit`, which makes them part of the table.
pub(crate) async fn write_and_publish(
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
pub(crate) async fn stage_write(
    ctx: &SessionContext,
    meta: &TableMeta,
    plan: LogicalPlan,
) -> Result<(StagedWrite, Vec<StagedFile>), SqlError> {
    let write = StagedWrite::new(&meta.location);
    let layout = TableLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let files = write_table(ctx, plan, &layout, &write).await?;
    Ok((write, files))
}

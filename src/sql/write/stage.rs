//! A write's rows staged in the table's layout, and handed to the session's transaction: what
//! INSERT, OPTIMIZE, COPY and CREATE TABLE … AS share between running a plan and committing
//! its files.

use datafusion::logical_expr::LogicalPlan;

use super::table_writer::{TableLayout, write_table};
use crate::catalog::change::CatalogChange;
use crate::catalog::table::{DataFile, TableMeta};
use crate::error::SqlError;
use crate::sql::session::Session;
use crate::storage::commit::StagedFiles;

/// What a write wrote.
pub(crate) struct Written {
    pub rows: usize,
    pub files: usize,
}

/// Runs `plan` (the table's columns in order), writes its rows in the table's layout and
/// hands them, as the catalog change `change` makes of their files, to the session's
/// transaction, which commits them now or at its COMMIT.
pub(crate) async fn write_and_publish(
    session: &Session,
    meta: &TableMeta,
    plan: LogicalPlan,
    change: impl FnOnce(Vec<DataFile>) -> CatalogChange,
) -> Result<Written, SqlError> {
    let staged = stage_write(session, meta, plan).await?;
    let written = Written { rows: staged.files.iter().map(|f| f.rows as usize).sum(), files: staged.files.len() };
    session.tables.write(change(staged.described()), Some(staged))?;
    Ok(written)
}

/// Runs `plan` (the table's columns in order) and writes its rows in the table's layout,
/// where no other session sees them until the write is published.
pub(crate) async fn stage_write(
    session: &Session,
    meta: &TableMeta,
    plan: LogicalPlan,
) -> Result<StagedFiles, SqlError> {
    let write = session.tables.new_write(&meta.location)?.for_table(meta);
    let layout = TableLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let files = write_table(&session.ctx, plan, &layout, &write).await?;
    Ok(StagedFiles { write, files })
}

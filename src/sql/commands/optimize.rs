//! `OPTIMIZE t`: a table compacted into one sorted file per (partition, bucket).

use std::sync::Arc;

use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::LogicalPlanBuilder;

use crate::catalog::change::{CatalogChange, TableRef};
use crate::error::SqlError;
use crate::planner::table_provider::ParquetTable;
use crate::sql::names::existing_table;
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::sql::write::stage::write_and_publish;

/// `OPTIMIZE t`: rewrites the table so that each (partition, bucket) is one file sorted on
/// the SORTED BY columns, replacing the files it read in one commit. With one sorted file per
/// bucket, a bucketed scan can report its order
/// (`spark.sql.legacy.bucketedTableScan.outputOrdering`) and sort-merge joins skip their sorts.
pub async fn optimize(session: &Session, schema: &str, table: &str) -> Result<Output, SqlError> {
    let meta = existing_table(session, schema, table)?;
    let snapshot = Arc::new(ParquetTable::new(meta.clone()));
    let plan = LogicalPlanBuilder::scan(table, provider_as_source(snapshot), None)?.build()?;
    let (table, replaced) = (TableRef::of(&meta), meta.files.clone());
    let written =
        write_and_publish(session, &meta, plan, |files| CatalogChange::Rewrite { table, replaced, files }).await?;
    Ok(Output::Command { tag: "OPTIMIZE", rows: Some(written.files) })
}

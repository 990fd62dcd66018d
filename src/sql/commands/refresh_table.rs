//! `REFRESH TABLE t`: an external table's file list is read once, at `CREATE TABLE`, so files
//! another engine (Spark) writes into its directory later stay unseen until this, or `MSCK
//! REPAIR TABLE` ([`super::repair_table`]), reads the directory again, checked as `CREATE
//! TABLE` checks it.

use datafusion::sql::sqlparser::ast::ObjectName;

use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::table::{PartitionRepair, TableMeta};
use crate::error::SqlError;
use crate::sql::names::named_table;
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::storage::existing_files::ExpectedLayout;

/// `REFRESH TABLE t`: every file and partition under an external table's directory. A managed
/// table's directory holds only what this server wrote, which its file list says already;
/// Spark's REFRESH of it only drops cached metadata, of which there is none here.
pub async fn refresh_table(session: &Session, name: &ObjectName) -> Result<Output, SqlError> {
    let table = named_table(session, name)?;
    if table.external {
        reread_directory(session, &table, PartitionRepair::Sync).await?;
    }
    Ok(Output::command("REFRESH TABLE"))
}

/// Reads the table's directory as `CREATE TABLE` does (bucket ids, column types, partition
/// directories) and commits what it holds as the table's file list in one transaction; a
/// file that fails the checks fails the statement and leaves the list as it was.
pub(crate) async fn reread_directory(
    session: &Session,
    table: &TableMeta,
    repair: PartitionRepair,
) -> Result<(), SqlError> {
    let expected = ExpectedLayout::new(&table.columns, &table.partition_columns, table.bucket_spec.as_ref());
    let found = session.tables.discover(&table.location, &expected).await?;
    session.tables.write(CatalogChange::Resync { table: TableRef::of(table), found, repair }, None)
}

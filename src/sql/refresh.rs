//! `REFRESH TABLE t` and `MSCK REPAIR TABLE t [ADD | DROP | SYNC PARTITIONS]` (also spelled
//! `ALTER TABLE t RECOVER PARTITIONS`): an external table's file list is read once, at
//! `CREATE TABLE`, so files another engine (Spark) writes into its directory later stay
//! unseen until one of these reads the directory again, checked as `CREATE TABLE` checks it.

use datafusion::sql::sqlparser::ast::{AddDropSync, Msck, ObjectName};

use super::dml::existing_table;
use super::output::Output;
use super::session::Session;
use super::statement::table_name;
use crate::catalog::metastore::{PartitionRepair, TableMeta};
use crate::error::SqlError;
use crate::storage::existing_files::{ExpectedLayout, discover};

/// `REFRESH TABLE t`: every file and partition under an external table's directory. A managed
/// table's directory holds only what this server wrote, which its file list says already;
/// Spark's REFRESH of it only drops cached metadata, of which there is none here.
pub fn refresh_table(session: &Session, name: &ObjectName) -> Result<Output, SqlError> {
    let (schema, table) = table_name(name)?;
    let table = existing_table(session, &schema, &table)?;
    if table.external {
        reread_directory(session, &table, PartitionRepair::Sync)?;
    }
    Ok(Output::command("REFRESH TABLE"))
}

/// `MSCK REPAIR TABLE t [ADD | DROP | SYNC PARTITIONS]`: registers the partitions found in an
/// external table's directory (`ADD`, the default), forgets those whose files are gone (`DROP`)
/// or both (`SYNC`); the files of every registered partition become those on disk. As in
/// Spark, only partitioned tables can be repaired; a managed one is left as it is (see
/// [`refresh_table`]).
pub fn repair_table(session: &Session, msck: &Msck) -> Result<Output, SqlError> {
    if !msck.repair {
        return Err(SqlError::syntax("MSCK is only supported as MSCK REPAIR TABLE"));
    }
    let (schema, table) = table_name(&msck.table_name)?;
    let table = existing_table(session, &schema, &table)?;
    if table.partition_columns.is_empty() {
        return Err(SqlError::new(
            "42809",
            format!(
                "[NOT_A_PARTITIONED_TABLE] Operation MSCK REPAIR TABLE is not allowed for `{schema}`.`{}` because it is not a \
                 partitioned table.",
                table.name
            ),
        ));
    }
    let repair = match msck.partition_action {
        None | Some(AddDropSync::ADD) => PartitionRepair::Add,
        Some(AddDropSync::DROP) => PartitionRepair::Drop,
        Some(AddDropSync::SYNC) => PartitionRepair::Sync,
    };
    if table.external {
        reread_directory(session, &table, repair)?;
    }
    Ok(Output::command("MSCK REPAIR TABLE"))
}

/// Reads the table's directory as `CREATE TABLE` does (bucket ids, column types, partition
/// directories) and commits what it holds as the table's file list in one transaction; a
/// file that fails the checks fails the statement and leaves the list as it was.
fn reread_directory(session: &Session, table: &TableMeta, repair: PartitionRepair) -> Result<(), SqlError> {
    let expected = ExpectedLayout::new(&table.columns, &table.partition_columns, table.bucket_spec.as_ref());
    let found = discover(&table.location, &expected)?;
    session.engine.metastore.resync_files(table.id, table.version, &found, repair)
}

//! `MSCK REPAIR TABLE t [ADD | DROP | SYNC PARTITIONS]` (also spelled `ALTER TABLE t RECOVER
//! PARTITIONS`): the partitions of an external table's directory registered or forgotten.

use datafusion::sql::sqlparser::ast::{AddDropSync, Msck};

use super::refresh_table::reread_directory;
use crate::catalog::table::PartitionRepair;
use crate::error::SqlError;
use crate::sql::names::{existing_table, table_name};
use crate::sql::output::Output;
use crate::sql::session::Session;

/// `MSCK REPAIR TABLE t [ADD | DROP | SYNC PARTITIONS]`: registers the partitions found in an
/// external table's directory (`ADD`, the default), forgets those whose files are gone (`DROP`)
/// or both (`SYNC`); the files of every registered partition become those on disk. As in
/// Spark, only partitioned tables can be repaired; a managed one is left as it is (see
/// [`super::refresh_table`]).
pub async fn repair_table(session: &Session, msck: &Msck) -> Result<Output, SqlError> {
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
        reread_directory(session, &table, repair).await?;
    }
    Ok(Output::command("MSCK REPAIR TABLE"))
}

//! `ALTER TABLE t RENAME TO u`: Spark's `AlterTableRenameCommand`. The new name stays in the
//! table's schema (an unqualified one) or must name it (3F000 otherwise), and must be free
//! (42P07). A managed table's files move to the directory of its new name in the warehouse,
//! which must not exist yet (42710), as Spark's `SessionCatalog.validateNewLocationOfRename`
//! requires; an external table keeps its location. Statistics and properties stay.
//!
//! The move is a commit like a write's: the files are linked into a staging area of the new
//! directory (on object storage, copied by the store to their keys under the new prefix), the
//! metastore publishes the new name and location with them, and the old files are retired,
//! so a statement reading the table meanwhile keeps its files.
//!
//! `ALTER TABLE t RENAME COLUMN` is refused as Spark refuses it for its file-source tables.

use datafusion::sql::sqlparser::ast::{AlterTable, AlterTableOperation, ObjectName, RenameTableNameKind};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::location::Location;
use crate::catalog::metastore::name_taken;
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::engine::valid_name;
use crate::sql::names::{described_table, table_name};
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::storage::commit::{stage_copies, stage_links};
use crate::storage::existing_files::is_occupied;

/// Whether the statement renames a table or one of its columns, and nothing else.
pub fn renames(alter: &AlterTable) -> bool {
    matches!(
        alter.operations.as_slice(),
        [AlterTableOperation::RenameTable { .. } | AlterTableOperation::RenameColumn { .. }]
    )
}

/// Runs a statement [`renames`] accepts.
pub async fn rename(session: &Session, alter: &AlterTable) -> Result<Output, SqlError> {
    match alter.operations.as_slice() {
        [
            AlterTableOperation::RenameTable { table_name: RenameTableNameKind::To(to) | RenameTableNameKind::As(to) },
        ] => rename_table(session, &alter.name, to).await,
        _ => rename_column(session, &alter.name),
    }
}

async fn rename_table(session: &Session, table: &ObjectName, to: &ObjectName) -> Result<Output, SqlError> {
    let (schema, name) = table_name(table)?;
    let to_schema = if to.0.len() == 1 { schema.clone() } else { table_name(to)?.0 };
    let to_name = table_name(to)?.1;
    if to_schema != schema {
        return Err(SqlError::new(
            "3F000",
            format!(
                "[RENAME_TABLE_SOURCE_DESTINATION_DATABASE_MISMATCH] RENAME TABLE source and destination databases \
                 do not match: `{schema}` != `{to_schema}`."
            ),
        ));
    }
    let meta = described_table(session, &schema, &name)?;
    valid_name(&to_name)?;
    if session.tables.table(&schema, &to_name)?.is_some() {
        return Err(name_taken(&schema, &to_name));
    }
    let (location, staged) = if meta.external {
        (meta.location.clone(), None)
    } else {
        let location = session.engine.managed_location(&schema, &to_name)?;
        if is_occupied(&location, session.tables.stores()).await? {
            return Err(SqlError::new(
                "42710",
                format!(
                    "[LOCATION_ALREADY_EXISTS] Cannot name the managed table as `{CATALOG_NAME}`.`{schema}`.`{to_name}`, \
                     as its associated location '{location}' already exists. Please pick a different table name, or \
                     remove the existing location first."
                ),
            ));
        }
        let staged = match &location {
            Location::Local(directory) => stage_links(&meta, directory)?,
            Location::Object(_) => stage_copies(&meta, session.tables.new_write(&location)?.of_new_table()).await?,
        };
        (location, Some(staged))
    };
    let files = staged.as_ref().map(|s| s.described()).unwrap_or_default();
    let change = CatalogChange::RenameTable { table: TableRef::of(&meta), to: to_name, location, files };
    session.tables.write(change, staged)?;
    Ok(Output::command("ALTER TABLE"))
}

/// Spark's refusal of `RENAME COLUMN` on a table of its file sources.
fn rename_column(session: &Session, table: &ObjectName) -> Result<Output, SqlError> {
    let (schema, name) = table_name(table)?;
    described_table(session, &schema, &name)?;
    Err(SqlError::feature_not_supported(format!(
        "[UNSUPPORTED_FEATURE.TABLE_OPERATION] The feature is not supported: Table `{CATALOG_NAME}`.`{schema}`.`{name}` \
         does not support RENAME COLUMN. Please check the current catalog and namespace to make sure the qualified \
         table name is expected, and also check the catalog implementation which is configured by \"spark.sql.catalog\"."
    )))
}

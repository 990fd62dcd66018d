//! `ALTER TABLE .. SET | UNSET TBLPROPERTIES`, through which statistics can also be declared
//! for what-if planning (the planner uses `spark.sql.statistics.totalSize` as Spark uses
//! catalog statistics).

use datafusion::sql::sqlparser::ast::{ObjectName, SqlOption};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::table::{STATISTICS_PREFIX, STATISTICS_ROWS, STATISTICS_SIZE};
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::dialect::property_pairs;
use crate::sql::names::named_table;
use crate::sql::output::Output;
use crate::sql::session::Session;

/// `ALTER TABLE t SET TBLPROPERTIES (..)`. The statistics keys must hold sizes (whole
/// numbers of bytes and rows): the planner reads `spark.sql.statistics.totalSize` in place of
/// the files' size, so a user can plan as if the table held that much.
pub fn set_table_properties(
    session: &Session,
    table: &ObjectName,
    properties: &[SqlOption],
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let pairs = property_pairs(properties).map_err(SqlError::syntax)?;
    for (key, value) in &pairs {
        check_statistics_property(key, value)?;
    }
    session.tables.write(CatalogChange::SetProperties { table: TableRef::of(&meta), properties: pairs }, None)?;
    Ok(Output::command("ALTER TABLE"))
}

/// A statistics property the planner reads must hold a count: whole bytes or rows.
pub fn check_statistics_property(key: &str, value: &str) -> Result<(), SqlError> {
    let is_count = key == STATISTICS_SIZE
        || key == STATISTICS_ROWS
        || (key.starts_with(STATISTICS_PREFIX) && key.ends_with("Count"));
    if is_count && value.parse::<u64>().is_err() {
        return Err(SqlError::invalid_parameter(format!(
            "table property {key} must be a whole number of {}, not '{value}'",
            if key == STATISTICS_SIZE { "bytes" } else { "rows" }
        )));
    }
    Ok(())
}

/// `ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] (..)`. Without `IF EXISTS`, a key the
/// table does not have fails the statement, as Spark's `UNSET_NONEXISTENT_PROPERTIES`.
pub fn unset_table_properties(
    session: &Session,
    table: &ObjectName,
    keys: &[String],
    if_exists: bool,
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let missing: Vec<String> =
        keys.iter().filter(|k| !meta.properties.contains_key(*k)).map(|k| format!("`{k}`")).collect();
    if !if_exists && !missing.is_empty() {
        return Err(SqlError::new(
            "42704",
            format!(
                "Attempted to unset non-existent properties [{}] in table `{CATALOG_NAME}`.`{}`.`{}`.",
                missing.join(", "),
                meta.schema,
                meta.name
            ),
        ));
    }
    session.tables.write(CatalogChange::UnsetProperties { table: TableRef::of(&meta), keys: keys.to_vec() }, None)?;
    Ok(Output::command("ALTER TABLE"))
}

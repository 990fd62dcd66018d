//! Names in statements: `[catalog.][schema.]table` as Spark's case-insensitive catalog reads
//! it, and the table a name stands for.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

use super::session::Session;
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::catalog::table::{ColumnMeta, TableMeta};
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;

/// `[schema.]name` → (schema, table), lower-cased as Spark's case-insensitive catalog does.
pub(crate) fn table_name(name: &ObjectName) -> Result<(String, String), SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| {
            p.as_ident().map(|i| i.value.to_lowercase()).ok_or_else(|| SqlError::syntax(format!("invalid name {name}")))
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [table] => Ok((DEFAULT_SCHEMA.to_string(), table.clone())),
        [schema, table] => Ok((schema.clone(), table.clone())),
        [catalog, schema, table] if catalog == CATALOG_NAME => Ok((schema.clone(), table.clone())),
        _ => Err(SqlError::syntax(format!("invalid table name {name}"))),
    }
}

/// A one-part schema name, lower-cased.
pub(crate) fn schema_of(name: &ObjectName) -> Result<String, SqlError> {
    match name.0.as_slice() {
        [part] => part
            .as_ident()
            .map(|i| i.value.to_lowercase())
            .ok_or_else(|| SqlError::syntax(format!("invalid schema name {name}"))),
        _ => Err(SqlError::syntax(format!("invalid schema name {name}"))),
    }
}

/// The table `schema.table`, as the metastore holds it; PostgreSQL's error where there is none.
pub(crate) fn existing_table(session: &Session, schema: &str, table: &str) -> Result<TableMeta, SqlError> {
    table_or_else(session, schema, table, || format!("relation \"{schema}.{table}\" does not exist"))
}

/// The table `table` names, as the metastore holds it.
pub(crate) fn named_table(session: &Session, table: &ObjectName) -> Result<TableMeta, SqlError> {
    let (schema, name) = table_name(table)?;
    existing_table(session, &schema, &name)
}

/// The table `schema.name` for Spark's describing commands, with Spark's error where there is none.
pub(crate) fn described_table(session: &Session, schema: &str, name: &str) -> Result<TableMeta, SqlError> {
    table_or_else(session, schema, name, || format!("table or view `{schema}`.`{name}` cannot be found"))
}

/// The table `schema.name`, or `42P01` with `missing`'s message.
fn table_or_else(
    session: &Session,
    schema: &str,
    name: &str,
    missing: impl FnOnce() -> String,
) -> Result<TableMeta, SqlError> {
    session.tables.table(schema, name)?.ok_or_else(|| SqlError::undefined_table(missing()))
}

/// The column `column` names in `meta`, case-insensitively, with Spark's error where there is none.
pub(crate) fn find_column<'a>(meta: &'a TableMeta, column: &Ident) -> Result<&'a ColumnMeta, SqlError> {
    meta.columns.iter().find(|c| c.name.eq_ignore_ascii_case(&column.value)).ok_or_else(|| {
        SqlError::undefined_column(format!(
            "column `{}` does not exist in table `{}`.`{}`",
            column.value, meta.schema, meta.name
        ))
    })
}

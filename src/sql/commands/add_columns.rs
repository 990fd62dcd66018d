//! `ALTER TABLE t ADD COLUMNS (c type [COMMENT '..'], ...)`: Spark's `AlterTableAddColumnsCommand`.
//! The new columns follow the data columns, ahead of the partition columns, as in Spark's schema;
//! files written before them read the new columns as NULL, as Spark's reader does. Spark's
//! refusals: a name the table has (in any case) or one given twice, and `NOT NULL`.

use datafusion::sql::sqlparser::ast::{ColumnDef, ObjectName};

use super::create_table::declared_columns;
use crate::catalog::change::{CatalogChange, TableRef};
use crate::error::SqlError;
use crate::sql::names::{described_table, table_name};
use crate::sql::output::Output;
use crate::sql::session::Session;

pub fn add_columns(session: &Session, table: &ObjectName, definitions: &[ColumnDef]) -> Result<Output, SqlError> {
    let (schema, name) = table_name(table)?;
    let meta = described_table(session, &schema, &name)?;
    let mut names: Vec<String> = meta.columns.iter().map(|c| c.name.clone()).collect();
    for definition in definitions {
        let column = definition.name.value.to_lowercase();
        if names.contains(&column) {
            return Err(SqlError::new(
                "42711",
                format!("The column `{column}` already exists. Choose another name or rename the existing column."),
            ));
        }
        names.push(column);
    }
    let columns = declared_columns(definitions)?;
    if columns.iter().any(|c| !c.nullable) {
        return Err(SqlError::feature_not_supported("ADD COLUMN with v1 tables cannot specify NOT NULL."));
    }
    session.tables.write(CatalogChange::AddColumns { table: TableRef::of(&meta), columns }, None)?;
    Ok(Output::command("ALTER TABLE"))
}

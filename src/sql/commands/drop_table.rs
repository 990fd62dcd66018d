//! `DROP TABLE [IF EXISTS] t, …`: each table leaves the metastore when its transaction
//! commits; its files go when no statement that started before still reads them.

use datafusion::sql::sqlparser::ast::{ObjectType, Statement};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::error::SqlError;
use crate::sql::names::table_name;
use crate::sql::output::Output;
use crate::sql::session::Session;

pub fn drop(session: &Session, stmt: &Statement) -> Result<Output, SqlError> {
    let Statement::Drop { object_type, if_exists, names, .. } = stmt else {
        return Err(SqlError::internal("not a DROP statement"));
    };
    if *object_type != ObjectType::Table {
        return Err(SqlError::feature_not_supported(format!("DROP {object_type} is not supported")));
    }
    for name in names {
        let (schema, table) = table_name(name)?;
        match session.tables.table(&schema, &table)? {
            Some(meta) => session.tables.write(CatalogChange::DropTable { table: TableRef::of(&meta) }, None)?,
            None if *if_exists => {}
            None => {
                return Err(SqlError::undefined_table(format!("table \"{schema}.{table}\" does not exist")));
            }
        }
    }
    Ok(Output::Command { tag: "DROP TABLE", rows: None })
}

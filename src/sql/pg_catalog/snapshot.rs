//! The metastore's schemas and tables as the catalog lists them.

use crate::catalog::metastore::Metastore;

use crate::catalog::table::TableMeta;
use crate::error::SqlError;

/// The metastore's schemas and tables as of one read.
pub struct Snapshot {
    pub schemas: Vec<String>,
    pub tables: Vec<TableMeta>,
}

impl Snapshot {
    pub fn load(metastore: &Metastore) -> Result<Self, SqlError> {
        let schemas = metastore.schema_names()?;
        let mut tables = Vec::new();
        for schema in &schemas {
            for name in metastore.table_names(schema)? {
                // A table dropped since the listing is simply not there.
                tables.extend(metastore.table(schema, &name)?);
            }
        }
        Ok(Snapshot { schemas, tables })
    }
}

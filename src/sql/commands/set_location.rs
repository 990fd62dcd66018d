//! `ALTER TABLE t SET LOCATION 'path'`: Spark's `AlterTableSetLocationCommand` for an external
//! table, which reads the directory named from then on. Nothing is moved or deleted. The
//! directory must lie under an `--allow-location` root, and its files pass the checks of
//! `CREATE TABLE … LOCATION` (bucket ids, column types, partition directories); its partitions
//! become the table's. Where we differ: a managed table's files live in the warehouse, so its
//! location stays (`0A000`), where Spark would point it elsewhere; and a partition has no
//! location of its own to set.

use datafusion::sql::sqlparser::ast::ObjectName;

use crate::catalog::change::{CatalogChange, TableRef};
use crate::error::SqlError;
use crate::sql::names::{described_table, table_name};
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::storage::existing_files::ExpectedLayout;

pub async fn set_location(session: &Session, table: &ObjectName, location: &str) -> Result<Output, SqlError> {
    let (schema, name) = table_name(table)?;
    let meta = described_table(session, &schema, &name)?;
    if !meta.external {
        return Err(SqlError::feature_not_supported(format!(
            "SET LOCATION applies to external tables; `{schema}`.`{name}` is managed, its files in the warehouse"
        )));
    }
    let location = session.engine.external_location(location)?;
    let expected = ExpectedLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let found = session.tables.discover(&location, &expected).await?;
    session.tables.write(CatalogChange::SetLocation { table: TableRef::of(&meta), location, found }, None)?;
    Ok(Output::command("ALTER TABLE"))
}

//! `SHOW TABLES [IN schema]`, with Spark's columns.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::SqlError;
use crate::sql::output::{Output, bool_column, rows_output};
use crate::sql::session::Session;

/// Spark's `SHOW TABLES` columns.
pub fn show_tables_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("namespace", DataType::Utf8, false),
        Field::new("tableName", DataType::Utf8, false),
        Field::new("isTemporary", DataType::Boolean, false),
    ]))
}

pub fn show_tables(session: &Session, schema: &str) -> Result<Output, SqlError> {
    if !session.tables.schema_exists(schema)? {
        return Err(SqlError::undefined_schema(format!("schema \"{schema}\" does not exist")));
    }
    let names = session.tables.table_names(schema)?;
    let namespace: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter().map(|_| schema)));
    let table: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter()));
    let batch =
        RecordBatch::try_new(show_tables_schema(), vec![namespace, table, bool_column(names.iter().map(|_| false))])?;
    Ok(rows_output(show_tables_schema(), vec![batch]))
}

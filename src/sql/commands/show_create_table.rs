//! `SHOW CREATE TABLE t`: the DDL that recreates the table, as Spark's
//! `ShowCreateTableCommand` prints it.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::SqlError;
use crate::sql::names::described_table;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;
use crate::sql::table_ddl::create_statement;

pub fn show_create_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("createtab_stmt", DataType::Utf8, false)]))
}

pub fn show_create_table(session: &Session, schema: &str, name: &str) -> Result<Output, SqlError> {
    let meta = described_table(session, schema, name)?;
    let statement: ArrayRef = Arc::new(StringArray::from(vec![create_statement(&meta)]));
    let batch = RecordBatch::try_new(show_create_schema(), vec![statement])?;
    Ok(rows_output(show_create_schema(), vec![batch]))
}

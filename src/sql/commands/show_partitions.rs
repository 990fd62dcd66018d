//! `SHOW PARTITIONS t`: a partitioned table's partition directories, as Spark lists them.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::SqlError;
use crate::sql::names::described_table;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;

pub fn show_partitions_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("partition", DataType::Utf8, false)]))
}

pub fn show_partitions(session: &Session, schema: &str, name: &str) -> Result<Output, SqlError> {
    let meta = described_table(session, schema, name)?;
    if meta.partition_columns.is_empty() {
        return Err(SqlError::new(
            "42809",
            format!("SHOW PARTITIONS is not allowed on a table that is not partitioned: `{schema}`.`{name}`"),
        ));
    }
    let partitions: ArrayRef = Arc::new(StringArray::from_iter_values(meta.partitions.iter()));
    let batch = RecordBatch::try_new(show_partitions_schema(), vec![partitions])?;
    Ok(rows_output(show_partitions_schema(), vec![batch]))
}

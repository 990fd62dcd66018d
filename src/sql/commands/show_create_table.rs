//! `SHOW CREATE TABLE t`: the DDL that recreates the table, as Spark's
//! `ShowCreateTableCommand` prints it.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::table::TableMeta;
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::names::described_table;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;

pub fn show_create_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("createtab_stmt", DataType::Utf8, false)]))
}

/// The DDL that recreates the table, clause order as Spark prints it.
pub fn create_statement(meta: &TableMeta) -> String {
    let columns: Vec<String> = meta.columns.iter().map(|c| format!("  {} {}", c.name, c.ty.ddl_name())).collect();
    let mut ddl = format!(
        "CREATE TABLE {CATALOG_NAME}.{}.{} (\n{})\nUSING {}\n",
        meta.schema,
        meta.name,
        columns.join(",\n"),
        meta.provider
    );
    if !meta.partition_columns.is_empty() {
        ddl.push_str(&format!("PARTITIONED BY ({})\n", meta.partition_columns.join(", ")));
    }
    if let Some(spec) = &meta.bucket_spec {
        ddl.push_str(&format!("CLUSTERED BY ({})\n", spec.bucket_columns.join(", ")));
        if !spec.sort_columns.is_empty() {
            ddl.push_str(&format!("SORTED BY ({})\n", spec.sort_columns.join(", ")));
        }
        ddl.push_str(&format!("INTO {} BUCKETS\n", spec.num_buckets));
    }
    if let Some(comment) = &meta.comment {
        ddl.push_str(&format!("COMMENT '{}'\n", comment.replace('\'', "\\'")));
    }
    if meta.external {
        ddl.push_str(&format!("LOCATION 'file:{}'\n", meta.location.display()));
    }
    let properties: Vec<String> = meta
        .properties
        .iter()
        .filter(|(k, _)| !k.starts_with("spark.sql.statistics."))
        .map(|(k, v)| format!("  '{k}' = '{}'", v.replace('\'', "\\'")))
        .collect();
    if !properties.is_empty() {
        ddl.push_str(&format!("TBLPROPERTIES (\n{})\n", properties.join(",\n")));
    }
    ddl
}

pub fn show_create_table(session: &Session, schema: &str, name: &str) -> Result<Output, SqlError> {
    let meta = described_table(session, schema, name)?;
    let statement: ArrayRef = Arc::new(StringArray::from(vec![create_statement(&meta)]));
    let batch = RecordBatch::try_new(show_create_schema(), vec![statement])?;
    Ok(rows_output(show_create_schema(), vec![batch]))
}

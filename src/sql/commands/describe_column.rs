//! `DESCRIBE [EXTENDED] t column`, as Spark's `DescribeColumnCommand` prints it.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

use crate::catalog::table::column_statistic_key;
use crate::error::SqlError;
use crate::sql::names::{find_column, named_table};
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;

pub fn describe_column_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("info_name", DataType::Utf8, false),
        Field::new("info_value", DataType::Utf8, false),
    ]))
}

/// `DESCRIBE [EXTENDED] t column`, Spark's `DescribeColumnCommand`: name, type and comment;
/// with EXTENDED, the column statistics `ANALYZE TABLE` stored (`NULL` where there are none).
pub fn describe_column(
    session: &Session,
    table: &ObjectName,
    column: &Ident,
    extended: bool,
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let described = find_column(&meta, column)?;
    let mut rows = vec![
        ("col_name", described.name.clone()),
        ("data_type", described.ty.as_str().to_string()),
        ("comment", described.comment.clone().unwrap_or_else(|| "NULL".into())),
    ];
    if extended {
        let statistic = |key: &str| {
            meta.properties.get(&column_statistic_key(&described.name, key)).cloned().unwrap_or_else(|| "NULL".into())
        };
        rows.extend([
            ("min", statistic("min")),
            ("max", statistic("max")),
            ("num_nulls", statistic("nullCount")),
            ("distinct_count", statistic("distinctCount")),
            ("avg_col_len", statistic("avgLen")),
            ("max_col_len", statistic("maxLen")),
            ("histogram", "NULL".into()),
        ]);
    }
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|(k, _)| *k)));
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, v)| v.as_str())));
    let batch = RecordBatch::try_new(describe_column_schema(), vec![names, values])?;
    Ok(rows_output(describe_column_schema(), vec![batch]))
}

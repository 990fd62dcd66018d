//! `SHOW TABLES [IN schema] [[LIKE] 'pattern']`, with Spark's columns. The pattern is Spark's
//! (`StringUtils.filterPattern`): alternatives split at `|`, `*` for any characters, the rest
//! a regular expression matching the whole name, in any case.

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

pub fn show_tables(session: &Session, schema: &str, pattern: Option<&str>) -> Result<Output, SqlError> {
    if !session.tables.schema_exists(schema)? {
        return Err(SqlError::undefined_schema(format!("schema \"{schema}\" does not exist")));
    }
    let mut names = session.tables.table_names(schema)?;
    if let Some(pattern) = pattern {
        names = matching(names, pattern);
    }
    let namespace: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter().map(|_| schema)));
    let table: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter()));
    let batch =
        RecordBatch::try_new(show_tables_schema(), vec![namespace, table, bool_column(names.iter().map(|_| false))])?;
    Ok(rows_output(show_tables_schema(), vec![batch]))
}

/// The names one of the pattern's alternatives matches; an alternative that is not a valid
/// regular expression matches nothing, as in Spark.
fn matching(names: Vec<String>, pattern: &str) -> Vec<String> {
    let alternatives: Vec<regex::Regex> = pattern
        .trim()
        .split('|')
        .filter_map(|alternative| regex::Regex::new(&format!("(?i)^(?:{})$", alternative.replace('*', ".*"))).ok())
        .collect();
    names.into_iter().filter(|name| alternatives.iter().any(|regex| regex.is_match(name))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_spark_matches_them() {
        let names = || ["orders", "order_items", "customers", "o1"].map(String::from).to_vec();
        assert_eq!(matching(names(), "order*"), ["orders", "order_items"]);
        assert_eq!(matching(names(), "ORDERS|cust*"), ["orders", "customers"]);
        assert_eq!(matching(names(), "o."), ["o1"]);
        assert_eq!(matching(names(), "order"), Vec::<String>::new());
        assert_eq!(matching(names(), "o(|orders"), ["orders"]);
    }
}

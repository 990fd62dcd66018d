//! Session settings: `SET`, `SHOW` and `RESET` over Spark's settings and the PostgreSQL
//! parameters clients ask for.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::config;
use crate::error::SqlError;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;

/// `SET key = value`; `SET key` shows the key, as Spark does.
pub(crate) fn set(session: &Session, name: &str, value: Option<&str>) -> Result<Output, SqlError> {
    match value {
        Some(value) => {
            session.set_variable(name, value)?;
            Ok(Output::command("SET"))
        }
        None => show(session, Some(&name.to_lowercase())),
    }
}

/// `SHOW key` (the session's value, else the server's or Spark's default), or every setting
/// the session made.
pub(crate) fn show(session: &Session, name: Option<&str>) -> Result<Output, SqlError> {
    let rows: Vec<(String, String)> = match name {
        Some(name) => {
            let value = session.setting(name).unwrap_or_else(|| "<undefined>".to_string());
            vec![(display_key(name), value)]
        }
        None => session.variables().into_iter().map(|(k, v)| (display_key(&k), v)).collect(),
    };
    let schema = variables_schema();
    let keys: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str())));
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![keys, values])?;
    Ok(rows_output(schema, vec![batch]))
}

/// `RESET key`, or `RESET` of every setting.
pub(crate) fn reset(session: &Session, name: Option<&str>) -> Output {
    session.reset_variables(name);
    Output::command("RESET")
}

/// Spark's spelling for its settings, the name as given otherwise.
fn display_key(name: &str) -> String {
    config::canonical_key(name).map_or_else(|| name.to_string(), str::to_string)
}

pub(crate) fn variables_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, false)]))
}

//! Session settings: `SET`, `SHOW` and `RESET` over Spark's settings and the PostgreSQL
//! parameters clients ask for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::output::{Output, rows_output};
use super::session::Session;
use crate::config::{self, SparkConf};
use crate::error::SqlError;

impl Session {
    pub(crate) fn set_variable(&self, name: &str, value: Option<&str>) -> Result<Output, SqlError> {
        let name = name.to_lowercase();
        match value {
            Some(value) => {
                config::validate(&name, value)?;
                self.lock_variables().insert(name, value.to_string());
                Ok(Output::command("SET"))
            }
            None => self.show_variable(Some(&name)),
        }
    }

    pub(super) fn show_variable(&self, name: Option<&str>) -> Result<Output, SqlError> {
        let variables = self.lock_variables();
        let rows: Vec<(String, String)> = match name {
            Some(name) => {
                let key = name.to_lowercase();
                let value = variables
                    .get(&key)
                    .cloned()
                    .or_else(|| default_setting(&key).map(str::to_string))
                    .unwrap_or_else(|| "<undefined>".to_string());
                vec![(display_key(name), value)]
            }
            None => variables.iter().map(|(k, v)| (display_key(k), v.clone())).collect(),
        };
        let schema = variables_schema();
        let keys: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str())));
        let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![keys, values])?;
        Ok(rows_output(schema, vec![batch]))
    }

    pub(super) fn reset(&self, name: Option<&str>) -> Output {
        let mut variables = self.lock_variables();
        match name {
            Some(name) => {
                variables.remove(&name.to_lowercase());
            }
            None => variables.clear(),
        }
        Output::command("RESET")
    }

    /// The session's Spark settings over their defaults.
    pub(crate) fn spark_conf(&self) -> SparkConf {
        SparkConf::from_settings(&self.lock_variables())
    }

    /// A session setting, by its case-insensitive name.
    pub fn variable(&self, name: &str) -> Option<String> {
        self.lock_variables().get(&name.to_lowercase()).cloned()
    }

    /// The session's `statement_timeout` (checked when set); `None` when off.
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.variable("statement_timeout").and_then(|value| config::parse_statement_timeout(&value).ok().flatten())
    }

    /// When a statement starting now must end by, under `statement_timeout`.
    pub(crate) fn statement_deadline(&self) -> Option<Instant> {
        self.statement_timeout().map(|timeout| Instant::now() + timeout)
    }

    fn lock_variables(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.variables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A setting's value when the session has not set it: the server's PostgreSQL parameter, else
/// Spark's default.
pub(crate) fn default_setting(name: &str) -> Option<&'static str> {
    server_setting(name).or_else(|| config::default_value(name))
}

/// Settings PostgreSQL clients ask for with `SHOW`; the values match the startup parameters.
fn server_setting(name: &str) -> Option<&'static str> {
    Some(match name {
        "server_version" => "16.6",
        "server_version_num" => "160006",
        "search_path" => "\"default\"",
        "max_identifier_length" => "63",
        "max_index_keys" => "32",
        "server_encoding" | "client_encoding" => "UTF8",
        "datestyle" => "ISO, YMD",
        "timezone" => "Etc/UTC",
        "integer_datetimes" | "standard_conforming_strings" => "on",
        "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "statement_timeout" => "0",
        _ => return None,
    })
}

/// Spark's spelling for its settings, the name as given otherwise.
fn display_key(name: &str) -> String {
    config::canonical_key(name).map_or_else(|| name.to_string(), str::to_string)
}

pub(super) fn variables_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, false)]))
}

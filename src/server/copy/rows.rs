//! The records of a COPY FROM STDIN into batches of the table's rows: text fields parsed as
//! their columns' types a batch at a time, binary fields as they come.

use std::fmt::Display;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, RecordBatch, StringArray, StringBuilder, new_null_array};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

use super::binary_format::binary_value;
use super::records::{Value, copy_error};
use crate::catalog::types::SparkType;
use crate::error::SqlError;
use crate::server::encoding::parse_bytea;
use crate::sql::output::{CopyFormat, CopyIn};

/// Collects input rows column by column and turns them into table batches.
pub(super) struct RowBuilder {
    pub(super) copy: CopyIn,
    text: Vec<StringBuilder>,
    binary: Vec<Vec<ScalarValue>>,
    /// The input line of each buffered row, for error messages.
    lines: Vec<usize>,
}

impl RowBuilder {
    pub(super) fn new(copy: CopyIn) -> Self {
        let n = copy.columns.len();
        RowBuilder {
            text: (0..n).map(|_| StringBuilder::new()).collect(),
            binary: vec![Vec::new(); n],
            lines: Vec::new(),
            copy,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.lines.len()
    }

    fn column_type(&self, field: usize) -> &DataType {
        self.copy.table_schema.field(self.copy.columns[field]).data_type()
    }

    fn error(&self, code: &'static str, line: usize, field: Option<usize>, message: impl Display) -> SqlError {
        let column = field.map(|f| self.copy.table_schema.field(self.copy.columns[f]).name().as_str());
        copy_error(&self.copy.table, code, line, column, message)
    }

    pub(super) fn push(&mut self, line: usize, fields: Vec<Value>) -> Result<(), SqlError> {
        let expected = self.copy.columns.len();
        if fields.len() > expected {
            return Err(self.error("22P04", line, None, "extra data after last expected column"));
        }
        if fields.len() < expected {
            let missing = self.copy.table_schema.field(self.copy.columns[fields.len()]).name();
            return Err(self.error("22P04", line, None, format!("missing data for column \"{missing}\"")));
        }
        for (i, value) in fields.into_iter().enumerate() {
            match value {
                // PostgreSQL's input functions skip surrounding whitespace except for strings.
                Value::Text(text) if *self.column_type(i) == DataType::Utf8 => self.text[i].append_option(text),
                Value::Text(text) => self.text[i].append_option(text.as_deref().map(str::trim)),
                Value::Binary(raw) => {
                    let dt = self.column_type(i);
                    let value = match raw {
                        None => ScalarValue::try_from(dt)?,
                        Some(raw) => binary_value(dt, &raw).map_err(|m| self.error("22P03", line, Some(i), m))?,
                    };
                    self.binary[i].push(value);
                }
            }
        }
        self.lines.push(line);
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<RecordBatch, SqlError> {
        let schema = &self.copy.table_schema;
        let mut columns: Vec<ArrayRef> =
            schema.fields().iter().map(|f| new_null_array(f.data_type(), self.lines.len())).collect();
        for field in 0..self.copy.columns.len() {
            let dt = self.column_type(field).clone();
            columns[self.copy.columns[field]] = if self.copy.options.format == CopyFormat::Binary {
                ScalarValue::iter_to_array(std::mem::take(&mut self.binary[field]))?
            } else {
                let text = self.text[field].finish();
                parse_column(&text, &dt).map_err(|row| {
                    let ty =
                        SparkType::from_arrow(&dt).map(|t| t.as_str().to_string()).unwrap_or_else(|_| dt.to_string());
                    self.error(
                        "22P02",
                        self.lines[row],
                        Some(field),
                        format!("invalid input syntax for type {ty}: \"{}\"", text.value(row)),
                    )
                })?
            };
        }
        let batch = RecordBatch::try_new(Arc::clone(schema), columns)?;
        self.lines.clear();
        Ok(batch)
    }
}

/// Parses text values as `dt`; `Err` holds the first row that does not parse.
fn parse_column(text: &StringArray, dt: &DataType) -> Result<ArrayRef, usize> {
    let parsed: ArrayRef = match dt {
        DataType::Utf8 => return Ok(Arc::new(text.clone())),
        DataType::Binary => {
            Arc::new(text.iter().map(|v| v.and_then(|v| parse_bytea(v.as_bytes()))).collect::<BinaryArray>())
        }
        _ => cast_with_options(text, dt, &CastOptions { safe: true, ..Default::default() }).map_err(|_| 0usize)?,
    };
    match (0..text.len()).find(|&i| text.is_valid(i) && parsed.is_null(i)) {
        Some(row) => Err(row),
        None => Ok(parsed),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::arrow::util::display::array_value_to_string;

    use super::*;

    #[test]
    fn text_values_parse_as_column_types() {
        let text = StringArray::from(vec![Some("1"), None, Some("t")]);
        let bools = parse_column(&text, &DataType::Boolean).unwrap();
        assert_eq!(bools.null_count(), 1);
        assert_eq!(parse_column(&text, &DataType::Int32).unwrap_err(), 2);
        let floats = StringArray::from(vec!["NaN", "Infinity", "-Infinity", "1.5e3"]);
        let floats = parse_column(&floats, &DataType::Float64).unwrap();
        assert_eq!(array_value_to_string(&floats, 2).unwrap(), "-inf");
        let stamps = StringArray::from(vec!["2024-01-02 03:04:05.5+00", "2024-01-02 03:04:05-02", "2024-01-02"]);
        let stamps = parse_column(&stamps, &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))).unwrap();
        assert_eq!(array_value_to_string(&stamps, 1).unwrap(), "2024-01-02T05:04:05Z");
        let bytes = parse_column(&StringArray::from(vec!["\\x0aff"]), &DataType::Binary).unwrap();
        assert_eq!(bytes.as_any().downcast_ref::<BinaryArray>().unwrap().value(0), &[10, 255]);
    }
}

//! The values of catalog rows, and the batches they become, each value converted to its
//! column's type.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::{ArrayRef, RecordBatch, new_empty_array};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{ScalarValue, internal_err};
use datafusion::error::Result;

/// A value of a catalog row, converted to its column's type when the batch is built.
#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Value>),
}

pub type Row = Vec<Value>;

/// A catalog row from values of any type a [`Value`] is made from.
macro_rules! row {
    ($($value:expr),* $(,)?) => { vec![$(Value::from($value)),*] };
}
pub(super) use row;

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

/// A `timestamptz`: microseconds since the epoch, which the column's type reads as such.
impl From<SystemTime> for Value {
    fn from(time: SystemTime) -> Self {
        let micros = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_micros() as i64,
            Err(before) => -(before.duration().as_micros() as i64),
        };
        Value::Int(micros)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Self {
        Value::List(items.into_iter().map(Into::into).collect())
    }
}

fn scalar(value: Value, dt: &DataType) -> Result<ScalarValue> {
    Ok(match (value, dt) {
        (Value::Null, dt) => ScalarValue::try_from(dt)?,
        (Value::Bool(b), _) => ScalarValue::Boolean(Some(b)),
        (Value::Int(i), dt) => ScalarValue::Int64(Some(i)).cast_to(dt)?,
        (Value::Float(f), dt) => ScalarValue::Float64(Some(f)).cast_to(dt)?,
        (Value::Text(s), _) => ScalarValue::Utf8(Some(s)),
        (Value::List(items), DataType::List(field)) => {
            let items = items.into_iter().map(|i| scalar(i, field.data_type())).collect::<Result<Vec<_>>>()?;
            ScalarValue::List(ScalarValue::new_list_nullable(&items, field.data_type()))
        }
        (value, dt) => return internal_err!("catalog value {value:?} does not fit a {dt} column"),
    })
}

pub(super) fn batch(schema: &SchemaRef, rows: Vec<Row>) -> Result<RecordBatch> {
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); schema.fields().len()];
    for row in rows {
        if row.len() != columns.len() {
            return internal_err!("catalog row has {} values for {} columns", row.len(), columns.len());
        }
        for ((column, value), field) in columns.iter_mut().zip(row).zip(schema.fields()) {
            column.push(scalar(value, field.data_type())?);
        }
    }
    let arrays = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(values, field)| {
            if values.is_empty() { Ok(new_empty_array(field.data_type())) } else { ScalarValue::iter_to_array(values) }
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), arrays)?)
}

//! Spark's `make_date(year, month, day)`: under ANSI mode a field out of range fails, as
//! DataFusion's does (with its own message); under legacy mode (`spark.sql.ansi.enabled =
//! false`) such a row is NULL, as in Spark, where DataFusion's fails the statement.

use std::sync::Arc;

use chrono::NaiveDate;
use datafusion::arrow::array::{Array, AsArray, BooleanArray};
use datafusion::arrow::compute::{cast, nullif};
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};
use crate::config::EvalMode;

/// DataFusion's `make_date`, with NULL for a date that does not exist under legacy mode.
#[derive(Debug, PartialEq, Eq, Hash)]
struct InvalidIsNullOutsideAnsi;

/// The session's `make_date`, or `None` if DataFusion's is not registered.
pub fn spark_make_date(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("make_date"), InvalidIsNullOutsideAnsi)
}

impl Invoke for InvalidIsNullOutsideAnsi {
    fn invoke(&self, inner: &ScalarUDF, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if EvalMode::of(&args.config_options) == EvalMode::Ansi {
            return inner.invoke_with_args(args);
        }
        let fields: [_; 3] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Plan("make_date takes a year, a month and a day".to_string()))?;
        let [year, month, day] = fields.map(|field| cast(&field, &DataType::Int32));
        let (year, month, day) = (year?, month?, day?);
        let (years, months, days) =
            (year.as_primitive::<Int32Type>(), month.as_primitive::<Int32Type>(), day.as_primitive::<Int32Type>());
        let missing: BooleanArray = (0..year.len())
            .map(|row| {
                let exists = || {
                    let (month, day) = (u32::try_from(months.value(row)).ok()?, u32::try_from(days.value(row)).ok()?);
                    NaiveDate::from_ymd_opt(years.value(row), month, day)
                };
                let valid = year.is_valid(row) && month.is_valid(row) && day.is_valid(row);
                Some(valid && exists().is_none())
            })
            .collect();
        // A NULL year makes the row NULL before DataFusion's checks see it.
        args.args[0] = ColumnarValue::Array(nullif(&year, &missing)?);
        args.args[1] = ColumnarValue::Array(month);
        args.args[2] = ColumnarValue::Array(day);
        inner.invoke_with_args(args)
    }
}

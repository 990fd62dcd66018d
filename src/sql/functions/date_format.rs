//! Spark's `date_format(ts, pattern)` and `from_unixtime(seconds[, pattern])`
//! (`DateFormatClass` and `FromUnixTime` in `datetimeExpressions.scala`): a TIMESTAMP (a DATE or
//! a string cast to one), or a count of seconds since 1970, printed in the session's time zone
//! with Spark's datetime pattern (`from_unixtime`'s default is `yyyy-MM-dd HH:mm:ss`).
//! DataFusion's `date_format` takes chrono's patterns, and its `from_unixtime` returns a
//! TIMESTAMP, taking its second argument for a time zone.
//!
//! The pattern must be a constant, as Spark's patterns are in practice; see [`super::datetime_pattern`].

use std::sync::Arc;

use chrono::format::{Item, StrftimeItems};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use super::datetime_pattern::chrono_format;
use crate::exec::columnar::{input_column, shaped_like};

const DEFAULT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

#[derive(Debug, PartialEq, Eq, Hash)]
struct DateFormat {
    name: &'static str,
    /// The first argument counts seconds since 1970 (`from_unixtime`), not a TIMESTAMP.
    seconds: bool,
    signature: Signature,
}

pub fn spark_date_format() -> ScalarUDF {
    ScalarUDF::new_from_impl(DateFormat {
        name: "date_format",
        seconds: false,
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

pub fn spark_from_unixtime() -> ScalarUDF {
    ScalarUDF::new_from_impl(DateFormat {
        name: "from_unixtime",
        seconds: true,
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

impl ScalarUDFImpl for DateFormat {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let value = match (self.seconds, arg_types.first()) {
            (true, Some(_)) => DataType::Int64,
            (false, Some(DataType::Timestamp(_, Some(tz)))) => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::clone(tz)))
            }
            (false, Some(_)) => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            (_, None) => return plan_err!("{} takes a value and a pattern", self.name),
        };
        match arg_types.len() {
            1 if self.seconds => Ok(vec![value]),
            2 => Ok(vec![value, DataType::Utf8]),
            _ => plan_err!("{} takes a value and a pattern", self.name),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let pattern = match args.args.get(1) {
            None => DEFAULT_PATTERN.to_string(),
            Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(pattern)))) => pattern.clone(),
            // A NULL pattern prints nothing.
            Some(ColumnarValue::Scalar(_)) => return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
            Some(ColumnarValue::Array(_)) => return plan_err!("the pattern of {} must be a constant", self.name),
        };
        let format = chrono_format(&pattern).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let items: Vec<Item> = StrftimeItems::new(&format).collect();
        if items.contains(&Item::Error) {
            return plan_err!("'{pattern}' is not a datetime pattern");
        }
        let value = input_column(&args.args[0])?;
        let micros = if self.seconds {
            let seconds = value.as_primitive::<Int64Type>();
            let micros: datafusion::arrow::array::TimestampMicrosecondArray =
                seconds.unary_opt(|s| s.checked_mul(1_000_000));
            Arc::new(micros.with_timezone("UTC")) as ArrayRef
        } else {
            value
        };
        let zone: Tz = match micros.data_type() {
            DataType::Timestamp(_, Some(tz)) => tz.parse()?,
            _ => "UTC".parse()?,
        };
        let micros = micros.as_primitive::<TimestampMicrosecondType>();
        let printed: StringArray = micros
            .iter()
            .map(|v| {
                v.and_then(chrono::DateTime::from_timestamp_micros)
                    .map(|t| t.with_timezone(&zone).format_with_items(items.iter()).to_string())
            })
            .collect();
        let printed: ArrayRef = Arc::new(printed);
        shaped_like(&args.args[0], printed)
    }
}

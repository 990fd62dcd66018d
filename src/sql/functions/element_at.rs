//! Spark's ways into an array or a map: `element_at(c, k)`, the subscript `c[k]`, and their
//! NULL-giving forms `try_element_at(c, k)` and `get(c, k)`.
//! - An array's `element_at` counts from 1, and from the end for a negative index; its
//!   subscript and `get` count from 0.
//! - Past the array's end, `element_at` fails with INVALID_ARRAY_INDEX_IN_ELEMENT_AT and the
//!   subscript with INVALID_ARRAY_INDEX (22003), as under Spark's ANSI mode; index 0 of
//!   `element_at` fails with INVALID_INDEX_OF_ZERO. `try_element_at` and `get` give NULL, and
//!   so do `element_at` and the subscript past the end under legacy mode
//!   (`spark.sql.ansi.enabled = false`).
//! - A map's missing key gives NULL.
//!
//! DataFusion's `element_at` and subscript count from 1 and give NULL past the end.

use crate::config::EvalMode;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::error::SqlError;
use crate::exec::generate::collection_entries;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Access {
    ElementAt,
    TryElementAt,
    Subscript,
    Get,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::ElementAt => "element_at",
            Access::TryElementAt => "try_element_at",
            Access::Subscript => "get_item",
            Access::Get => "get",
        }
    }

    fn counts_from_one(self) -> bool {
        matches!(self, Access::ElementAt | Access::TryElementAt)
    }

    fn fails(self) -> bool {
        matches!(self, Access::ElementAt | Access::Subscript)
    }
}

/// `element_at`, `try_element_at`, `get`, and `get_item`, which a subscript `c[k]` calls.
pub fn spark_element_access() -> Vec<ScalarUDF> {
    [Access::ElementAt, Access::TryElementAt, Access::Subscript, Access::Get]
        .into_iter()
        .map(|access| {
            ScalarUDF::new_from_impl(ElementAccess { access, signature: Signature::any(2, Volatility::Immutable) })
        })
        .collect()
}

/// The name of the function a subscript calls.
pub const SUBSCRIPT: &str = "get_item";

#[derive(Debug, PartialEq, Eq, Hash)]
struct ElementAccess {
    access: Access,
    signature: Signature,
}

impl ScalarUDFImpl for ElementAccess {
    fn name(&self) -> &str {
        self.access.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        match args {
            [DataType::List(_) | DataType::LargeList(_), index] if index.is_integer() || *index == DataType::Null => {
                Ok(vec![args[0].clone(), DataType::Int32])
            }
            [DataType::Map(entries, _), _] => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Ok(vec![args[0].clone(), kv[0].data_type().clone()]),
                other => plan_err!("a map's entries of type {other}"),
            },
            [container, index] => Err(SqlError::new(
                "42K09",
                format!(
                    "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve \"{}\" due to data type mismatch: it takes an array and an INT index, or a map and a key, not {container} and {index}.",
                    self.access.name()
                ),
            ).into()),
            _ => plan_err!("{} takes two arguments", self.access.name()),
        }
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match &args[0] {
            DataType::List(element) | DataType::LargeList(element) => Ok(element.data_type().clone()),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Ok(kv[1].data_type().clone()),
                other => plan_err!("a map's entries of type {other}"),
            },
            other => plan_err!("{} of {other}", self.access.name()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (container, key) = (&arrays[0], &arrays[1]);
        let Some(entries) = collection_entries(container) else {
            return exec_err!("{} of {}", self.access.name(), container.data_type());
        };
        let nulls = container.logical_nulls();
        let picks = match &entries.keys {
            Some(keys) => map_entries(&entries.ranges, nulls.as_ref(), keys, key)?,
            None => {
                let past_end_fails = self.access.fails() && EvalMode::of(&args.config_options) == EvalMode::Ansi;
                self.array_elements(&entries.ranges, nulls.as_ref(), key, past_end_fails)?
            }
        };
        Ok(ColumnarValue::Array(take(entries.values.as_ref(), &UInt32Array::from(picks), None)?))
    }
}

impl ElementAccess {
    /// The position in the array's values of each row's element at its index.
    fn array_elements(
        &self,
        ranges: &[(usize, usize)],
        nulls: Option<&NullBuffer>,
        index: &ArrayRef,
        past_end_fails: bool,
    ) -> Result<Vec<Option<u32>>> {
        let index = index.as_primitive::<Int32Type>();
        let mut picks = Vec::with_capacity(index.len());
        for (row, &(start, end)) in ranges.iter().enumerate() {
            let len = end - start;
            if nulls.is_some_and(|n| n.is_null(row)) || index.is_null(row) {
                picks.push(None);
                continue;
            }
            let i = i64::from(index.value(row));
            let position = if self.access.counts_from_one() {
                match i {
                    0 if self.access.fails() => return Err(index_of_zero()),
                    0 => None,
                    i if i > 0 => Some(i - 1),
                    i => Some(len as i64 + i),
                }
            } else {
                Some(i)
            };
            match position.filter(|p| (0..len as i64).contains(p)) {
                Some(p) => picks.push(Some(u32::try_from(start + p as usize).map_err(|_| too_large())?)),
                None if past_end_fails => return Err(self.out_of_bounds(i, len)),
                None => picks.push(None),
            }
        }
        Ok(picks)
    }

    fn out_of_bounds(&self, index: i64, len: usize) -> DataFusionError {
        let (class, advice) = match self.access {
            Access::ElementAt => ("INVALID_ARRAY_INDEX_IN_ELEMENT_AT", "Use `try_element_at` to tolerate"),
            _ => ("INVALID_ARRAY_INDEX", "Use the SQL function `get()` to tolerate"),
        };
        SqlError::new(
            "22003",
            format!(
                "[{class}] The index {index} is out of bounds. The array has {len} elements. {advice} accessing element at invalid index and return NULL instead."
            ),
        ).into()
    }
}

fn index_of_zero() -> DataFusionError {
    SqlError::new(
        "22003",
        "[INVALID_INDEX_OF_ZERO] The index 0 is invalid. An index shall be either < 0 or > 0 (the first element has index 1).",
    ).into()
}

fn too_large() -> DataFusionError {
    SqlError::new("54000", "an array is too large to index").into()
}

/// The position in the map's values of each row's key, `None` where the map lacks it.
fn map_entries(
    ranges: &[(usize, usize)],
    nulls: Option<&NullBuffer>,
    keys: &ArrayRef,
    key: &ArrayRef,
) -> Result<Vec<Option<u32>>> {
    let mut picks = Vec::with_capacity(ranges.len());
    for (row, &(start, end)) in ranges.iter().enumerate() {
        let wanted = ScalarValue::try_from_array(key, row)?;
        if nulls.is_some_and(|n| n.is_null(row)) || wanted.is_null() {
            picks.push(None);
            continue;
        }
        let mut found = None;
        for j in start..end {
            if ScalarValue::try_from_array(keys, j)? == wanted {
                found = Some(u32::try_from(j).map_err(|_| too_large())?);
                break;
            }
        }
        picks.push(found);
    }
    Ok(picks)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int32Array, ListArray};
    use datafusion::arrow::datatypes::{Field, Int32Type};

    use super::*;

    fn access(name: &str, index: i32) -> Result<Option<i32>> {
        let udf = spark_element_access().into_iter().find(|f| f.name() == name).unwrap();
        let list: ArrayRef =
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(10), Some(20)])]));
        let index: ArrayRef = Arc::new(Int32Array::from(vec![index]));
        let out = udf.invoke_with_args(ScalarFunctionArgs {
            arg_fields: vec![
                Arc::new(Field::new("c", list.data_type().clone(), true)),
                Arc::new(Field::new("i", DataType::Int32, true)),
            ],
            args: vec![ColumnarValue::Array(list), ColumnarValue::Array(index)],
            number_rows: 1,
            return_field: Arc::new(Field::new("r", DataType::Int32, true)),
            config_options: Arc::default(),
        })?;
        let ColumnarValue::Array(out) = out else { panic!("not an array") };
        let out = out.as_primitive::<Int32Type>();
        Ok(out.is_valid(0).then(|| out.value(0)))
    }

    #[test]
    fn arrays_count_as_spark_counts() {
        assert_eq!(access("element_at", 1).unwrap(), Some(10));
        assert_eq!(access("element_at", -1).unwrap(), Some(20));
        assert_eq!(access("get_item", 0).unwrap(), Some(10));
        assert_eq!(access("get", 2).unwrap(), None);
        assert_eq!(access("try_element_at", 3).unwrap(), None);
        let code = |r: Result<Option<i32>>| SqlError::from(r.unwrap_err()).code;
        assert_eq!(code(access("element_at", 3)), "22003");
        assert_eq!(code(access("element_at", 0)), "22003");
        assert_eq!(code(access("get_item", -1)), "22003");
    }
}

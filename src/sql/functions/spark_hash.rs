//! Spark's SQL `hash(expr, ...)`: Murmur3 with seed 42 chained over the arguments, never NULL.
//!
//! Exposed so users can check bucket placement the way they would in Spark:
//! `SELECT pmod(hash(k), 16)` is the bucket of a row of a table clustered by `k` into 16 buckets.

use std::sync::Arc;

use datafusion::arrow::array::Int32Array;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{ScalarValue, not_impl_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::storage::bucket_hash::{hash_columns, is_hashable};

/// The `hash` scalar function; see [`spark_hash_udf`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkHash {
    signature: Signature,
}

impl Default for SparkHash {
    fn default() -> Self {
        Self { signature: Signature::variadic_any(Volatility::Immutable) }
    }
}

/// Spark's `hash(...)` as a DataFusion function: one or more arguments, Int32 result.
pub fn spark_hash_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(SparkHash::default())
}

impl ScalarUDFImpl for SparkHash {
    fn name(&self) -> &str {
        "hash"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    /// Rejects unsupported argument types at planning time; the result is never NULL because
    /// NULL arguments leave the running hash unchanged.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if let Some(f) = args.arg_fields.iter().find(|f| !is_hashable(f.data_type())) {
            return not_impl_err!("hash() does not support arguments of type {}", f.data_type());
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Int32, false)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let all_scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if all_scalar { 1 } else { args.number_rows };
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<_>>>()?;
        let hashes = hash_columns(&arrays, rows)?;
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::Int32(Some(hashes[0])))
        } else {
            ColumnarValue::Array(Arc::new(Int32Array::from(hashes)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray};
    use datafusion::arrow::datatypes::Int32Type;
    use datafusion::config::ConfigOptions;
    use datafusion::prelude::SessionContext;

    fn invoke(args: Vec<ColumnarValue>, number_rows: usize) -> Result<ColumnarValue> {
        let arg_fields =
            args.iter().enumerate().map(|(i, a)| Arc::new(Field::new(format!("a{i}"), a.data_type(), true))).collect();
        spark_hash_udf().invoke_with_args(ScalarFunctionArgs {
            args,
            arg_fields,
            number_rows,
            return_field: Arc::new(Field::new("hash", DataType::Int32, false)),
            config_options: Arc::new(ConfigOptions::default()),
        })
    }

    #[test]
    fn hashes_arrays_and_broadcasts_scalars() {
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(1), None, Some(49)]));
        let names: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("x"), None]));
        let out = invoke(vec![ColumnarValue::Array(keys.clone()), ColumnarValue::Array(names)], 4)
            .unwrap()
            .into_array(4)
            .unwrap();
        let out = out.as_primitive::<Int32Type>();
        assert_eq!(out.null_count(), 0);
        // hash(1L, 'a') and hash(NULL, 'x') from the Spark vectors.
        assert_eq!(out.value(0), 573093329);
        assert_eq!(out.value(2), -80340190);

        let six = ColumnarValue::Scalar(ScalarValue::Int64(Some(6)));
        let out = invoke(vec![ColumnarValue::Array(keys.clone()), six.clone()], 4).unwrap();
        let expected = hash_columns(&[keys, six.to_array(4).unwrap()], 4).unwrap();
        assert_eq!(out.into_array(4).unwrap().as_primitive::<Int32Type>().values(), &expected[..]);
        assert_eq!(expected[3], -1881381486); // hash(49L, 6L)
    }

    #[test]
    fn scalar_arguments_give_a_scalar() {
        let spark = ColumnarValue::Scalar(ScalarValue::from("Spark"));
        let null = ColumnarValue::Scalar(ScalarValue::Null);
        match invoke(vec![spark, null], 3).unwrap() {
            ColumnarValue::Scalar(s) => assert_eq!(s, ScalarValue::Int32(Some(228093765))),
            other => panic!("expected a scalar, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn sql_hash_and_bucket() {
        let ctx = SessionContext::new();
        ctx.register_udf(spark_hash_udf());
        let batches = ctx
            .sql(
                "SELECT hash(CAST(1 AS INT)), hash(CAST(1 AS BIGINT), 'a'), hash(NULL), \
                 CAST(hash(CAST(1 AS INT), 'a') % 8 AS INT), hash('hello world', DATE '2026-01-02')",
            )
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let row: Vec<i32> = batches[0].columns().iter().map(|c| c.as_primitive::<Int32Type>().value(0)).collect();
        let hello = crate::storage::bucket_hash::hash_bytes(b"hello world", 42);
        let date = crate::storage::bucket_hash::hash_int(20455, hello);
        assert_eq!(row, vec![-559580957, 573093329, 42, -936062819 % 8, date]);
        assert!(!batches[0].schema().field(0).is_nullable());
    }

    #[tokio::test]
    async fn sql_hashes_unsigned_integers_as_spark_reads_them() {
        let ctx = SessionContext::new();
        ctx.register_udf(spark_hash_udf());
        let batches = ctx
            .sql("SELECT hash(arrow_cast(7, 'UInt32')), hash(CAST(7 AS BIGINT))")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let row: Vec<i32> = batches[0].columns().iter().map(|c| c.as_primitive::<Int32Type>().value(0)).collect();
        assert_eq!(row[0], row[1]);
    }
}

//! Spark's `typeof(x)`: the name of `x`'s type as Spark's DDL writes it (`int`,
//! `decimal(12,2)`, `timestamp`), `void` for an untyped NULL. DataFusion has only
//! `arrow_typeof`, which names Arrow's types.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::catalog::types::SparkType;

pub fn spark_typeof() -> ScalarUDF {
    ScalarUDF::new_from_impl(TypeOf { signature: Signature::any(1, Volatility::Immutable) })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TypeOf {
    signature: Signature,
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let data_type = args.arg_fields[0].data_type();
        let name = match data_type {
            DataType::Null => "void".to_string(),
            other => SparkType::from_arrow(other)
                .map_or_else(|_| other.to_string().to_lowercase(), |t| t.as_str().to_string()),
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

//! One of DataFusion's functions with only its invocation replaced: its name, aliases,
//! signature, coercions, return type and ordering stay the wrapped function's, so a query
//! plans exactly as it did, and only what a call computes differs.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::error::Result;
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

/// What a call does in place of the wrapped function's own invocation.
pub trait Invoke: Debug + PartialEq + Eq + Hash + Send + Sync + 'static {
    /// Answers a call of `inner` (DataFusion's function) with `args`, itself or through `inner`.
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue>;
}

/// `inner`, called through `invoke`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Overridden<I> {
    inner: ScalarUDF,
    invoke: I,
}

/// `inner` called through `invoke`; `None` when the session has no such function.
pub fn overridden<I: Invoke>(inner: Option<Arc<ScalarUDF>>, invoke: I) -> Option<ScalarUDF> {
    Some(ScalarUDF::new_from_impl(Overridden { inner: inner?.as_ref().clone(), invoke }))
}

impl<I: Invoke> ScalarUDFImpl for Overridden<I> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.invoke.invoke(&self.inner, args)
    }
}

//! A plan node as the operator it is, shared rather than borrowed: for the operators and rules
//! that find one another in a plan (the stages, reads and sorts below a join or an aggregate)
//! and keep what they found. Apart from every operator, as operators that use one another
//! (the query stages and the reused exchanges they read) both need it.

use std::any::Any;
use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;

/// `plan` as the operator type it is, sharing its allocation.
pub fn downcast_plan<T: ExecutionPlan>(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<T>> {
    let any: Arc<dyn Any + Send + Sync> = Arc::clone(plan) as Arc<dyn Any + Send + Sync>;
    any.downcast::<T>().ok()
}

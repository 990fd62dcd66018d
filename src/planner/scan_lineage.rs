//! Finds the table scan beneath an operator, to explain planner decisions in a user's terms
//! ("default.tx, bucketed by account_id into 8 buckets").

use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;

use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};

/// The first `T` an operator reads through a chain of single-input operators (the operator
/// itself included), if any.
pub fn first_below<T: ExecutionPlan + 'static>(plan: &Arc<dyn ExecutionPlan>) -> Option<&T> {
    if let Some(found) = plan.downcast_ref::<T>() {
        return Some(found);
    }
    match plan.children().as_slice() {
        [only] => first_below(only),
        _ => None,
    }
}

/// The scan an operator reads through a chain of single-input operators, if any.
pub fn scan_below(plan: &Arc<dyn ExecutionPlan>) -> Option<&FileSourceScanExec> {
    first_below(plan)
}

pub fn describe_side(plan: &Arc<dyn ExecutionPlan>) -> String {
    let Some(scan) = scan_below(plan) else {
        return format!("the output of {}", plan.name());
    };
    let table = format!("{}.{}", scan.table().schema, scan.table().name);
    match (scan.bucket_spec(), scan.status()) {
        (None, _) => format!("{table} (not bucketed)"),
        (Some(spec), BucketedStatus::Bucketed) => {
            format!(
                "{table} (bucketed by {} into {} buckets)",
                spec.bucket_columns.join(", "),
                scan.coalesced_to().unwrap_or(spec.num_buckets)
            )
        }
        (Some(spec), status) => format!(
            "{table} (bucketed by {}, but read without buckets: {})",
            spec.bucket_columns.join(", "),
            status.explain().unwrap_or_default()
        ),
    }
}

/// Key expressions by column name where they are columns.
pub fn describe_keys(keys: &[Arc<dyn PhysicalExpr>]) -> String {
    let names: Vec<String> = keys
        .iter()
        .map(|k| k.downcast_ref::<Column>().map_or_else(|| k.to_string(), |c| c.name().to_string()))
        .collect();
    format!("({})", names.join(", "))
}

//! Spark's `EnsureRequirements.reorderJoinKeys`: a shuffled join whose keys are a child's
//! hash-partitioning keys in another order takes that order, so that `ON x.b = y.b AND
//! x.a = y.a` over tables bucketed by `(a, b)` reads the buckets as they lie. Without it the
//! co-partitioning check (`spark.sql.requireAllClusterKeysForCoPartition`, on by default)
//! sees keys `(b, a)` against buckets `(a, b)` and shuffles both sides. The left child's
//! partitioning is tried first, then the right's; keys that are not deterministic are left
//! alone, as Spark leaves them.
//!
//! Where we differ: Spark also matches a `PartitioningCollection` (a join's output, known by
//! either side's keys); our joins report one side's partitioning.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

use crate::exec::join::SparkJoinExec;

/// `join` with its keys in a child's partitioning order, `None` when they already are or no
/// child's partitioning holds the same keys.
pub fn reorder_join_keys(join: &SparkJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let spec = join.spec();
    if !spec.strategy.is_shuffled() || spec.skew || spec.on.len() < 2 {
        return Ok(None);
    }
    let keys = [join.left_keys(), join.right_keys()];
    if keys.iter().flatten().any(is_volatile) {
        return Ok(None);
    }
    for (child, current) in [join.left(), join.right()].into_iter().zip(&keys) {
        let Partitioning::Hash(expected, _) = child.output_partitioning() else {
            continue;
        };
        let Some(order) = permutation(expected, current) else {
            continue;
        };
        if order.iter().enumerate().all(|(position, index)| position == *index) {
            return Ok(None);
        }
        let mut reordered = spec.clone();
        reordered.on = order.iter().map(|&index| spec.on[index].clone()).collect();
        let join = SparkJoinExec::try_new(reordered, Arc::clone(join.left()), Arc::clone(join.right()))?;
        return Ok(Some(Arc::new(join)));
    }
    Ok(None)
}

/// The positions in `current` that list it in `expected`'s order, when both hold the same
/// keys (`EnsureRequirements.reorder`).
fn permutation(expected: &[Arc<dyn PhysicalExpr>], current: &[Arc<dyn PhysicalExpr>]) -> Option<Vec<usize>> {
    if expected.len() != current.len() {
        return None;
    }
    let mut taken = vec![false; current.len()];
    expected
        .iter()
        .map(|key| {
            let index = (0..current.len()).find(|&i| !taken[i] && current[i].eq(key))?;
            taken[index] = true;
            Some(index)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use datafusion::physical_expr::expressions::Column;

    use super::*;

    fn columns(names: &[&str]) -> Vec<Arc<dyn PhysicalExpr>> {
        names.iter().enumerate().map(|(i, n)| Arc::new(Column::new(n, i)) as Arc<dyn PhysicalExpr>).collect()
    }

    #[test]
    fn keys_are_matched_as_a_set_in_the_partitioning_order() {
        let (a, b, c) = (columns(&["a"]), columns(&["b"]), columns(&["c"]));
        let list = |parts: &[&Vec<Arc<dyn PhysicalExpr>>]| parts.iter().map(|p| Arc::clone(&p[0])).collect::<Vec<_>>();
        assert_eq!(permutation(&list(&[&a, &b]), &list(&[&b, &a])), Some(vec![1, 0]));
        assert_eq!(permutation(&list(&[&a, &b]), &list(&[&a, &b])), Some(vec![0, 1]));
        assert_eq!(permutation(&list(&[&a, &b]), &list(&[&a, &a])), None);
        assert_eq!(permutation(&list(&[&a, &b]), &list(&[&b, &a, &c])), None);
        assert_eq!(permutation(&list(&[&a, &c]), &list(&[&b, &a])), None);
    }
}

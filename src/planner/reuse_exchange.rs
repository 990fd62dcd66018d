//! Spark's `ReuseExchangeAndSubquery` (`spark.sql.exchange.reuse`, on by default): an exchange
//! whose plan is the same as one met before it (bottom-up, left first) becomes a
//! `ReusedExchange` that reads the first one's output, so a CTE used twice or a self-join of one
//! aggregate computes and moves its rows once.
//!
//! Two exchanges are the same when they and every operator below them print alike in full
//! (DataFusion's verbose display: expressions, the files, columns, filters and buckets a scan
//! reads); an exchange over a volatile function (`random()`) is never reused. Runs last, once
//! no rule rewrites the operators below an exchange any more. Where we differ: under adaptive
//! execution, which Spark reuses query stages for, exchanges are not reused.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_plan::{ExecutionPlan, displayable};

use crate::exec::query_stage::downcast_plan;
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;

pub fn reuse_exchanges(plan: Arc<dyn ExecutionPlan>, enabled: bool) -> Result<Arc<dyn ExecutionPlan>> {
    if !enabled {
        return Ok(plan);
    }
    let mut seen: HashMap<String, Arc<ShuffleExchangeExec>> = HashMap::new();
    plan.transform_up(|node| {
        let Some(exchange) = downcast_plan::<ShuffleExchangeExec>(&node) else { return Ok(Transformed::no(node)) };
        if volatile(&node)? {
            return Ok(Transformed::no(node));
        }
        let canonical = displayable(node.as_ref()).indent(true).to_string();
        match seen.get(&canonical) {
            Some(first) => Ok(Transformed::yes(Arc::new(ReusedExchangeExec::try_new(Arc::clone(first))?) as _)),
            None => {
                seen.insert(canonical, exchange);
                Ok(Transformed::no(node))
            }
        }
    })
    .map(|t| t.data)
}

fn volatile(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    let mut found = false;
    plan.apply(|node| {
        node.apply_expressions(&mut |expr| {
            found |= is_volatile(expr);
            Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
        })?;
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    Ok(found)
}

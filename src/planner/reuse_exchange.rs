//! Spark's `ReuseExchangeAndSubquery` (`spark.sql.exchange.reuse`, on by default): an exchange
//! (shuffle or broadcast) whose plan is the same as one met before it (bottom-up, left first)
//! becomes a `ReusedExchange` that reads the first one's output, so a CTE used twice, a self-join
//! of one aggregate or one table broadcast to two joins computes and moves its rows once.
//!
//! Two exchanges are the same when they and every operator below them print alike in full
//! (DataFusion's verbose display: expressions, the files, columns, filters and buckets a scan
//! reads); an exchange over a volatile function (`random()`) is never reused. Runs last, once
//! no rule rewrites the operators below an exchange any more. Under adaptive execution the
//! stages reuse instead (`adaptive`): a stage whose exchange is the same as another's about to
//! run in the same round reads that one's output. Where we differ: Spark also reuses a stage
//! that ran in an earlier round, whose files it keeps; our exchange output goes as it is read.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_plan::{ExecutionPlan, displayable};

use crate::exec::reused_exchange::{Reused, ReusedExchangeExec};

pub fn reuse_exchanges(plan: Arc<dyn ExecutionPlan>, enabled: bool) -> Result<Arc<dyn ExecutionPlan>> {
    if !enabled {
        return Ok(plan);
    }
    let mut seen = ExchangesSeen::default();
    plan.transform_up(|node| match seen.reuse(&node)? {
        Some(reused) => Ok(Transformed::yes(Arc::new(reused) as _)),
        None => Ok(Transformed::no(node)),
    })
    .map(|t| t.data)
}

/// The exchanges of `plan` that are the same as another of its exchanges: those a stage may
/// read as another's reuse.
pub fn shared_exchanges(plan: &Arc<dyn ExecutionPlan>) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
    let mut by_key: HashMap<String, Vec<Arc<dyn ExecutionPlan>>> = HashMap::new();
    plan.apply(|node| {
        if Reused::of(node).is_some()
            && let Some(key) = reuse_key(node)?
        {
            by_key.entry(key).or_default().push(Arc::clone(node));
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(by_key.into_values().filter(|same| same.len() > 1).flatten().collect())
}

/// The exchanges met so far, by what makes two of them one.
#[derive(Default)]
pub struct ExchangesSeen(HashMap<String, Reused>);

impl ExchangesSeen {
    /// A `ReusedExchange` of the exchange met before that `plan` is the same as; `None` if there
    /// is none, and then `plan`, if an exchange that may be reused, is met.
    pub fn reuse(&mut self, plan: &Arc<dyn ExecutionPlan>) -> Result<Option<ReusedExchangeExec>> {
        let Some(exchange) = Reused::of(plan) else { return Ok(None) };
        let Some(key) = reuse_key(plan)? else { return Ok(None) };
        match self.0.get(&key) {
            Some(first) => Ok(Some(ReusedExchangeExec::try_new(first.clone())?)),
            None => {
                self.0.insert(key, exchange);
                Ok(None)
            }
        }
    }
}

/// What two exchanges must share to be one (their plans printed in full, and every operator's
/// output columns, which some leaves do not print), or `None` for an exchange over a volatile
/// function, which is never reused.
fn reuse_key(exchange: &Arc<dyn ExecutionPlan>) -> Result<Option<String>> {
    if volatile(exchange)? {
        return Ok(None);
    }
    let mut key = displayable(exchange.as_ref()).indent(true).to_string();
    exchange.apply(|node| {
        key.push_str(&format!("{:?}\n", node.schema().fields()));
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(Some(key))
}

pub fn volatile(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
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

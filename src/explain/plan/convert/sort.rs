//! Spark's sorts: `Sort` (global or within partitions, by normalized keys under a join),
//! `TakeOrderedAndProject` for a sort with a limit, and the merge of sorted partitions.

use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;

use super::{Converter, Position};
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::query_stage::ShuffleQueryStageExec;
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
use crate::explain::expressions::{Columns, key, list, render, sort_order};
use crate::explain::plan::{Codegen, Node, Role, field, unary};

impl Converter {
    pub(super) fn sort(&mut self, sort: &SortExec, at: Position) -> Node {
        let child = self.convert(sort.input(), Position { root: false, join_child: at.join_child });
        let schema = sort.input().schema();
        let columns = Columns::Attrs(&child.output);
        let order = list(sort.expr().iter().map(|s| {
            let text = if at.join_child { key(&s.expr, &schema, &columns) } else { render(&s.expr, &columns) };
            sort_order(text, s)
        }));
        if let Some(limit) = sort.fetch() {
            let arguments = format!("{limit}, {order}, {}", list(&child.output));
            let simple =
                format!("TakeOrderedAndProject(limit={limit}, orderBy={order}, output={})", list(&child.output));
            let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
            return Node::new("TakeOrderedAndProject", simple, child.output.clone(), vec![child]).details(details);
        }
        // A sort of each range of a range-partitioned input is Spark's global sort.
        let global = !sort.preserve_partitioning() || ranges_below(sort.input());
        let node = unary("Sort", format!("{order}, {global}, 0"), child, Codegen::Yes);
        if global { node.role(Role::NeedsDistribution) } else { node }
    }

    /// Spark's `SortPreservingMerge`, which merges sorted partitions into one.
    pub(super) fn sort_preserving_merge(&mut self, merge: &SortPreservingMergeExec) -> Node {
        let child = self.convert(merge.input(), Position::default());
        let order = list(merge.expr().iter().map(|s| sort_order(render(&s.expr, &Columns::Attrs(&child.output)), s)));
        let arguments = match merge.fetch() {
            Some(fetch) => format!("{order}, {fetch}"),
            None => order,
        };
        unary("SortPreservingMerge", arguments, child, Codegen::No).role(Role::NeedsDistribution)
    }
}

/// Whether `plan` reads a range exchange: the exchange itself, its query stage or a read of it.
fn ranges_below(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let exchange = if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
        Some(read.stage().exchange())
    } else if let Some(stage) = plan.downcast_ref::<ShuffleQueryStageExec>() {
        Some(stage.exchange())
    } else {
        plan.downcast_ref::<ShuffleExchangeExec>()
    };
    exchange.is_some_and(|e| matches!(e.partitioning(), ExchangePartitioning::Range(..)))
}

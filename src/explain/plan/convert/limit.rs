//! Spark's limits: `CollectLimit` at the root of the query, `GlobalLimit` and `LocalLimit`
//! below it, and DataFusion's gathering of partitions, with or without a limit, as Spark's.

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};

use super::{Converter, Position};
use crate::explain::plan::{Codegen, Node, Role, unary};
use crate::planner::adaptive::insert_adaptive_spark_plan::below_collect_limit;

impl Converter {
    /// Spark's `GlobalLimit`, or `CollectLimit` at the root of the query.
    pub(super) fn global_limit(&mut self, limit: &GlobalLimitExec, at: Position) -> Node {
        let fetch = limit.fetch().map_or(-1, |f| f as i64);
        if at.root {
            let child = self.convert(below_collect_limit(limit.input()), Position::default());
            let arguments = if limit.skip() > 0 { format!("{fetch}, {}", limit.skip()) } else { fetch.to_string() };
            unary("CollectLimit", arguments, child, Codegen::No)
        } else {
            let child = self.convert(limit.input(), Position::default());
            unary("GlobalLimit", format!("{fetch}, {}", limit.skip()), child, Codegen::Yes)
                .role(Role::NeedsDistribution)
        }
    }

    pub(super) fn local_limit(&mut self, limit: &LocalLimitExec) -> Node {
        let child = self.convert(limit.input(), Position::default());
        unary("LocalLimit", limit.fetch().to_string(), child, Codegen::Yes)
    }

    /// DataFusion's gathering of all partitions into one: Spark's `Exchange SinglePartition`,
    /// under a `GlobalLimit` when it limits, or the `CollectLimit` at the root.
    pub(super) fn coalesce(&mut self, coalesce: &CoalescePartitionsExec, at: Position) -> Node {
        if let (Some(fetch), true) = (coalesce.fetch(), at.root) {
            let child = self.convert(below_collect_limit(coalesce.input()), Position::default());
            return unary("CollectLimit", fetch.to_string(), child, Codegen::No);
        }
        let child = self.convert(coalesce.input(), Position::default());
        match coalesce.fetch() {
            Some(fetch) => {
                let gathered = self.exchange(child, "SinglePartition".into(), 1, None);
                unary("GlobalLimit", format!("{fetch}, 0"), gathered, Codegen::Yes).role(Role::NeedsDistribution)
            }
            None => self.exchange(child, "SinglePartition".into(), 1, None),
        }
    }
}

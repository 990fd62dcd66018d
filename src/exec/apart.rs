//! The plans below a sort-merge join that joins its coalesced shuffle partitions one by one
//! ([`joining_shuffle_partitions_apart`]), rebuilt so that partition `i` of each
//! gives the rows of shuffle partition `i` alone.
//!
//! Where such a plan starts from one shuffle partition's rows, an [`ApartExec`] stands for the
//! operator that produces them: an adaptive read, an aggregate of it by its keys, a sort of
//! such rows, or a join below taken apart with the one above. The projections, filters and
//! broadcast hash joins between (each streaming one input through in its order) are rebuilt
//! once over it, and run once per shuffle partition; their metrics are theirs, so EXPLAIN
//! ANALYZE shows what ran. EXPLAIN and EXPLAIN ANALYZE look through an `ApartExec` to the
//! operator it stands for, which is Spark's.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, replace_children_if_necessary,
};

use super::aqe_shuffle_read::{AqeShuffleReadExec, ShufflePartitionSpec};
use super::downcast_plan::downcast_plan;
use super::hash_aggregate::HashAggregateExec;
use super::join::SparkJoinExec;
use super::join_spec::{BuildSide, JoinStrategy};
use super::sort::SortExec;

/// `join`, made to sort and join each shuffle partition of a coalesced read on its own, where
/// both sides read the same coalesced partitions: one after the other in each of as many lanes
/// as cores, so that a coalesced partition left running alone (three of them on two cores)
/// still has every core.
/// Adaptive execution coalesces small shuffle partitions into a few large ones, and a
/// partition of millions of rows sorts far slower than its shuffle partitions do one by one,
/// each within the caches; no row of one shuffle partition joins a row of another. Spark sorts
/// the coalesced partition whole. The caller makes sure that nothing above needs the join's
/// order. `None` where it does not apply.
///
/// Each side becomes a plan whose partition `i` gives shuffle partition `i`'s rows, in key
/// order ([`piecewise`]): a sort of an adaptive read, or a sort-merge join below taken apart
/// with this one (TPC-H's Q21: an anti join over a semi join, all on one key), seen through
/// projections, filters and the streamed side of broadcast hash joins (TPC-H's Q18).
pub fn joining_shuffle_partitions_apart(join: &SparkJoinExec) -> Option<SparkJoinExec> {
    if !join.can_be_taken_apart() {
        return None;
    }
    let (left, right) = (piecewise(join.left())?, piecewise(join.right())?);
    if !(left.ordered && right.ordered) || left.ranges != right.ranges {
        return None;
    }
    Some(join.taken_apart(left.plan, right.plan, left.ranges))
}

/// A plan rebuilt to give one shuffle partition per partition.
struct Piecewise {
    plan: Arc<dyn ExecutionPlan>,
    /// Whether each partition's rows come in the join keys' order.
    ordered: bool,
    /// The shuffle partitions each coalesced partition of the plan as it was reads.
    ranges: Arc<[Range<usize>]>,
}

/// `plan` rebuilt so that its partition `i` gives shuffle partition `i`'s rows alone, where
/// every adaptive read below it coalesces the same shuffle partitions and what lies between
/// keeps no state across them. `None` where it cannot be.
fn piecewise(plan: &Arc<dyn ExecutionPlan>) -> Option<Piecewise> {
    // A join below is wrapped to yield now and then (`planner::cooperative_joins`); taken
    // apart, it runs inside the lanes of the join above, which yield at every batch they send.
    if let Some(cooperative) = plan.downcast_ref::<CooperativeExec>() {
        return piecewise(cooperative.input());
    }
    if let Some(join) = downcast_plan::<SparkJoinExec>(plan) {
        if let Some(ranges) = join.apart_ranges() {
            return ApartExec::piece(Arc::clone(&join) as _, Arc::clone(ranges), true);
        }
        if let Some(apart) = joining_shuffle_partitions_apart(&join) {
            let ranges = Arc::clone(apart.apart_ranges()?);
            return ApartExec::piece(Arc::new(apart), ranges, true);
        }
        return streamed_through(plan, streamed_side(&join)?);
    }
    if let Some(sort) = downcast_plan::<SortExec>(plan).filter(|s| s.fetch().is_none() && s.preserve_partitioning()) {
        let input = piecewise(sort.input())?;
        let sort = Arc::new(SortExec::new(sort.expr().clone(), input.plan).with_preserve_partitioning(true));
        return ApartExec::piece(sort, input.ranges, true);
    }
    if let Some(read) = downcast_plan::<AqeShuffleReadExec>(plan) {
        let ranges = coalesced_ranges(&read)?;
        return ApartExec::piece(read, ranges, false);
    }
    if let Some(aggregate) = downcast_plan::<HashAggregateExec>(plan) {
        let ranges = coalesced_ranges(aggregate.keyed_read()?.as_ref())?;
        return ApartExec::piece(aggregate, ranges, false);
    }
    // A filter that stops at a number of rows would stop at that many per shuffle partition.
    if (plan.is::<ProjectionExec>() || plan.is::<FilterExec>()) && plan.fetch().is_none() {
        return streamed_through(plan, 0);
    }
    None
}

/// `plan` over its child `child` made piecewise, where it keeps that child's order.
fn streamed_through(plan: &Arc<dyn ExecutionPlan>, child: usize) -> Option<Piecewise> {
    let input = piecewise(plan.children().get(child)?)?;
    let mut children: Vec<_> = plan.children().into_iter().map(Arc::clone).collect();
    children[child] = input.plan;
    let ordered = input.ordered && plan.maintains_input_order().get(child).copied().unwrap_or(false);
    let rebuilt = replace_children_if_necessary(Arc::clone(plan), children).ok()?;
    Some(Piecewise { plan: rebuilt, ordered, ranges: input.ranges })
}

/// The side a broadcast hash join streams, whose rows it joins one at a time to the table it
/// built from the other side.
fn streamed_side(join: &SparkJoinExec) -> Option<usize> {
    let spec = join.spec();
    if spec.strategy != JoinStrategy::BroadcastHash || spec.null_aware {
        return None;
    }
    Some(if spec.build_side == Some(BuildSide::Left) { 1 } else { 0 })
}

/// The shuffle partitions each partition of `read` reads whole, where each reads its own,
/// in order, and some read several.
fn coalesced_ranges(read: &AqeShuffleReadExec) -> Option<Arc<[Range<usize>]>> {
    let ranges: Vec<Range<usize>> = read
        .specs()
        .iter()
        .map(|spec| match spec {
            ShufflePartitionSpec::Coalesced(range) => Some(range.clone()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let apart = ranges.windows(2).all(|pair| pair[0].end <= pair[1].start) && ranges.iter().any(|r| r.len() > 1);
    apart.then(|| ranges.into())
}

/// What an [`ApartExec`] runs for one shuffle partition.
#[derive(Debug)]
enum Piece {
    Read(Arc<AqeShuffleReadExec>),
    /// An aggregate of an adaptive read partitioned by its keys.
    Aggregated(Arc<HashAggregateExec>),
    /// A sort whose input is itself piecewise.
    Sorted(Arc<SortExec>),
    /// A sort-merge join taken apart.
    Joined(Arc<SparkJoinExec>),
}

impl Piece {
    /// The piece `plan` is, as `ApartExec`'s input.
    fn of(plan: &Arc<dyn ExecutionPlan>) -> Option<Piece> {
        downcast_plan(plan)
            .map(Piece::Read)
            .or_else(|| downcast_plan(plan).map(Piece::Aggregated))
            .or_else(|| downcast_plan(plan).map(Piece::Sorted))
            .or_else(|| downcast_plan(plan).map(Piece::Joined))
    }
}

/// One shuffle partition of what the operator below produces as a partition of its own:
/// partition `i` of this plan is shuffle partition `i`.
#[derive(Debug)]
pub struct ApartExec {
    piece: Piece,
    /// The operator the piece runs, as a plan.
    input: Arc<dyn ExecutionPlan>,
    ranges: Arc<[Range<usize>]>,
    properties: Arc<PlanProperties>,
}

impl ApartExec {
    /// `input` run a shuffle partition at a time, where it is an operator that can be.
    fn new(input: Arc<dyn ExecutionPlan>, ranges: Arc<[Range<usize>]>) -> Option<ApartExec> {
        let piece = Piece::of(&input)?;
        let shuffle_partitions = ranges.iter().map(|range| range.end).max().unwrap_or(0);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(shuffle_partitions),
            input.properties().emission_type,
            input.properties().boundedness,
        );
        Some(ApartExec { piece, input, ranges, properties: Arc::new(properties) })
    }

    /// `input`'s shuffle partitions as a plan's partitions; `ordered` where each comes in key
    /// order.
    fn piece(input: Arc<dyn ExecutionPlan>, ranges: Arc<[Range<usize>]>, ordered: bool) -> Option<Piecewise> {
        let plan = Arc::new(ApartExec::new(input, Arc::clone(&ranges))?);
        Some(Piecewise { plan, ordered, ranges })
    }

    /// The operator this stands for.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for ApartExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ApartExec")
    }
}

impl ExecutionPlan for ApartExec {
    fn name(&self) -> &str {
        "ApartExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        let apart = children.pop().and_then(|input| ApartExec::new(input, Arc::clone(&self.ranges)));
        let apart =
            apart.ok_or_else(|| DataFusionError::Internal("ApartExec runs a read, sort, aggregate or join".into()))?;
        Ok(Arc::new(apart))
    }

    fn execute(&self, shuffle_partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let partition = self
            .ranges
            .iter()
            .position(|range| range.contains(&shuffle_partition))
            .ok_or_else(|| DataFusionError::Internal(format!("no shuffle partition {shuffle_partition}")))?;
        match &self.piece {
            Piece::Read(read) => read.execute_shuffle_partition(partition, shuffle_partition, &context),
            Piece::Aggregated(aggregate) => aggregate.execute_shuffle_partition(partition, shuffle_partition, context),
            Piece::Sorted(sort) => {
                let rows = sort.input().execute(shuffle_partition, Arc::clone(&context))?;
                Ok(sort.sort_stream(partition, rows, context))
            }
            Piece::Joined(join) => join.join_shuffle_partition(partition, shuffle_partition, &context),
        }
    }
}

//! Spark's `InjectRuntimeFilter`, made as adaptive execution starts: where one side of a
//! shuffled join (sort-merge or shuffled hash) takes its join key from a table under a
//! selective filter, and the other side's key comes from a larger scan, the larger side's
//! exchange waits for the filtered side's. That one's map side gathers its keys; the waiting
//! side then drops the rows whose keys are not among them before it shuffles
//! (`exec::runtime_filter`): below its partial aggregate where it aggregates by the key, as
//! TPC-H Q17's aggregates all of lineitem by part for 204 selected parts.
//!
//! As Spark's rule does, the key is followed down each side (through projections, filters,
//! aggregates by it, exchanges and joins) to the scan it comes from: a side is selective if a
//! filter on that way tests more than `IS NOT NULL`, and the filtered side must be one whose
//! rows without a match the join drops (either side of an inner or semi join, the inner side
//! of an outer join, the right side of an anti join).
//!
//! Where we differ: Spark plans its filter, a bloom filter in the plan, only where the side it
//! filters scans more than `spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold`
//! (10 GB), so that Spark's plans at our scales have none; ours waits from
//! `bucketsql.runtimeFilter.applicationSideScanSizeThreshold` (64 MB) and leaves the plan
//! EXPLAIN shows as Spark's. An exchange that another is the same as, and all below it, is
//! left alone: its stage may be read as the other's reuse. The side that waits runs its stage a round later, so its stage
//! id is not the one Spark gives it. A row dropped early raises no error: an overflow in a
//! partial aggregate of a key the join would drop is not reported.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, IsNotNullExpr};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use super::{is_query_stage, replace_nodes};
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::plumbing::plumbing_input;
use crate::exec::runtime_filter::{KeyRole, RuntimeFilterExec, RuntimeKeys};
use crate::exec::short_circuit::split_conjunction;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::exec::sort::SortExec;
use crate::planner::reuse_exchange::shared_exchanges;
use crate::storage::bucket_hash::is_hashable;

type Plan = Arc<dyn ExecutionPlan>;

/// `plan` with a runtime filter on each shuffled join it pays for, before any stage has run.
pub fn inject_runtime_filters(plan: Plan, conf: &SparkConf) -> Result<Plan> {
    let scan_threshold = conf.runtime_filter_scan_threshold;
    let large_scan =
        |node: &Plan| node.downcast_ref::<FileSourceScanExec>().is_some_and(|s| s.size_in_bytes() >= scan_threshold);
    // Only a side that scans that much is filtered: a plan with none needs no looking at.
    if !conf.runtime_filter_enabled || !plan.exists(|node| Ok(large_scan(node)))? {
        return Ok(plan);
    }
    // An exchange that another is the same as stays so, and so does all below it: a stage
    // may read the other's output, as Spark's plan shows (`ReusedExchange`), which a filter
    // of its own would rule out.
    let mut untouchable = HashSet::new();
    if conf.exchange_reuse {
        for exchange in shared_exchanges(&plan)? {
            exchange.apply(|node| {
                untouchable.insert(address(node));
                Ok(TreeNodeRecursion::Continue)
            })?;
        }
    }
    plan.transform_up(|node| match node.downcast_ref::<SparkJoinExec>() {
        Some(join) if !untouchable.contains(&address(&node)) => match filtered(join, scan_threshold, &untouchable)? {
            Some(join) => Ok(Transformed::yes(join)),
            None => Ok(Transformed::no(node)),
        },
        _ => Ok(Transformed::no(node)),
    })
    .map(|t| t.data)
}

fn address(plan: &Plan) -> *const () {
    Arc::as_ptr(plan) as *const ()
}

/// Whether an exchange about to run waits for the keys of a runtime filter below it.
pub fn waits_for_keys(plan: &Plan) -> bool {
    if let Some(keys) = plan.downcast_ref::<RuntimeFilterExec>().and_then(RuntimeFilterExec::awaited)
        && !keys.is_ready()
    {
        return true;
    }
    !is_query_stage(plan) && plan.children().into_iter().any(waits_for_keys)
}

/// Lets every exchange still waiting for keys run unfiltered; whether there was one. Keys
/// never come where adaptive execution replaced what was to gather them (by an empty
/// relation, below a stage that produced no rows).
pub fn stop_waiting(plan: &Plan) -> bool {
    let mut waiting = false;
    let _ = plan.apply(|node| {
        if let Some(keys) = node.downcast_ref::<RuntimeFilterExec>().and_then(RuntimeFilterExec::awaited)
            && !keys.is_ready()
        {
            keys.give_up();
            waiting = true;
        }
        Ok(if is_query_stage(node) { TreeNodeRecursion::Jump } else { TreeNodeRecursion::Continue })
    });
    waiting
}

/// One side of a join, its key followed down.
struct Side {
    /// The exchange nearest the join, and the key columns in its output.
    exchange: Plan,
    columns: Vec<usize>,
    /// The bytes of the scan the key comes from.
    scan_bytes: u64,
    /// Whether a selective filter lies on the key's way down from the exchange, or on the way
    /// of a key it is joined with below (Spark follows join keys across, as its rule does).
    selective: bool,
}

impl Side {
    /// `keys` are columns of `child`.
    fn of(child: &Plan, keys: &[usize]) -> Option<Side> {
        let schema = child.schema();
        if !keys.iter().all(|&c| is_hashable(schema.field(c).data_type())) {
            return None;
        }
        let (mut plan, mut columns) = (child, keys.to_vec());
        let mut exchange = None;
        loop {
            if exchange.is_none() && plan.is::<ShuffleExchangeExec>() {
                exchange = Some((Arc::clone(plan), columns.clone()));
            }
            if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
                let (exchange, columns) = exchange?;
                // What the exchange's map side sees is what its keys are gathered from.
                let selective = is_selective_way(&exchange, &columns);
                return Some(Side { exchange, columns, scan_bytes: scan.size_in_bytes(), selective });
            }
            (plan, columns) = lineage(plan, &columns)?;
        }
    }

    /// The key types, in order.
    fn types(&self) -> Vec<DataType> {
        let schema = self.exchange.schema();
        self.columns.iter().map(|&c| schema.field(c).data_type().clone()).collect()
    }
}

/// Whether a selective filter lies on the way of `columns` down `plan`, or down the other
/// side of a join below whose keys they are, where that join drops the rows that match none.
fn is_selective_way(plan: &Plan, columns: &[usize]) -> bool {
    if plan.downcast_ref::<FilterExec>().is_some_and(|filter| is_selective(filter.predicate())) {
        return true;
    }
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        let Some((side, side_columns)) = join_lineage(join, columns) else { return false };
        if is_selective_way(side, &side_columns) {
            return true;
        }
        let from_left = Arc::ptr_eq(side, join.left());
        let (keys, other_keys, other) = match from_left {
            true => (join.left_keys(), join.right_keys(), join.right()),
            false => (join.right_keys(), join.left_keys(), join.left()),
        };
        let other_columns: Option<Vec<usize>> = side_columns
            .iter()
            .map(|&c| {
                let at = keys.iter().position(|key| column_index(key) == Some(c))?;
                column_index(&other_keys[at])
            })
            .collect();
        return drops_unmatched(join.spec().join_type, from_left)
            && other_columns.is_some_and(|other_columns| is_selective_way(other, &other_columns));
    }
    match lineage(plan, columns) {
        Some((input, columns)) => is_selective_way(input, &columns),
        None => false,
    }
}

/// `join` with one side filtered by the other's keys, where that pays: by all its keys, or
/// else by the first one that does.
fn filtered(join: &SparkJoinExec, scan_threshold: u64, untouchable: &HashSet<*const ()>) -> Result<Option<Plan>> {
    let spec = join.spec();
    if !spec.strategy.is_shuffled()
        || spec.null_aware
        || spec.skew
        || spec.null_equality != NullEquality::NullEqualsNothing
    {
        return Ok(None);
    }
    let pairs: Option<Vec<(usize, usize)>> =
        spec.on.iter().map(|(left, right)| Some((column_index(left)?, column_index(right)?))).collect();
    let Some(pairs) = pairs else { return Ok(None) };
    let mut choices = vec![pairs.clone()];
    if pairs.len() > 1 {
        choices.extend(pairs.iter().map(|&pair| vec![pair]));
    }
    for pairs in choices {
        let (left_keys, right_keys): (Vec<usize>, Vec<usize>) = pairs.into_iter().unzip();
        let (Some(left), Some(right)) = (Side::of(join.left(), &left_keys), Side::of(join.right(), &right_keys)) else {
            continue;
        };
        let shared = [&left, &right].iter().any(|side| untouchable.contains(&address(&side.exchange)));
        if left.types() != right.types() || shared {
            continue;
        }
        // Whether filtering `filtered` by the keys of `gathered` pays.
        let pays = |filtered: &Side, gathered: &Side, filtered_is_left: bool| {
            gathered.selective
                && filtered.scan_bytes >= scan_threshold
                && filtered.scan_bytes > gathered.scan_bytes
                && drops_unmatched(spec.join_type, filtered_is_left)
        };
        // The larger side is filtered (so never either of two scans of one table).
        let filter_left = match (pays(&left, &right, true), pays(&right, &left, false)) {
            (false, false) => continue,
            (filter_left, _) => filter_left,
        };
        return with_runtime_filter(join, left, right, filter_left).map(Some);
    }
    Ok(None)
}

/// `join` with its `filter_left` side filtered by the keys the other side's exchange gathers.
fn with_runtime_filter(join: &SparkJoinExec, left: Side, right: Side, filter_left: bool) -> Result<Plan> {
    let (filtered, gathered) = if filter_left { (&left, &right) } else { (&right, &left) };
    let keys = Arc::new(RuntimeKeys::default());
    let collector: Plan = Arc::new(RuntimeFilterExec::new(
        Arc::clone(gathered.exchange.children()[0]),
        gathered.columns.clone(),
        KeyRole::Gathers(Arc::clone(&keys)),
    ));
    let collecting = replace_children_if_necessary(Arc::clone(&gathered.exchange), vec![collector])?;
    let waiting = with_filter(&filtered.exchange, &filtered.columns, &keys)?;
    let (left_exchange, right_exchange) = if filter_left { (waiting, collecting) } else { (collecting, waiting) };
    let left_child = replace_nodes(Arc::clone(join.left()), &[left.exchange], &[left_exchange])?;
    let right_child = replace_nodes(Arc::clone(join.right()), &[right.exchange], &[right_exchange])?;
    Ok(Arc::new(SparkJoinExec::try_new(join.spec().clone(), left_child, right_child)?))
}

/// Whether the join drops the rows of its left (or right) side that match no row of the other.
fn drops_unmatched(join_type: JoinType, left: bool) -> bool {
    match join_type {
        JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi => true,
        JoinType::Left | JoinType::LeftAnti => !left,
        JoinType::Right | JoinType::RightAnti => left,
        JoinType::Full | JoinType::LeftMark | JoinType::RightMark => false,
    }
}

/// The column an expression is, if it is one.
fn column_index(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    expr.downcast_ref::<Column>().map(Column::index)
}

/// Spark's `isLikelySelective`, near enough: a conjunct that tests more than `IS NOT NULL`.
fn is_selective(predicate: &Arc<dyn PhysicalExpr>) -> bool {
    split_conjunction(predicate).iter().any(|conjunct| !conjunct.is::<IsNotNullExpr>())
}

/// The input a node takes `columns` of its output from, and their places there.
fn lineage<'a>(plan: &'a Plan, columns: &[usize]) -> Option<(&'a Plan, Vec<usize>)> {
    if let Some(input) = plumbing_input(plan) {
        return Some((input, columns.to_vec()));
    }
    if let Some(sort) = plan.downcast_ref::<SortExec>() {
        return Some((sort.input(), columns.to_vec()));
    }
    if let Some(exchange) = plan.downcast_ref::<ShuffleExchangeExec>() {
        return Some((exchange.input(), columns.to_vec()));
    }
    if let Some(exchange) = plan.downcast_ref::<BroadcastExchangeExec>() {
        return Some((exchange.input(), columns.to_vec()));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let columns = match filter.projection() {
            Some(projection) => columns.iter().map(|&c| projection.get(c).copied()).collect::<Option<_>>()?,
            None => columns.to_vec(),
        };
        return Some((filter.input(), columns));
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let columns = columns.iter().map(|&c| column_index(&projection.expr().get(c)?.expr)).collect::<Option<_>>()?;
        return Some((projection.input(), columns));
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        let groups = aggregate.group_expr();
        if !groups.is_single() {
            return None;
        }
        let columns = columns.iter().map(|&c| column_index(&groups.expr().get(c)?.0)).collect::<Option<_>>()?;
        return Some((aggregate.input(), columns));
    }
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        return join_lineage(join, columns);
    }
    None
}

/// The side of a join all of `columns` come from.
fn join_lineage<'a>(join: &'a SparkJoinExec, columns: &[usize]) -> Option<(&'a Plan, Vec<usize>)> {
    let left_width = join.left().schema().fields().len();
    let all_left = columns.iter().all(|&c| c < left_width);
    match join.spec().join_type {
        JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => Some((join.right(), columns.to_vec())),
        _ if all_left => Some((join.left(), columns.to_vec())),
        JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full
            if columns.iter().all(|&c| c >= left_width) =>
        {
            Some((join.right(), columns.iter().map(|&c| c - left_width).collect()))
        }
        _ => None,
    }
}

/// `exchange` over its input filtered by `keys`: below a partial aggregate by the key columns
/// where the input passes them down to one, else right below the exchange.
fn with_filter(exchange: &Plan, columns: &[usize], keys: &Arc<RuntimeKeys>) -> Result<Plan> {
    let input = Arc::clone(exchange.children()[0]);
    let filtered = match below_partial_aggregate(&input, columns, keys)? {
        Some(filtered) => filtered,
        None => Arc::new(RuntimeFilterExec::new(input, columns.to_vec(), KeyRole::Filters(Arc::clone(keys)))),
    };
    replace_children_if_necessary(Arc::clone(exchange), vec![filtered])
}

fn below_partial_aggregate(plan: &Plan, columns: &[usize], keys: &Arc<RuntimeKeys>) -> Result<Option<Plan>> {
    let partial = plan.downcast_ref::<AggregateExec>().map(|a| *a.mode() == AggregateMode::Partial);
    let passes_on = plan.is::<SortExec>() || plan.is::<FilterExec>() || plan.is::<ProjectionExec>();
    if partial == Some(false) || !(partial.is_some() || passes_on || plumbing_input(plan).is_some()) {
        return Ok(None);
    }
    let Some((input, columns)) = lineage(plan, columns) else { return Ok(None) };
    let input = match partial {
        Some(_) => Arc::new(RuntimeFilterExec::new(Arc::clone(input), columns, KeyRole::Filters(Arc::clone(keys)))),
        None => match below_partial_aggregate(input, &columns, keys)? {
            Some(input) => input,
            None => return Ok(None),
        },
    };
    Ok(Some(replace_children_if_necessary(Arc::clone(plan), vec![input])?))
}

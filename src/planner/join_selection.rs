//! Spark's `JoinSelection` strategy (`SparkStrategies.scala`): picks the physical join for
//! each join DataFusion planned, by hints first and then by size.
//!
//! With equi-join keys: a BROADCAST hint on a side that may be built → broadcast hash join;
//! MERGE → sort-merge; SHUFFLE_HASH → shuffled hash; then without hints: broadcast by size
//! (`spark.sql.autoBroadcastJoinThreshold`), shuffled hash by size when
//! `spark.sql.join.preferSortMergeJoin` is off, else sort-merge. Without keys: broadcast
//! nested loop (by hint or size), cartesian product for inner joins, else broadcast nested
//! loop. Which side may be built depends on the join type, as in Spark. We differ in one
//! place: a null-aware anti join (`NOT IN`) keeps DataFusion's single-build hash join.
//! Adaptive execution decides again with measured sizes (`choose_strategy`).

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec, SortMergeJoinExec};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use super::hints::{JoinHint, QueryHints};
use super::statistics::size_in_bytes;
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinSpec, JoinStrategy};
use crate::planner::extract_equi_join_keys::null_safe_keys;

type JoinKeys = Vec<(Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>)>;

/// A join as DataFusion planned it.
struct LogicalJoin {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    on: JoinKeys,
    filter: Option<JoinFilter>,
    join_type: JoinType,
    null_equality: NullEquality,
    /// `k NOT IN (subquery)`: DataFusion's null-aware anti join.
    null_aware: bool,
}

impl LogicalJoin {
    fn from_plan(plan: &dyn ExecutionPlan) -> Option<Self> {
        if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
            return Some(LogicalJoin {
                left: Arc::clone(j.left()),
                right: Arc::clone(j.right()),
                on: j.on().to_vec(),
                filter: j.filter().cloned(),
                join_type: *j.join_type(),
                null_equality: j.null_equality(),
                null_aware: j.null_aware,
            });
        }
        if let Some(j) = plan.downcast_ref::<SortMergeJoinExec>() {
            return Some(LogicalJoin {
                left: Arc::clone(j.left()),
                right: Arc::clone(j.right()),
                on: j.on().to_vec(),
                filter: j.filter().clone(),
                join_type: j.join_type(),
                null_equality: j.null_equality(),
                null_aware: false,
            });
        }
        if let Some(j) = plan.downcast_ref::<NestedLoopJoinExec>() {
            return Some(LogicalJoin {
                left: Arc::clone(j.left()),
                right: Arc::clone(j.right()),
                on: Vec::new(),
                filter: j.filter().cloned(),
                join_type: *j.join_type(),
                null_equality: NullEquality::NullEqualsNothing,
                null_aware: false,
            });
        }
        plan.downcast_ref::<CrossJoinExec>().map(|j| LogicalJoin {
            left: Arc::clone(j.left()),
            right: Arc::clone(j.right()),
            on: Vec::new(),
            filter: None,
            join_type: JoinType::Inner,
            null_equality: NullEquality::NullEqualsNothing,
            null_aware: false,
        })
    }
}

/// `canBuildBroadcastLeft` / `canBuildBroadcastRight`.
pub fn can_broadcast(side: BuildSide, join_type: JoinType) -> bool {
    match side {
        BuildSide::Left => matches!(join_type, JoinType::Inner | JoinType::Right),
        BuildSide::Right => {
            matches!(
                join_type,
                JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
            )
        }
    }
}

/// `canBuildShuffledHashJoinLeft` / `canBuildShuffledHashJoinRight` (Spark 3.5+).
fn can_build_hash(side: BuildSide, join_type: JoinType) -> bool {
    match side {
        BuildSide::Left => matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full),
        BuildSide::Right => matches!(
            join_type,
            JoinType::Inner
                | JoinType::Left
                | JoinType::Right
                | JoinType::Full
                | JoinType::LeftSemi
                | JoinType::LeftAnti
                | JoinType::LeftMark
        ),
    }
}

/// The hints of a join side: those on the one table it reads, if it reads exactly one.
pub fn side_hints(plan: &Arc<dyn ExecutionPlan>, hints: &QueryHints) -> HashSet<JoinHint> {
    let mut tables = Vec::new();
    let _ = plan.apply(|node| {
        if let Some(scan) = node.downcast_ref::<FileSourceScanExec>() {
            tables.push(format!("{}.{}", scan.table().schema, scan.table().name));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    match tables.as_slice() {
        [table] => hints.for_table(table),
        _ => HashSet::new(),
    }
}

/// Of the sides allowed, the one to build: the smaller when both (`right <= left` builds right).
fn pick(left_ok: bool, right_ok: bool, left_size: u128, right_size: u128) -> Option<BuildSide> {
    match (left_ok, right_ok) {
        (true, true) if right_size <= left_size => Some(BuildSide::Right),
        (true, true) => Some(BuildSide::Left),
        (true, false) => Some(BuildSide::Left),
        (false, true) => Some(BuildSide::Right),
        (false, false) => None,
    }
}

pub fn join_selection(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
    hints: &QueryHints,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if let Some(join) = LogicalJoin::from_plan(node.as_ref()) {
            return Ok(Transformed::yes(select(normalized(join), conf, hints)?));
        }
        match fold_key_projections(&node)? {
            Some(folded) => Ok(Transformed::yes(folded)),
            None => Ok(Transformed::no(node)),
        }
    })
    .map(|t| t.data)
}

/// Spark has no right semi/anti/existence joins: they are the left ones with sides swapped.
fn normalized(mut join: LogicalJoin) -> LogicalJoin {
    let swapped = match join.join_type {
        JoinType::RightSemi => JoinType::LeftSemi,
        JoinType::RightAnti => JoinType::LeftAnti,
        JoinType::RightMark => JoinType::LeftMark,
        _ => return join,
    };
    std::mem::swap(&mut join.left, &mut join.right);
    join.on = join.on.into_iter().map(|(l, r)| (r, l)).collect();
    join.filter = join.filter.map(|f| f.swap());
    join.join_type = swapped;
    join
}

/// DataFusion computes join keys that are expressions (`cast(k as double)`, `k + 1`) in a
/// projection below the join that appends them to the side's columns, and drops them again in
/// a projection above the join; Spark keeps them in the join's keys. So where a projection sits
/// on a join whose sides append key columns that the projection does not read, those columns
/// are folded into the join's keys (and the columns after them renumbered). A projection the
/// user wrote (`SELECT k, k + 1 AS k2`) whose columns are read above the join is left alone.
fn fold_key_projections(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(top) = node.downcast_ref::<ProjectionExec>() else { return Ok(None) };
    let Some(join) = top.input().downcast_ref::<SparkJoinExec>() else { return Ok(None) };
    if join.spec().filter.is_some() {
        return Ok(None);
    }
    let outputs_right =
        matches!(join.spec().join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full);
    let left_width = join.left().schema().fields().len();
    let mut read = Vec::new();
    for projected in top.expr() {
        projected.expr.apply(|e| {
            read.extend(e.downcast_ref::<Column>().map(Column::index));
            Ok(TreeNodeRecursion::Continue)
        })?;
    }
    // The appended columns of a side starting at `start` in the join's output are not read.
    let unread = |start: usize, side: &AppendedKeys| {
        !read.iter().any(|i| (start + side.width..start + side.exprs.len()).contains(i))
    };
    let left = appended_keys(join.left()).filter(|side| unread(0, side));
    let right = appended_keys(join.right()).filter(|side| !outputs_right || unread(left_width, side));
    let (left_keys, right_keys) = (join.left_keys(), join.right_keys());
    let folded_left = left.as_ref().and_then(|side| side.fold(&left_keys));
    let folded_right = right.as_ref().and_then(|side| side.fold(&right_keys));
    let new_left = match (&left, &folded_left) {
        (Some(side), Some(keys)) => side.without_projection(keys.clone()),
        _ => Arc::clone(join.left()),
    };
    let new_right = match (&right, &folded_right) {
        (Some(side), Some(keys)) => side.without_projection(keys.clone()),
        _ => Arc::clone(join.right()),
    };
    if folded_left.is_none() && folded_right.is_none() {
        return Ok(None);
    }
    let mut spec = join.spec().clone();
    spec.on = folded_left.unwrap_or(left_keys).into_iter().zip(folded_right.unwrap_or(right_keys)).collect();
    // The right side's columns move down past the left side's dropped key columns.
    let dropped = left_width - new_left.schema().fields().len();
    let exprs = top
        .expr()
        .iter()
        .map(|p| {
            let expr = Arc::clone(&p.expr).transform(|e| match e.downcast_ref::<Column>() {
                Some(c) if dropped > 0 && c.index() >= left_width => {
                    Ok(Transformed::yes(Arc::new(Column::new(c.name(), c.index() - dropped)) as Arc<dyn PhysicalExpr>))
                }
                _ => Ok(Transformed::no(e)),
            })?;
            Ok(ProjectionExpr { expr: expr.data, alias: p.alias.clone() })
        })
        .collect::<Result<Vec<_>>>()?;
    let join = Arc::new(SparkJoinExec::try_new(spec, new_left, new_right)?);
    Ok(Some(Arc::new(ProjectionExec::try_new(exprs, join)?)))
}

/// A join side that is a projection appending computed columns to all of its input's, under
/// the side's broadcast if it has one.
struct AppendedKeys {
    input: Arc<dyn ExecutionPlan>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    width: usize,
    broadcast: Option<bool>,
}

fn appended_keys(side: &Arc<dyn ExecutionPlan>) -> Option<AppendedKeys> {
    let broadcast = side.downcast_ref::<BroadcastExchangeExec>();
    let projection = broadcast.map_or(side, |b| b.input()).downcast_ref::<ProjectionExec>()?;
    let input = projection.input();
    let width = input.schema().fields().len();
    // Renamed columns do not pass through: the join above reads them by their new names.
    let passes_through = projection.expr().len() > width
        && projection.expr()[..width].iter().zip(input.schema().fields()).enumerate().all(|(i, (p, field))| {
            p.alias == *field.name() && p.expr.downcast_ref::<Column>().is_some_and(|c| c.index() == i)
        });
    passes_through.then(|| AppendedKeys {
        input: Arc::clone(input),
        exprs: projection.expr().iter().map(|p| Arc::clone(&p.expr)).collect(),
        width,
        broadcast: broadcast.map(BroadcastExchangeExec::is_null_aware),
    })
}

impl AppendedKeys {
    /// `keys`, columns of the projection, as the expressions over its input they stand for.
    fn fold(&self, keys: &[Arc<dyn PhysicalExpr>]) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
        keys.iter().map(|k| k.downcast_ref::<Column>().map(|c| Arc::clone(&self.exprs[c.index()]))).collect()
    }

    /// The side without the projection, its broadcast (if any) rebuilt on `keys`.
    fn without_projection(&self, keys: Vec<Arc<dyn PhysicalExpr>>) -> Arc<dyn ExecutionPlan> {
        match self.broadcast {
            Some(null_aware) => {
                Arc::new(BroadcastExchangeExec::new(Arc::clone(&self.input), keys).null_aware(null_aware))
            }
            None => Arc::clone(&self.input),
        }
    }
}

/// What join selection weighs about one side of a join.
#[derive(Debug, Clone)]
pub struct SideFacts {
    /// Estimated bytes, or measured ones where the side is a finished stage.
    pub size: u128,
    /// Size up to which the side may be broadcast (`-1`: never).
    pub broadcast_threshold: i64,
    pub hints: HashSet<JoinHint>,
}

impl SideFacts {
    fn broadcastable_by_size(&self) -> bool {
        self.broadcast_threshold >= 0
            && self.size <= self.broadcast_threshold as u128
            && !self.hints.contains(&JoinHint::NoBroadcastHash)
    }
}

fn select(join: LogicalJoin, conf: &SparkConf, hints: &QueryHints) -> Result<Arc<dyn ExecutionPlan>> {
    let facts = |side: &Arc<dyn ExecutionPlan>| SideFacts {
        size: size_in_bytes(side.as_ref()),
        broadcast_threshold: conf.auto_broadcast_join_threshold,
        hints: side_hints(side, hints),
    };
    let (left_facts, right_facts) = (facts(&join.left), facts(&join.right));
    // `ExtractSingleColumnNullAwareAntiJoin`: NOT IN's anti join broadcasts the subquery
    // whatever its size.
    let (strategy, build_side) = if join.null_aware {
        (JoinStrategy::BroadcastHash, Some(BuildSide::Right))
    } else {
        choose_strategy(join.join_type, !join.on.is_empty(), &left_facts, &right_facts, conf)
    };
    let LogicalJoin { mut left, mut right, mut on, filter, join_type, mut null_equality, null_aware } = join;
    if null_equality == NullEquality::NullEqualsNull
        && let Some(keys) = null_safe_keys(&on, &left.schema(), &right.schema())
    {
        (on, null_equality) = (keys, NullEquality::NullEqualsNothing);
    }
    if matches!(strategy, JoinStrategy::BroadcastHash | JoinStrategy::BroadcastNestedLoop) {
        match build_side {
            Some(BuildSide::Left) => {
                let keys = on.iter().map(|(l, _)| Arc::clone(l)).collect();
                left = Arc::new(BroadcastExchangeExec::new(left, keys));
            }
            _ => {
                let keys = on.iter().map(|(_, r)| Arc::clone(r)).collect();
                right = Arc::new(BroadcastExchangeExec::new(right, keys).null_aware(null_aware));
            }
        }
    }
    let cross = strategy == JoinStrategy::BroadcastNestedLoop
        && join_type == JoinType::Inner
        && on.is_empty()
        && filter.is_none()
        && hints.cross_join_written();
    let spec = JoinSpec { strategy, build_side, join_type, on, filter, null_equality, null_aware, skew: false, cross };
    Ok(Arc::new(SparkJoinExec::try_new(spec, left, right)?))
}

/// The strategy and build side Spark's `JoinSelection` picks for a join of `join_type` (with
/// equi-join keys or not): hints first, then sizes.
pub fn choose_strategy(
    join_type: JoinType,
    has_keys: bool,
    left: &SideFacts,
    right: &SideFacts,
    conf: &SparkConf,
) -> (JoinStrategy, Option<BuildSide>) {
    let jt = join_type;
    let (left_size, right_size) = (left.size, right.size);
    let hinted = |hint: JoinHint, side: BuildSide| match side {
        BuildSide::Left => left.hints.contains(&hint),
        BuildSide::Right => right.hints.contains(&hint),
    };
    let broadcast_hinted = pick(
        hinted(JoinHint::Broadcast, BuildSide::Left) && can_broadcast(BuildSide::Left, jt),
        hinted(JoinHint::Broadcast, BuildSide::Right) && can_broadcast(BuildSide::Right, jt),
        left_size,
        right_size,
    );
    let broadcast_by_size = pick(
        can_broadcast(BuildSide::Left, jt) && left.broadcastable_by_size(),
        can_broadcast(BuildSide::Right, jt) && right.broadcastable_by_size(),
        left_size,
        right_size,
    );
    let inner_like = jt == JoinType::Inner;
    let replicate =
        hinted(JoinHint::ShuffleReplicateNl, BuildSide::Left) || hinted(JoinHint::ShuffleReplicateNl, BuildSide::Right);

    if has_keys {
        let hash_hinted = pick(
            hinted(JoinHint::ShuffleHash, BuildSide::Left) && can_build_hash(BuildSide::Left, jt),
            hinted(JoinHint::ShuffleHash, BuildSide::Right) && can_build_hash(BuildSide::Right, jt),
            left_size,
            right_size,
        );
        let merge_hinted =
            hinted(JoinHint::ShuffleMerge, BuildSide::Left) || hinted(JoinHint::ShuffleMerge, BuildSide::Right);
        let threshold = conf.auto_broadcast_join_threshold;
        let local_map_limit = if threshold >= 0 { threshold as u128 * conf.shuffle_partitions as u128 } else { 0 };
        let factor = conf.shuffled_hash_join_factor as u128;
        // `canBuildLocalHashMapBySize` and `muchSmaller`, unless a stage's statistics said so.
        let hash_by_size = |side: BuildSide, size: u128, other: u128| {
            hinted(JoinHint::PreferShuffleHash, side)
                || (!conf.prefer_sort_merge_join && size < local_map_limit && size * factor <= other)
        };
        let hash_by_size = pick(
            can_build_hash(BuildSide::Left, jt) && hash_by_size(BuildSide::Left, left_size, right_size),
            can_build_hash(BuildSide::Right, jt) && hash_by_size(BuildSide::Right, right_size, left_size),
            left_size,
            right_size,
        );
        if let Some(side) = broadcast_hinted {
            (JoinStrategy::BroadcastHash, Some(side))
        } else if merge_hinted {
            (JoinStrategy::SortMerge, None)
        } else if let Some(side) = hash_hinted {
            (JoinStrategy::ShuffledHash, Some(side))
        } else if replicate && inner_like {
            (JoinStrategy::Cartesian, None)
        } else if let Some(side) = broadcast_by_size {
            (JoinStrategy::BroadcastHash, Some(side))
        } else if let Some(side) = hash_by_size {
            (JoinStrategy::ShuffledHash, Some(side))
        } else {
            (JoinStrategy::SortMerge, None)
        }
    } else {
        // A nested loop joins any type from either side: where both sides may be broadcast,
        // the smaller for inner and full joins, else the side the join type prefers.
        let desired = match jt {
            JoinType::Inner | JoinType::Full => pick(true, true, left_size, right_size),
            _ if can_broadcast(BuildSide::Left, jt) => Some(BuildSide::Left),
            _ => Some(BuildSide::Right),
        };
        let nested_loop = |left_ok: bool, right_ok: bool| match (left_ok, right_ok) {
            (true, true) => desired,
            (true, false) => Some(BuildSide::Left),
            (false, true) => Some(BuildSide::Right),
            (false, false) => None,
        };
        let strategy = JoinStrategy::BroadcastNestedLoop;
        if let Some(side) =
            nested_loop(hinted(JoinHint::Broadcast, BuildSide::Left), hinted(JoinHint::Broadcast, BuildSide::Right))
        {
            (strategy, Some(side))
        } else if replicate && inner_like {
            (JoinStrategy::Cartesian, None)
        } else if let Some(side) = nested_loop(left.broadcastable_by_size(), right.broadcastable_by_size()) {
            (strategy, Some(side))
        } else if inner_like {
            (JoinStrategy::Cartesian, None)
        } else {
            (strategy, desired)
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::LogicalPlanBuilder;
    use datafusion::physical_plan::joins::PartitionMode;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;
    use crate::planner::test_fixtures::*;
    use JoinHint::{Broadcast, NoBroadcastHash, PreferShuffleHash, ShuffleHash, ShuffleMerge, ShuffleReplicateNl};

    const MB: u128 = 1 << 20;

    const SMJ: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::SortMerge, None);
    const BHJ_LEFT: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::BroadcastHash, Some(BuildSide::Left));
    const BHJ_RIGHT: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::BroadcastHash, Some(BuildSide::Right));
    const SHJ_RIGHT: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::ShuffledHash, Some(BuildSide::Right));
    const BNLJ_LEFT: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::BroadcastNestedLoop, Some(BuildSide::Left));
    const BNLJ_RIGHT: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::BroadcastNestedLoop, Some(BuildSide::Right));
    const CARTESIAN: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::Cartesian, None);

    const NO_THRESHOLD: &[(&str, &str)] = &[("spark.sql.autoBroadcastJoinThreshold", "-1")];
    const THRESHOLD_1MB: &[(&str, &str)] = &[("spark.sql.autoBroadcastJoinThreshold", "1MB")];
    /// `spark.sql.join.preferSortMergeJoin` off, the broadcast threshold 1 MiB: a side may build a
    /// local hash map under 1 MiB × 200 shuffle partitions.
    const PREFER_HASH: &[(&str, &str)] =
        &[("spark.sql.join.preferSortMergeJoin", "false"), ("spark.sql.autoBroadcastJoinThreshold", "1MB")];

    struct Case {
        name: &'static str,
        join_type: JoinType,
        has_keys: bool,
        /// Each side's estimated size and hints.
        left: (u128, &'static [JoinHint]),
        right: (u128, &'static [JoinHint]),
        settings: &'static [(&'static str, &'static str)],
        expected: (JoinStrategy, Option<BuildSide>),
    }

    const fn equi(
        name: &'static str,
        join_type: JoinType,
        left: (u128, &'static [JoinHint]),
        right: (u128, &'static [JoinHint]),
        settings: &'static [(&'static str, &'static str)],
        expected: (JoinStrategy, Option<BuildSide>),
    ) -> Case {
        Case { name, join_type, has_keys: true, left, right, settings, expected }
    }

    const fn non_equi(
        name: &'static str,
        join_type: JoinType,
        left: (u128, &'static [JoinHint]),
        right: (u128, &'static [JoinHint]),
        settings: &'static [(&'static str, &'static str)],
        expected: (JoinStrategy, Option<BuildSide>),
    ) -> Case {
        Case { name, join_type, has_keys: false, left, right, settings, expected }
    }

    /// Spark's `JoinSelection` strategy and `JoinSelectionHelperSuite`: with equi-join keys, hints
    /// first (broadcast, merge, shuffle hash), then broadcast by size
    /// (`spark.sql.autoBroadcastJoinThreshold`), shuffled hash by size when
    /// `spark.sql.join.preferSortMergeJoin` is off, else sort-merge; without keys a broadcast
    /// nested loop join (by hint or size), a cartesian product (by the shuffle-replicate hint, or
    /// for an inner join), else a broadcast nested loop join. The build side is the smaller of the
    /// sides allowed, the right on a tie.
    const CASES: &[Case] = &[
        equi("right side under the threshold", JoinType::Inner, (100 * MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("left side under the threshold", JoinType::Inner, (MB, &[]), (100 * MB, &[]), &[], BHJ_LEFT),
        equi("both under the threshold: the smaller", JoinType::Inner, (MB, &[]), (2 * MB, &[]), &[], BHJ_LEFT),
        equi("both under the threshold, equal: the right", JoinType::Inner, (MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("exactly the threshold is broadcast", JoinType::Inner, (100 * MB, &[]), (10 * MB, &[]), &[], BHJ_RIGHT),
        equi("a byte over the threshold is not", JoinType::Inner, (100 * MB, &[]), (10 * MB + 1, &[]), &[], SMJ),
        equi("threshold -1: nothing by size", JoinType::Inner, (100 * MB, &[]), (1, &[]), NO_THRESHOLD, SMJ),
        equi(
            "threshold -1, BROADCAST hint",
            JoinType::Inner,
            (100 * MB, &[]),
            (1, &[Broadcast]),
            NO_THRESHOLD,
            BHJ_RIGHT,
        ),
        equi("left outer: the left is never built", JoinType::Left, (MB, &[]), (100 * MB, &[]), &[], SMJ),
        equi("left outer: the right is built", JoinType::Left, (100 * MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("right outer: the right is never built", JoinType::Right, (100 * MB, &[]), (MB, &[]), &[], SMJ),
        equi("right outer: the left is built", JoinType::Right, (MB, &[]), (100 * MB, &[]), &[], BHJ_LEFT),
        equi("full outer: no side is broadcast", JoinType::Full, (MB, &[]), (MB, &[]), &[], SMJ),
        equi("left semi: the left is never built", JoinType::LeftSemi, (MB, &[]), (100 * MB, &[]), &[], SMJ),
        equi("left semi: the right is built", JoinType::LeftSemi, (100 * MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("left anti: the right is built", JoinType::LeftAnti, (100 * MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("left anti: the left is never built", JoinType::LeftAnti, (MB, &[]), (100 * MB, &[]), &[], SMJ),
        equi("existence join: the right is built", JoinType::LeftMark, (100 * MB, &[]), (MB, &[]), &[], BHJ_RIGHT),
        equi("BROADCAST beats size", JoinType::Inner, (100 * MB, &[Broadcast]), (MB, &[]), &[], BHJ_LEFT),
        equi(
            "BROADCAST on both: the smaller",
            JoinType::Inner,
            (200 * MB, &[Broadcast]),
            (100 * MB, &[Broadcast]),
            &[],
            BHJ_RIGHT,
        ),
        equi(
            "BROADCAST on a side the join type cannot build is ignored",
            JoinType::Left,
            (100 * MB, &[Broadcast]),
            (100 * MB, &[]),
            &[],
            SMJ,
        ),
        equi("MERGE beats size", JoinType::Inner, (100 * MB, &[ShuffleMerge]), (MB, &[]), &[], SMJ),
        equi("BROADCAST beats MERGE", JoinType::Inner, (100 * MB, &[ShuffleMerge]), (MB, &[Broadcast]), &[], BHJ_RIGHT),
        equi("SHUFFLE_HASH", JoinType::Inner, (100 * MB, &[]), (100 * MB, &[ShuffleHash]), &[], SHJ_RIGHT),
        equi("MERGE beats SHUFFLE_HASH", JoinType::Inner, (100 * MB, &[ShuffleMerge]), (MB, &[ShuffleHash]), &[], SMJ),
        equi("SHUFFLE_HASH beats size", JoinType::Inner, (MB, &[]), (2 * MB, &[ShuffleHash]), &[], SHJ_RIGHT),
        equi(
            "SHUFFLE_HASH on a left semi join's left is ignored",
            JoinType::LeftSemi,
            (100 * MB, &[ShuffleHash]),
            (100 * MB, &[]),
            &[],
            SMJ,
        ),
        equi(
            "preferSortMergeJoin off: a much smaller side",
            JoinType::Inner,
            (100 * MB, &[]),
            (10 * MB, &[]),
            PREFER_HASH,
            SHJ_RIGHT,
        ),
        equi(
            "preferSortMergeJoin on (the default)",
            JoinType::Inner,
            (100 * MB, &[]),
            (10 * MB, &[]),
            THRESHOLD_1MB,
            SMJ,
        ),
        equi(
            "preferSortMergeJoin off: not three times smaller",
            JoinType::Inner,
            (100 * MB, &[]),
            (50 * MB, &[]),
            PREFER_HASH,
            SMJ,
        ),
        equi(
            "preferSortMergeJoin off: too large for a local hash map",
            JoinType::Inner,
            (1000 * MB, &[]),
            (200 * MB, &[]),
            PREFER_HASH,
            SMJ,
        ),
        equi(
            "preferSortMergeJoin off: a full outer join builds its smaller side",
            JoinType::Full,
            (100 * MB, &[]),
            (10 * MB, &[]),
            PREFER_HASH,
            SHJ_RIGHT,
        ),
        equi(
            "adaptive execution's PREFER_SHUFFLE_HASH",
            JoinType::Inner,
            (100 * MB, &[]),
            (100 * MB, &[PreferShuffleHash]),
            &[],
            SHJ_RIGHT,
        ),
        equi(
            "adaptive execution's NO_BROADCAST_HASH",
            JoinType::Inner,
            (100 * MB, &[]),
            (MB, &[NoBroadcastHash]),
            &[],
            SMJ,
        ),
        non_equi(
            "no keys, inner: broadcast the small side",
            JoinType::Inner,
            (100 * MB, &[]),
            (MB, &[]),
            &[],
            BNLJ_RIGHT,
        ),
        non_equi(
            "no keys, inner, both large: cartesian product",
            JoinType::Inner,
            (100 * MB, &[]),
            (100 * MB, &[]),
            &[],
            CARTESIAN,
        ),
        non_equi("no keys, BROADCAST beats size", JoinType::Inner, (100 * MB, &[Broadcast]), (MB, &[]), &[], BNLJ_LEFT),
        non_equi(
            "no keys, SHUFFLE_REPLICATE_NL beats size",
            JoinType::Inner,
            (100 * MB, &[]),
            (MB, &[ShuffleReplicateNl]),
            &[],
            CARTESIAN,
        ),
        non_equi(
            "no keys, left outer, both large: the right",
            JoinType::Left,
            (100 * MB, &[]),
            (100 * MB, &[]),
            &[],
            BNLJ_RIGHT,
        ),
        non_equi(
            "no keys, right outer, both large: the left",
            JoinType::Right,
            (100 * MB, &[]),
            (100 * MB, &[]),
            &[],
            BNLJ_LEFT,
        ),
        non_equi("no keys, left outer, the right small", JoinType::Left, (100 * MB, &[]), (MB, &[]), &[], BNLJ_RIGHT),
        non_equi(
            "no keys, left semi, both large: the right",
            JoinType::LeftSemi,
            (100 * MB, &[]),
            (100 * MB, &[]),
            &[],
            BNLJ_RIGHT,
        ),
        non_equi(
            "no keys, full outer, the right smaller",
            JoinType::Full,
            (100 * MB, &[]),
            (50 * MB, &[]),
            &[],
            BNLJ_RIGHT,
        ),
    ];

    #[test]
    fn strategies_are_chosen_as_spark_chooses_them() {
        for case in CASES {
            let conf = conf(case.settings);
            let facts = |(size, hints): (u128, &[JoinHint])| SideFacts {
                size,
                broadcast_threshold: conf.auto_broadcast_join_threshold,
                hints: hints.iter().copied().collect(),
            };
            let chosen = choose_strategy(case.join_type, case.has_keys, &facts(case.left), &facts(case.right), &conf);
            assert_eq!(chosen, case.expected, "{}", case.name);
        }
    }

    /// DataFusion's hash join of `tx` (`tx_bytes` large) and `acc` (`acc_bytes`) on `account_id`.
    fn hash_join(join_type: JoinType, tx_bytes: u64, acc_bytes: u64) -> Plan {
        let left = scan(sized(table("tx", TX, None, &[]), tx_bytes));
        let right = scan(sized(table("acc", ACC, None, &[]), acc_bytes));
        let on = vec![(column(&left, "account_id"), column(&right, "account_id"))];
        let mode = PartitionMode::Auto;
        let join = HashJoinExec::try_new(
            left,
            right,
            on,
            None,
            &join_type,
            None,
            mode,
            NullEquality::NullEqualsNothing,
            false,
        );
        Arc::new(join.unwrap())
    }

    fn hints(sql: &str) -> QueryHints {
        let statement = Parser::parse_sql(&GenericDialect, sql).unwrap().remove(0);
        QueryHints::resolve(&statement, &LogicalPlanBuilder::empty(false).build().unwrap())
    }

    type Selected = (JoinStrategy, Option<BuildSide>, JoinType, String, String);

    /// The join `join_selection` makes of `plan`: strategy, build side, join type, and each side
    /// as its exchanges and the table it reads.
    fn selected(plan: Plan, hints: &QueryHints) -> Selected {
        let planned = join_selection(plan, &conf(&[]), hints).unwrap();
        let join = planned.downcast_ref::<SparkJoinExec>().expect("a join");
        let spec = join.spec();
        let table = |side: &Plan| scans(side).first().map(|s| s.table().name.clone()).unwrap_or_default();
        let side = |side: &Plan| format!("{} {}", movement(side), table(side)).trim().to_string();
        (spec.strategy, spec.build_side, spec.join_type, side(join.left()), side(join.right()))
    }

    fn expect(strategy: JoinStrategy, build: Option<BuildSide>, join_type: JoinType, sides: (&str, &str)) -> Selected {
        (strategy, build, join_type, sides.0.to_string(), sides.1.to_string())
    }

    #[test]
    fn the_small_side_is_broadcast_from_its_table_size() {
        let plan = hash_join(JoinType::Inner, 100 << 20, 1 << 20);
        let expected =
            expect(JoinStrategy::BroadcastHash, Some(BuildSide::Right), JoinType::Inner, ("tx", "broadcast acc"));
        assert_eq!(selected(plan, &QueryHints::default()), expected);
    }

    #[test]
    fn a_hint_names_the_table_it_applies_to() {
        let plan = hash_join(JoinType::Inner, 100 << 20, 1 << 20);
        let expected =
            expect(JoinStrategy::BroadcastHash, Some(BuildSide::Left), JoinType::Inner, ("broadcast tx", "acc"));
        assert_eq!(selected(plan, &hints("SELECT /*+ BROADCAST(default.tx) */ 1")), expected);
        let plan = hash_join(JoinType::Inner, 1 << 20, 1 << 20);
        let expected = expect(JoinStrategy::SortMerge, None, JoinType::Inner, ("tx", "acc"));
        assert_eq!(selected(plan, &hints("SELECT /*+ MERGE(default.acc) */ 1")), expected);
    }

    #[test]
    fn right_semi_joins_are_left_semi_joins_with_sides_swapped() {
        // `tx RIGHT SEMI JOIN acc` is Spark's `acc LEFT SEMI JOIN tx`, which may build only tx.
        let plan = hash_join(JoinType::RightSemi, 1 << 20, 100 << 20);
        let expected =
            expect(JoinStrategy::BroadcastHash, Some(BuildSide::Right), JoinType::LeftSemi, ("acc", "broadcast tx"));
        assert_eq!(selected(plan, &QueryHints::default()), expected);
        let plan = hash_join(JoinType::RightSemi, 100 << 20, 1 << 20);
        let expected = expect(JoinStrategy::SortMerge, None, JoinType::LeftSemi, ("acc", "tx"));
        assert_eq!(selected(plan, &QueryHints::default()), expected);
    }
}

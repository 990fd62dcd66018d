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
    let spec = JoinSpec { strategy, build_side, join_type, on, filter, null_equality, null_aware, skew: false };
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
        } else if let Some(side) = broadcast_by_size {
            (JoinStrategy::BroadcastHash, Some(side))
        } else if let Some(side) = hash_by_size {
            (JoinStrategy::ShuffledHash, Some(side))
        } else {
            (JoinStrategy::SortMerge, None)
        }
    } else {
        let replicate = hinted(JoinHint::ShuffleReplicateNl, BuildSide::Left)
            || hinted(JoinHint::ShuffleReplicateNl, BuildSide::Right);
        if let Some(side) = broadcast_hinted {
            (JoinStrategy::BroadcastNestedLoop, Some(side))
        } else if replicate && inner_like {
            (JoinStrategy::Cartesian, None)
        } else if let Some(side) = broadcast_by_size {
            (JoinStrategy::BroadcastNestedLoop, Some(side))
        } else if inner_like {
            (JoinStrategy::Cartesian, None)
        } else {
            let side =
                pick(can_broadcast(BuildSide::Left, jt), can_broadcast(BuildSide::Right, jt), left_size, right_size)
                    .unwrap_or(BuildSide::Right);
            (JoinStrategy::BroadcastNestedLoop, Some(side))
        }
    }
}

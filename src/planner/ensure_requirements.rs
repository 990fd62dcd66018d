//! Spark 3.3+/4.x `EnsureRequirements` (`execution/exchange/EnsureRequirements.scala`):
//! inserts the exchanges and sorts operators need, bottom-up.
//!
//! 0. A union of children hash-partitioned alike reports that partitioning, as Spark's
//!    `UnionExec` does (`union_output_partitioning`), before its parent is judged. A shuffled
//!    join's keys take the order of a child's partitioning when they are its keys
//!    in another order (`reorderJoinKeys`, in `reorder_join_keys`).
//! 1. A child whose partitioning does not satisfy its required distribution is shuffled:
//!    `hashpartitioning(keys, spark.sql.shuffle.partitions)` for a clustered requirement,
//!    `SinglePartition` for all tuples.
//! 2. Children of a join must also be co-partitioned. Each child's partitioning becomes a
//!    shuffle spec; the best spec is the one with the most partitions among those that can
//!    create a partitioning for the others, preferring children that are not shuffles (so a
//!    bucketed side keeps its buckets and the other side is shuffled to its bucket count,
//!    whatever `spark.sql.shuffle.partitions` says); every child incompatible with it is
//!    re-shuffled to match it. An existing shuffle is replaced, not stacked.
//! 3. A child whose ordering does not satisfy the required ordering (sort-merge join keys
//!    ascending, nulls first; window and other DataFusion requirements) gets a partition-local
//!    `Sort`.
//!
//! 4. A global sort (`ORDER BY` without `LIMIT`) over several partitions range-partitions its
//!    input (`rangepartitioning(order, spark.sql.shuffle.partitions)`) and sorts each range.

use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::arrow::compute::SortOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr, physical_exprs_equal};
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning, replace_children_if_necessary};

use super::distribution::{SparkDistribution, is_single_partition, required_distributions, satisfies};
use super::reorder_join_keys::reorder_join_keys;
use super::scan_lineage::{describe_keys, describe_side};
use super::union_output_partitioning::keep_shared_partitioning;
use crate::config::SparkConf;
use crate::exec::collect_in_order::CollectInOrderExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::JoinStrategy;
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};

pub fn ensure_requirements(plan: Arc<dyn ExecutionPlan>, conf: &SparkConf) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| ensure(node, conf)).map(|t| t.data)
}

fn ensure(node: Arc<dyn ExecutionPlan>, conf: &SparkConf) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    if let Some(sorted) = global_sort(&node, conf) {
        return Ok(Transformed::yes(sorted));
    }
    let shared = keep_shared_partitioning(Arc::clone(&node), conf.union_output_partitioning)?;
    if !Arc::ptr_eq(&shared, &node) {
        return Ok(Transformed::yes(shared));
    }
    let reordered = node.downcast_ref::<SparkJoinExec>().map(reorder_join_keys).transpose()?.flatten();
    let keys_reordered = reordered.is_some();
    let node = reordered.unwrap_or(node);
    let mut children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
    let required = required_distributions(node.as_ref());
    if children.is_empty() || required.len() != children.len() {
        return Ok(Transformed::new_transformed(node, keys_reordered));
    }
    let original = children.clone();

    for (child, distribution) in children.iter_mut().zip(&required) {
        match distribution {
            SparkDistribution::AllTuples if !is_single_partition(child.as_ref()) => {
                let reason = format!("{} needs all rows in one partition", node.name());
                *child =
                    Arc::new(ShuffleExchangeExec::new(Arc::clone(child), ExchangePartitioning::Single, Some(reason)));
            }
            SparkDistribution::Clustered(keys)
                if !satisfies(child.as_ref(), distribution, conf.require_all_cluster_keys_for_distribution) =>
            {
                let n = conf.shuffle_partitions;
                let reason = format!(
                    "{} is not partitioned by {}: shuffled into {n} partitions (spark.sql.shuffle.partitions)",
                    describe_side(child),
                    describe_keys(keys)
                );
                let partitioning = ExchangePartitioning::Hash(keys.clone(), n);
                *child = Arc::new(ShuffleExchangeExec::new(Arc::clone(child), partitioning, Some(reason)));
            }
            _ => {}
        }
    }

    let clustered: Vec<usize> = required
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d, SparkDistribution::Clustered(_)))
        .map(|(i, _)| i)
        .collect();
    if clustered.len() >= 2 {
        co_partition(&mut children, &required, &clustered, conf);
    }

    let spark_orders = node.downcast_ref::<SparkJoinExec>().is_some();
    for (index, child) in children.iter_mut().enumerate() {
        if let Some(ordering) = required_ordering(node.as_ref(), index)
            && !if spark_orders {
                ordering_satisfied(child.as_ref(), &ordering)
            } else {
                child.equivalence_properties().ordering_satisfy(ordering.clone())?
            }
        {
            *child = Arc::new(SortExec::new(ordering, Arc::clone(child)).with_preserve_partitioning(true));
        }
    }

    let changed = children.iter().zip(&original).any(|(a, b)| !Arc::ptr_eq(a, b));
    if changed || keys_reordered {
        Ok(Transformed::yes(replace_children_if_necessary(node, children)?))
    } else {
        Ok(Transformed::no(node))
    }
}

/// A global sort over several partitions: Spark's `OrderedDistribution`, met by
/// `rangepartitioning(order, spark.sql.shuffle.partitions)` and a sort of each partition, whose
/// partitions are then read in order. A top-k (ORDER BY … LIMIT) sorts each partition and
/// merges the sorted streams, where Spark takes the top rows of each partition
/// (`TakeOrderedAndProject`).
fn global_sort(node: &Arc<dyn ExecutionPlan>, conf: &SparkConf) -> Option<Arc<dyn ExecutionPlan>> {
    let sort = node.downcast_ref::<SortExec>()?;
    if sort.preserve_partitioning() || is_single_partition(sort.input().as_ref()) {
        return None;
    }
    let order = sort.expr().clone();
    if sort.fetch().is_some() {
        let local = SortExec::new(order.clone(), Arc::clone(sort.input())).with_preserve_partitioning(true);
        return Some(Arc::new(
            SortPreservingMergeExec::new(order, Arc::new(local.with_fetch(sort.fetch()))).with_fetch(sort.fetch()),
        ));
    }
    let n = conf.shuffle_partitions;
    let reason = format!(
        "a global sort needs its rows in ranges of {}: range-partitioned into {n} partitions (spark.sql.shuffle.partitions)",
        describe_keys(&order.iter().map(|e| Arc::clone(&e.expr)).collect::<Vec<_>>())
    );
    let partitioning = ExchangePartitioning::Range(order.clone(), n);
    let ranges = Arc::new(ShuffleExchangeExec::new(Arc::clone(sort.input()), partitioning, Some(reason)));
    let local = SortExec::new(order, ranges).with_preserve_partitioning(true);
    Some(Arc::new(CollectInOrderExec::new(Arc::new(local))))
}

/// The ordering child `index` of `node` must have: sort-merge join keys ascending with nulls
/// first (Spark's `SortOrder` default), or what a DataFusion operator asks for.
pub(crate) fn required_ordering(node: &dyn ExecutionPlan, index: usize) -> Option<LexOrdering> {
    if let Some(join) = node.downcast_ref::<SparkJoinExec>() {
        if join.spec().strategy != JoinStrategy::SortMerge {
            return None;
        }
        let keys = if index == 0 { join.left_keys() } else { join.right_keys() };
        return LexOrdering::new(keys.into_iter().map(|k| PhysicalSortExpr::new(k, SortOptions::new(false, true))));
    }
    let requirement = node.required_input_ordering().into_iter().nth(index)??.into_single();
    LexOrdering::new(requirement.into_iter().map(|r| PhysicalSortExpr::new(r.expr, r.options.unwrap_or_default())))
}

/// Spark's `SortOrder.orderingSatisfies`, for the orderings Spark's own operators require: one of
/// the orderings the child's operators declare begins with the required one, expressions compared
/// up to equality (join keys, aliases). DataFusion's `ordering_satisfy` also counts a column a
/// filter pins to one value as ordered; Spark does not, so the Sort under a join over one
/// selected bucket stays. What a DataFusion operator asks for is judged as it judges it.
fn ordering_satisfied(child: &dyn ExecutionPlan, required: &LexOrdering) -> bool {
    let properties = child.equivalence_properties();
    let normalize = |e: &PhysicalSortExpr| (properties.eq_group().normalize_expr(Arc::clone(&e.expr)), e.options);
    properties.oeq_class().iter().any(|ordering| {
        ordering.len() >= required.len()
            && ordering.iter().zip(required.iter()).all(|(a, b)| normalize(a) == normalize(b))
    })
}

/// A child's partitioning as Spark's `ShuffleSpec`.
struct ShuffleSpec {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    partitions: usize,
    clustering: Vec<Arc<dyn PhysicalExpr>>,
}

impl ShuffleSpec {
    fn of(partitioning: &Partitioning, clustering: &[Arc<dyn PhysicalExpr>]) -> Self {
        let exprs = match partitioning {
            Partitioning::Hash(exprs, _) => exprs.clone(),
            _ => Vec::new(),
        };
        ShuffleSpec { exprs, partitions: partitioning.partition_count(), clustering: clustering.to_vec() }
    }

    /// `HashShuffleSpec.canCreatePartitioning`; a single partition cannot.
    fn can_create_partitioning(&self, conf: &SparkConf) -> bool {
        !self.exprs.is_empty()
            && (!conf.require_all_cluster_keys_for_co_partition || physical_exprs_equal(&self.exprs, &self.clustering))
    }

    /// Positions of `expr` among the clustering keys.
    fn key_positions(&self, expr: &Arc<dyn PhysicalExpr>) -> Vec<usize> {
        self.clustering.iter().enumerate().filter(|(_, k)| k.eq(&expr)).map(|(i, _)| i).collect()
    }

    /// `HashShuffleSpec.isCompatibleWith`.
    fn is_compatible_with(&self, other: &ShuffleSpec) -> bool {
        if self.partitions == 1 || other.partitions == 1 {
            return self.partitions == other.partitions;
        }
        self.clustering.len() == other.clustering.len()
            && self.partitions == other.partitions
            && self.exprs.len() == other.exprs.len()
            && self.exprs.iter().zip(&other.exprs).all(|(a, b)| {
                let theirs = other.key_positions(b);
                self.key_positions(a).iter().any(|p| theirs.contains(p))
            })
    }

    /// `HashShuffleSpec.createPartitioning`: this spec's hash keys, mapped by position onto
    /// another child's clustering keys.
    fn create_partitioning(&self, clustering: &[Arc<dyn PhysicalExpr>]) -> Vec<Arc<dyn PhysicalExpr>> {
        self.exprs.iter().filter_map(|e| self.key_positions(e).first().map(|p| Arc::clone(&clustering[*p]))).collect()
    }
}

fn co_partition(
    children: &mut [Arc<dyn ExecutionPlan>],
    required: &[SparkDistribution],
    clustered: &[usize],
    conf: &SparkConf,
) {
    let clustering = |i: usize| match &required[i] {
        SparkDistribution::Clustered(keys) => keys.clone(),
        _ => Vec::new(),
    };
    let specs: Vec<(usize, ShuffleSpec)> =
        clustered.iter().map(|&i| (i, ShuffleSpec::of(children[i].output_partitioning(), &clustering(i)))).collect();
    if specs.iter().all(|(_, s)| s.partitions == 1) {
        return;
    }
    let is_shuffle = |i: usize| children[i].downcast_ref::<ShuffleExchangeExec>().is_some();
    let consider_min_parallelism = specs.iter().all(|(i, s)| !s.can_create_partitioning(conf) || is_shuffle(*i));
    let candidates: Vec<&(usize, ShuffleSpec)> = specs
        .iter()
        .filter(|(_, s)| {
            s.can_create_partitioning(conf) && (!consider_min_parallelism || s.partitions >= conf.shuffle_partitions)
        })
        .collect();
    fn most_partitions(pool: Vec<&(usize, ShuffleSpec)>) -> Option<&(usize, ShuffleSpec)> {
        pool.into_iter().fold(None, |best, c| match best {
            Some(b) if b.1.partitions >= c.1.partitions => Some(b),
            _ => Some(c),
        })
    }
    let not_shuffled: Vec<_> = candidates.iter().copied().filter(|(i, _)| !is_shuffle(*i)).collect();
    let best = if not_shuffled.is_empty() { most_partitions(candidates) } else { most_partitions(not_shuffled) };

    let mut replacements = Vec::new();
    for (index, spec) in &specs {
        if best.is_some_and(|(_, b)| b.is_compatible_with(spec)) {
            continue;
        }
        let (exprs, partitions) = match best {
            Some((_, b)) => (b.create_partitioning(&clustering(*index)), b.partitions),
            None => (clustering(*index), conf.shuffle_partitions),
        };
        let input = match children[*index].downcast_ref::<ShuffleExchangeExec>() {
            Some(exchange) => Arc::clone(exchange.input()),
            None => Arc::clone(&children[*index]),
        };
        let reason = match best {
            Some((best_index, b)) => {
                let why = if is_shuffle(*index) {
                    format!("{} is not partitioned by the join keys", describe_side(&input))
                } else {
                    format!("{} has {} partitions{}", describe_side(&input), spec.partitions, mismatch_detail(spec, b))
                };
                format!("{why}: shuffled into {partitions} to match {}", describe_side(&children[*best_index]))
            }
            None => format!(
                "neither side can keep its partitioning: {} shuffled into {partitions} partitions (spark.sql.shuffle.partitions)",
                describe_side(&input)
            ),
        };
        replacements.push((
            *index,
            Arc::new(ShuffleExchangeExec::new(input, ExchangePartitioning::Hash(exprs, partitions), Some(reason))),
        ));
    }
    for (index, replacement) in replacements {
        children[index] = replacement;
    }
}

/// Why two bucketed sides could not be joined bucket to bucket.
fn mismatch_detail(spec: &ShuffleSpec, best: &ShuffleSpec) -> String {
    if spec.exprs.is_empty() || spec.partitions == best.partitions {
        return String::new();
    }
    let (a, b) = (spec.partitions.max(best.partitions), spec.partitions.min(best.partitions));
    if a % b == 0 {
        format!(
            " (bucket counts {} and {} divide: spark.sql.bucketing.coalesceBucketsInJoin.enabled=true would coalesce instead)",
            best.partitions, spec.partitions
        )
    } else {
        format!(" (bucket counts {} and {}: neither divides the other)", best.partitions, spec.partitions)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::common::JoinType;
    use datafusion::physical_plan::aggregates::AggregateMode;
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;

    use super::*;
    use crate::exec::broadcast_exchange::BroadcastExchangeExec;
    use crate::exec::join_spec::BuildSide;
    use crate::planner::test_fixtures::*;

    /// A join or aggregate input as a test case gives it.
    #[derive(Clone, Copy)]
    enum Side {
        /// A scan of a table bucketed by these columns into this many buckets.
        Bucketed(u32, &'static [&'static str]),
        /// A scan of a table without buckets, read in two partitions.
        Plain,
        /// `Plain` under a hash exchange on these columns into this many partitions, as a rule
        /// before left it.
        Shuffled(&'static [&'static str], usize),
        /// `Plain` gathered into one partition (Spark's `SinglePartition`).
        Single,
        /// A scan of one small file without buckets: one split, yet Spark's
        /// `UnknownPartitioning(0)`, not a single partition.
        OneSplit,
        /// A broadcast hash join streaming this side, with a one-split scan broadcast: it
        /// partitions its rows as the streamed side does.
        BroadcastJoined(&'static Side),
    }

    impl Side {
        fn build(self, name: &str) -> Plan {
            match self {
                Side::Bucketed(n, columns) => scan(table_of(name, ABC, Some((n, columns)), 1, &[])),
                Side::Plain => scan(table_of(name, ABC, None, 4, &[])),
                Side::Shuffled(keys, n) => exchange(Side::Plain.build(name), keys, n),
                Side::Single => Arc::new(CoalescePartitionsExec::new(Side::Plain.build(name))),
                Side::OneSplit => scan(table_of(name, ABC, None, 1, &[])),
                Side::BroadcastJoined(streamed) => {
                    let (left, broadcast) = (streamed.build(name), Side::OneSplit.build("broadcast"));
                    let right: Plan =
                        Arc::new(BroadcastExchangeExec::new(Arc::clone(&broadcast), columns(&broadcast, &["a"])));
                    let keys = (column(&left, "a"), column(&right, "a"));
                    join(JoinStrategy::BroadcastHash, Some(BuildSide::Right), left, right, keys)
                }
            }
        }
    }

    const PARTITIONS_10: &[(&str, &str)] = &[("spark.sql.shuffle.partitions", "10")];
    const PARTITIONS_20: &[(&str, &str)] = &[("spark.sql.shuffle.partitions", "20")];
    const SUBSET_KEYS: &[(&str, &str)] = &[("spark.sql.requireAllClusterKeysForCoPartition", "false")];

    struct JoinCase {
        name: &'static str,
        strategy: JoinStrategy,
        left: Side,
        right: Side,
        /// The join keys of each side, pairwise.
        keys: (&'static [&'static str], &'static [&'static str]),
        settings: &'static [(&'static str, &'static str)],
        /// The exchanges each side gets, as `movement` describes them.
        expected: (&'static str, &'static str),
    }

    /// Spark's `EnsureRequirementsSuite` (co-partitioning by `ShuffleSpec`) and
    /// `BucketedReadSuite` (which side of a bucketed join is shuffled).
    const JOINS: &[JoinCase] = &[
        JoinCase {
            name: "both sides bucketed alike on the keys: no exchange",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Bucketed(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("", ""),
        },
        JoinCase {
            name: "bucket counts differ: the side with fewer buckets is shuffled to the larger count",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Bucketed(4, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("", "hash(a) 8"),
        },
        JoinCase {
            name: "bucket counts differ, the larger on the right",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(4, &["a"]),
            right: Side::Bucketed(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("hash(a) 8", ""),
        },
        JoinCase {
            name: "bucket counts 6 and 5 under 10 shuffle partitions: the 5 side is shuffled to 6",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(6, &["a"]),
            right: Side::Bucketed(5, &["a"]),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("", "hash(a) 6"),
        },
        JoinCase {
            name: "bucket counts 16 and 4 over 10 shuffle partitions: the 4 side is shuffled to 16",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(16, &["a"]),
            right: Side::Bucketed(4, &["a"]),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("", "hash(a) 16"),
        },
        JoinCase {
            name: "an unbucketed side is shuffled to the bucket count, not spark.sql.shuffle.partitions",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Plain,
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("", "hash(a) 8"),
        },
        JoinCase {
            name: "both sides unbucketed: both shuffled into spark.sql.shuffle.partitions",
            strategy: JoinStrategy::SortMerge,
            left: Side::Plain,
            right: Side::Plain,
            keys: (&["a"], &["b"]),
            settings: &[],
            expected: ("hash(a) 200", "hash(b) 200"),
        },
        JoinCase {
            name: "both sides unbucketed, 10 shuffle partitions",
            strategy: JoinStrategy::SortMerge,
            left: Side::Plain,
            right: Side::Plain,
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("hash(a) 10", "hash(a) 10"),
        },
        JoinCase {
            name: "a side bucketed on another column is shuffled, to the other side's bucket count",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["b"]),
            right: Side::Bucketed(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("hash(a) 8", ""),
        },
        JoinCase {
            name: "both sides bucketed on other columns: both shuffled into spark.sql.shuffle.partitions",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(7, &["b"]),
            right: Side::Bucketed(6, &["b"]),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("hash(a) 10", "hash(a) 10"),
        },
        JoinCase {
            name: "join keys a superset of the bucket keys: both shuffled on all keys \
                   (spark.sql.requireAllClusterKeysForCoPartition)",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Bucketed(8, &["a"]),
            keys: (&["a", "b"], &["a", "b"]),
            settings: &[],
            expected: ("hash(a, b) 200", "hash(a, b) 200"),
        },
        JoinCase {
            name: "join keys a superset of the bucket keys, all keys not required: no exchange",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Bucketed(8, &["a"]),
            keys: (&["a", "b"], &["a", "b"]),
            settings: SUBSET_KEYS,
            expected: ("", ""),
        },
        JoinCase {
            name: "bucket keys at different key positions: the left spec wins the tie, the right is \
                   shuffled on the key at the left's position",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(5, &["a"]),
            right: Side::Bucketed(5, &["b"]),
            keys: (&["a", "b"], &["a", "b"]),
            settings: SUBSET_KEYS,
            expected: ("", "hash(a) 5"),
        },
        JoinCase {
            name: "bucket keys at different key positions: the side with more partitions wins",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(5, &["a"]),
            right: Side::Bucketed(10, &["b"]),
            keys: (&["a", "b"], &["a", "b"]),
            settings: SUBSET_KEYS,
            expected: ("hash(b) 10", ""),
        },
        JoinCase {
            name: "join keys the bucket keys in another order: the keys are reordered, no exchange",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(8, &["a", "b"]),
            right: Side::Bucketed(8, &["a", "b"]),
            keys: (&["b", "a"], &["b", "a"]),
            settings: &[],
            expected: ("", ""),
        },
        JoinCase {
            name: "an exchange of 7 beside 6 buckets is replaced by one of 6, not stacked",
            strategy: JoinStrategy::SortMerge,
            left: Side::Shuffled(&["a"], 7),
            right: Side::Bucketed(6, &["a"]),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("hash(a) 6", ""),
        },
        JoinCase {
            name: "exchanges of 7 and 6, both under spark.sql.shuffle.partitions: both redone with it",
            strategy: JoinStrategy::SortMerge,
            left: Side::Shuffled(&["a"], 7),
            right: Side::Shuffled(&["a"], 6),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("hash(a) 10", "hash(a) 10"),
        },
        JoinCase {
            name: "a single partition beside 5 buckets is shuffled to 5",
            strategy: JoinStrategy::SortMerge,
            left: Side::Single,
            right: Side::Bucketed(5, &["a"]),
            keys: (&["a"], &["a"]),
            settings: PARTITIONS_10,
            expected: ("hash(a) 5", ""),
        },
        JoinCase {
            name: "a single partition beside 10 buckets under 20 shuffle partitions: shuffled to 10",
            strategy: JoinStrategy::SortMerge,
            left: Side::Bucketed(10, &["a"]),
            right: Side::Single,
            keys: (&["a"], &["c"]),
            settings: PARTITIONS_20,
            expected: ("", "hash(c) 10"),
        },
        JoinCase {
            name: "a single partition beside an exchange of 10 under 20 shuffle partitions: both into 20",
            strategy: JoinStrategy::SortMerge,
            left: Side::Shuffled(&["a"], 10),
            right: Side::Single,
            keys: (&["a"], &["c"]),
            settings: PARTITIONS_20,
            expected: ("hash(a) 20", "hash(c) 20"),
        },
        JoinCase {
            name: "both sides a single partition: no exchange",
            strategy: JoinStrategy::SortMerge,
            left: Side::Single,
            right: Side::Single,
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("", ""),
        },
        JoinCase {
            name: "a shuffled hash join co-partitions as a sort-merge join does, without sorts",
            strategy: JoinStrategy::ShuffledHash,
            left: Side::Bucketed(8, &["a"]),
            right: Side::Bucketed(4, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("", "hash(a) 8"),
        },
        JoinCase {
            name: "a shuffled hash join of unbucketed sides",
            strategy: JoinStrategy::ShuffledHash,
            left: Side::Plain,
            right: Side::Bucketed(8, &["b"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: ("hash(a) 200", "hash(a) 200"),
        },
    ];

    #[test]
    fn joins_get_the_exchanges_spark_inserts() {
        for case in JOINS {
            let build_side = (case.strategy == JoinStrategy::ShuffledHash).then_some(BuildSide::Right);
            let plan = join_by_name(
                case.strategy,
                build_side,
                JoinType::Inner,
                (case.left.build("l"), case.keys.0),
                (case.right.build("r"), case.keys.1),
            );
            let planned = ensure_requirements(plan, &conf(case.settings)).unwrap();
            let join = planned.downcast_ref::<SparkJoinExec>().expect("a join");
            let sides = (join.left(), join.right());
            assert_eq!((movement(sides.0).as_str(), movement(sides.1).as_str()), case.expected, "{}", case.name);
            let sorted = case.strategy == JoinStrategy::SortMerge;
            assert_eq!((sides.0.is::<SortExec>(), sides.1.is::<SortExec>()), (sorted, sorted), "{}", case.name);
        }
    }

    struct UnaryCase {
        name: &'static str,
        input: Side,
        operator: fn(Plan) -> Plan,
        settings: &'static [(&'static str, &'static str)],
        /// The exchanges the operator's input gets, as `movement` describes them.
        expected: &'static str,
    }

    fn group_by_a(input: Plan) -> Plan {
        aggregate(AggregateMode::FinalPartitioned, input, &["a"])
    }

    fn group_by_b(input: Plan) -> Plan {
        aggregate(AggregateMode::FinalPartitioned, input, &["b"])
    }

    fn group_by_a_b(input: Plan) -> Plan {
        aggregate(AggregateMode::FinalPartitioned, input, &["a", "b"])
    }

    fn global_count(input: Plan) -> Plan {
        aggregate(AggregateMode::Final, input, &[])
    }

    fn partial_by_b(input: Plan) -> Plan {
        aggregate(AggregateMode::Partial, input, &["b"])
    }

    fn order_by_a(input: Plan) -> Plan {
        let ordering = LexOrdering::new([PhysicalSortExpr::new(column(&input, "a"), SortOptions::new(false, true))]);
        Arc::new(SortExec::new(ordering.unwrap(), input))
    }

    fn order_by_a_limit(input: Plan) -> Plan {
        let ordering = LexOrdering::new([PhysicalSortExpr::new(column(&input, "a"), SortOptions::new(false, true))]);
        Arc::new(SortExec::new(ordering.unwrap(), input).with_fetch(Some(10)))
    }

    /// Spark's `EnsureRequirements` for one input: `ClusteredDistribution` of an aggregate's
    /// grouping keys, `AllTuples` of a global aggregate, `OrderedDistribution` of a global sort.
    const UNARY: &[UnaryCase] = &[
        UnaryCase {
            name: "an aggregate on the bucket column of a bucketed scan: no exchange",
            input: Side::Bucketed(8, &["a"]),
            operator: group_by_a,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "an aggregate on another column: shuffled on the grouping key into spark.sql.shuffle.partitions",
            input: Side::Bucketed(8, &["a"]),
            operator: group_by_b,
            settings: &[],
            expected: "hash(b) 200",
        },
        UnaryCase {
            name: "grouping keys a superset of the bucket keys: no exchange",
            input: Side::Bucketed(8, &["a"]),
            operator: group_by_a_b,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "grouping keys a superset of the bucket keys, all keys required: shuffled on all of them",
            input: Side::Bucketed(8, &["a"]),
            operator: group_by_a_b,
            settings: &[("spark.sql.requireAllClusterKeysForDistribution", "true")],
            expected: "hash(a, b) 200",
        },
        UnaryCase {
            name: "an aggregate over an unbucketed scan, 10 shuffle partitions",
            input: Side::Plain,
            operator: group_by_a,
            settings: PARTITIONS_10,
            expected: "hash(a) 10",
        },
        UnaryCase {
            name: "an aggregate over an exchange on its key: nothing more",
            input: Side::Shuffled(&["a"], 7),
            operator: group_by_a,
            settings: &[],
            expected: "hash(a) 7",
        },
        UnaryCase {
            name: "a partial aggregate requires nothing",
            input: Side::Plain,
            operator: partial_by_b,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "a global aggregate gathers every row into one partition (AllTuples)",
            input: Side::Bucketed(8, &["a"]),
            operator: global_count,
            settings: &[],
            expected: "single",
        },
        UnaryCase {
            name: "an aggregate over one split of a file: shuffled all the same, as Spark does",
            input: Side::OneSplit,
            operator: group_by_a,
            settings: &[],
            expected: "hash(a) 200",
        },
        UnaryCase {
            name: "a global aggregate over one split of a file: gathered all the same",
            input: Side::OneSplit,
            operator: global_count,
            settings: &[],
            expected: "single",
        },
        UnaryCase {
            name: "a global sort over one split of a file: range-partitioned all the same",
            input: Side::OneSplit,
            operator: order_by_a,
            settings: &[],
            expected: "range(a) 200",
        },
        UnaryCase {
            name: "an aggregate over a broadcast join streaming one split: shuffled, as Spark does",
            input: Side::BroadcastJoined(&Side::OneSplit),
            operator: group_by_a,
            settings: &[],
            expected: "hash(a) 200",
        },
        UnaryCase {
            name: "a global aggregate over a broadcast join streaming one split: gathered",
            input: Side::BroadcastJoined(&Side::OneSplit),
            operator: global_count,
            settings: &[],
            expected: "single",
        },
        UnaryCase {
            name: "a global aggregate over a broadcast join streaming a single partition: no exchange",
            input: Side::BroadcastJoined(&Side::Single),
            operator: global_count,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "a global aggregate over a single partition: no exchange",
            input: Side::Single,
            operator: global_count,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "a global sort range-partitions its input into spark.sql.shuffle.partitions",
            input: Side::Plain,
            operator: order_by_a,
            settings: &[],
            expected: "range(a) 200",
        },
        UnaryCase {
            name: "a global sort of a single partition: no exchange",
            input: Side::Single,
            operator: order_by_a,
            settings: &[],
            expected: "",
        },
        UnaryCase {
            name: "a sort with a limit takes the top rows of each partition: no exchange",
            input: Side::Plain,
            operator: order_by_a_limit,
            settings: &[],
            expected: "",
        },
    ];

    #[test]
    fn single_inputs_get_the_exchanges_spark_inserts() {
        for case in UNARY {
            let plan = (case.operator)(case.input.build("t"));
            let planned = ensure_requirements(plan, &conf(case.settings)).unwrap();
            assert_eq!(movement(&planned), case.expected, "{}", case.name);
        }
    }
}

//! Spark's `HashAggregateExec` (`hash_aggregate_exec`), which finds the groups of rows that
//! arrive grouped by comparing neighbours, and few groups by their packed keys (`few_groups`),
//! and its tests.

mod few_groups;
mod hash_aggregate_exec;
#[cfg(test)]
mod tests;

pub use hash_aggregate_exec::{
    HashAggregateExec, PARTITIONS_AGGREGATED_IN_FEW_GROUPS, PARTITIONS_AGGREGATED_IN_ORDER, PARTITIONS_HASH_AGGREGATED,
    SHUFFLE_PARTITIONS_AGGREGATED_APART,
};

//! Spark's partitionings of a shuffle, in a file of its own because the operator
//! (`shuffle_exchange_exec`) and its map tasks (`map_output`) both read it.

use std::sync::Arc;

use datafusion::physical_expr::{LexOrdering, PhysicalExpr};

/// How rows are distributed over the output partitions.
#[derive(Debug, Clone)]
pub enum ExchangePartitioning {
    /// Spark's `HashPartitioning`: `pmod(murmur3(keys), n)`.
    Hash(Vec<Arc<dyn PhysicalExpr>>, usize),
    /// Spark's `SinglePartition`.
    Single,
    /// Spark's `RangePartitioning`: ranges of the sort keys, in order.
    Range(LexOrdering, usize),
}

impl ExchangePartitioning {
    pub fn partition_count(&self) -> usize {
        match self {
            ExchangePartitioning::Hash(_, n) | ExchangePartitioning::Range(_, n) => *n,
            ExchangePartitioning::Single => 1,
        }
    }
}

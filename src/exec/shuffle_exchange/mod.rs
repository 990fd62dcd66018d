//! Spark's `ShuffleExchangeExec` (`shuffle_exchange_exec`) and its parts: moves rows between
//! partitions so a parent's required distribution holds (`exchange_partitioning`).
//!
//! `hashpartitioning(keys, n)` sends each row to partition `pmod(murmur3(keys), n)`, the
//! function Spark uses for shuffles and bucket files alike, so a shuffled side lines up row
//! for row with a bucketed side. (DataFusion's `RepartitionExec` hashes with its own
//! function and must never meet a bucketed input.) `SinglePartition` gathers every row into
//! one partition. `rangepartitioning(order, n)`, under a global sort, sends each row to the
//! range of sort keys it falls in, from bounds sampled as Spark's `RangePartitioner` does
//! (`range_bounds`): partition `i` holds keys before partition `i + 1`'s, so sorting each
//! partition and reading them in order sorts all rows. Its map tasks read their input once,
//! keeping the rows while they sample, and route them once every sample is in.
//!
//! As in Spark, the exchange is a stage boundary: a map side, one task per input partition
//! (`map_output`), runs to completion and records what it produced for every output
//! partition (`MapOutputStatistics`, what adaptive execution plans with) before any output
//! partition streams; then readers (`reader`) hand out whole partitions or the parts adaptive
//! execution asks for (`ShuffleReadSpec`). Where we differ: map output stays in memory while
//! the query's memory pool allows, and only the rest goes to local files (`spill`); and it is
//! read once, released as it is read, rather than kept for retries.

mod batcher;
mod exchange_metrics;
mod exchange_partitioning;
mod gather;
mod grouped;
mod map_output;
mod map_part;
mod range_bounds;
mod reader;
mod scatter;
mod shuffle_exchange_exec;
mod spill;
mod statistics;
mod unsafe_row;
#[cfg(test)]
mod tests;

pub use exchange_partitioning::ExchangePartitioning;
pub use reader::ShuffleReadSpec;
pub use shuffle_exchange_exec::ShuffleExchangeExec;
pub use statistics::MapOutputStatistics;

//! Operators of our own, where Spark's semantics differ from DataFusion's: the bucketed file
//! scan, the exchanges that use Spark's hash, the query stages and reads of adaptive
//! execution, Spark's `range()` relation, reading a global sort's partitions in order, and the
//! runtime statements run on.

pub mod aqe_shuffle_read;
pub mod broadcast_exchange;
pub mod collect_in_order;
pub mod downcast_plan;
pub mod executor;
pub mod expand;
pub mod file_source_scan;
pub mod hash_aggregate;
pub mod join;
pub mod join_spec;
pub mod merge_join;
pub mod null_aware_anti_join;
pub(crate) mod one_shot;
pub mod query_stage;
pub mod range;
pub mod reused_exchange;
pub mod shuffle_exchange;
pub mod sort;

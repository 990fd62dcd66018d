//! Operators of our own, where Spark's semantics differ from DataFusion's: the bucketed file
//! scan, the exchanges that use Spark's hash, the query stages and reads of adaptive
//! execution and the runtime filters it adds, Spark's `range()` relation, reading a global sort's partitions in order, and the
//! runtime statements run on, and the rows of Spark's generators.

pub(crate) mod apart;
pub(crate) mod aqe_shuffle_read;
pub(crate) mod broadcast_exchange;
pub(crate) mod collect_in_order;
pub mod columnar;
pub(crate) mod downcast_plan;
pub(crate) mod empty_relation;
pub mod executor;
pub(crate) mod expand;
pub(crate) mod file_partition;
pub(crate) mod file_source_scan;
pub mod generate;
pub(crate) mod hash_aggregate;
pub(crate) mod join;
pub(crate) mod join_spec;
pub(crate) mod merge_join;
pub(crate) mod merge_semi_join;
pub(crate) mod null_aware_anti_join;
pub(crate) mod one_shot;
pub(crate) mod parquet_reads;
pub(crate) mod plumbing;
pub(crate) mod query_stage;
pub(crate) mod range;
pub(crate) mod reused_exchange;
pub(crate) mod runtime_filter;
pub(crate) mod short_circuit;
pub(crate) mod shuffle_exchange;
pub(crate) mod sort;
pub mod spark_connect;

//! Operators of our own, where Spark's semantics differ from DataFusion's: the bucketed file
//! scan, the exchanges that use Spark's hash, the query stages and reads of adaptive
//! execution, and Spark's `range()` relation.

pub mod aqe_shuffle_read;
pub mod broadcast_exchange;
pub mod expand;
pub mod file_source_scan;
pub mod join;
pub mod query_stage;
pub mod range;
pub mod shuffle_exchange;

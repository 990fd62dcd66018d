//! Operators of our own, where Spark's semantics differ from DataFusion's: the bucketed file
//! scan, the exchanges that use Spark's hash, the query stages and reads of adaptive
//! execution, Spark's `range()` relation, and the runtime statements run on.

pub mod aqe_shuffle_read;
pub mod broadcast_exchange;
pub mod executor;
pub mod expand;
pub mod file_source_scan;
pub mod join;
pub mod query_stage;
pub mod range;
pub mod shuffle_exchange;

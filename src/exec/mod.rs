//! Operators of our own, where Spark's semantics differ from DataFusion's: the bucketed file
//! scan, the exchanges that use Spark's hash, and Spark's `range()` relation.

pub mod broadcast_exchange;
pub mod expand;
pub mod file_source_scan;
pub mod join;
pub mod range;
pub mod shuffle_exchange;

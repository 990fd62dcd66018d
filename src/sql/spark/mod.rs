//! Statements on a Spark cluster through Spark Connect: which engine a statement runs on
//! (`bucketsql.engine`), the metastore's tables registered in Spark's catalog, parameters
//! bound into the text Spark gets, and queries and EXPLAIN run there.

pub(crate) mod catalog_sync;
pub(crate) mod parameters;
pub(crate) mod routing;
pub(crate) mod run;
pub(crate) mod write;

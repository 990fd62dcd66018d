//! Our physical planner: Spark 4.x's decisions about scans, joins and data movement, made on
//! the plan DataFusion lowers a query to, one file per Spark rule.

pub mod file_source_strategy;

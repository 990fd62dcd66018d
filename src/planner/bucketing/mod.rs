//! Spark's rules in `execution/bucketing/`.

pub mod coalesce_buckets_in_join;
pub mod disable_unnecessary_bucketed_scan;

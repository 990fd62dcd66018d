//! The Spark SQL settings the planner honours, with Spark's names, defaults and validation.
//! `SET k=v` on a known key checks the value (SQLSTATE 22023 when it does not parse); other
//! keys are kept as text, as Spark keeps them.

use std::collections::BTreeMap;

use super::error::SqlError;

/// The settings of one session, as typed values.
#[derive(Debug, Clone, PartialEq)]
pub struct SparkConf {
    pub auto_broadcast_join_threshold: i64,
    pub shuffle_partitions: usize,
    pub bucketing_enabled: bool,
    pub coalesce_buckets_in_join: bool,
    pub coalesce_max_bucket_ratio: u32,
    pub auto_bucketed_scan: bool,
    pub prefer_sort_merge_join: bool,
    pub require_all_cluster_keys_for_co_partition: bool,
    pub require_all_cluster_keys_for_distribution: bool,
    pub adaptive_enabled: bool,
    pub legacy_bucketed_scan_output_ordering: bool,
    pub v2_bucketing_enabled: bool,
    pub shuffled_hash_join_factor: i64,
    /// `spark.sql.sources.partitionOverwriteMode=dynamic`: INSERT OVERWRITE replaces only
    /// the partitions it writes.
    pub dynamic_partition_overwrite: bool,
}

impl Default for SparkConf {
    fn default() -> Self {
        SparkConf {
            auto_broadcast_join_threshold: 10 * 1024 * 1024,
            shuffle_partitions: 200,
            bucketing_enabled: true,
            coalesce_buckets_in_join: false,
            coalesce_max_bucket_ratio: 4,
            auto_bucketed_scan: true,
            prefer_sort_merge_join: true,
            require_all_cluster_keys_for_co_partition: true,
            require_all_cluster_keys_for_distribution: false,
            adaptive_enabled: true,
            legacy_bucketed_scan_output_ordering: false,
            v2_bucketing_enabled: false,
            shuffled_hash_join_factor: 3,
            dynamic_partition_overwrite: false,
        }
    }
}

/// Every key the planner reads: (Spark's spelling, default shown by `SET k`).
pub const KNOWN_KEYS: &[(&str, &str)] = &[
    ("spark.sql.autoBroadcastJoinThreshold", "10485760"),
    ("spark.sql.shuffle.partitions", "200"),
    ("spark.sql.sources.bucketing.enabled", "true"),
    ("spark.sql.bucketing.coalesceBucketsInJoin.enabled", "false"),
    ("spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio", "4"),
    ("spark.sql.sources.bucketing.autoBucketedScan.enabled", "true"),
    ("spark.sql.join.preferSortMergeJoin", "true"),
    ("spark.sql.requireAllClusterKeysForCoPartition", "true"),
    ("spark.sql.requireAllClusterKeysForDistribution", "false"),
    ("spark.sql.adaptive.enabled", "true"),
    ("spark.sql.legacy.bucketedTableScan.outputOrdering", "false"),
    ("spark.sql.sources.v2.bucketing.enabled", "false"),
    ("spark.sql.shuffledHashJoinFactor", "3"),
    ("spark.sql.sources.bucketing.maxBuckets", "100000"),
    ("spark.sql.sources.partitionOverwriteMode", "static"),
];

/// Spark's spelling of a key given in any case, for known keys.
pub fn canonical_key(name: &str) -> Option<&'static str> {
    KNOWN_KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(k, _)| *k)
}

pub fn default_value(name: &str) -> Option<&'static str> {
    KNOWN_KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
}

fn parse_bool(key: &str, value: &str) -> Result<bool, SqlError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be boolean, but was {value}"))),
    }
}

/// Spark's byte strings: `10485760`, `10MB`, `10m`, `1g`, and `-1` for "off".
fn parse_bytes(key: &str, value: &str) -> Result<i64, SqlError> {
    let text = value.trim().to_ascii_lowercase();
    let invalid = || SqlError::invalid_parameter(format!("{key} should be a size in bytes (e.g. 10485760 or 10MB), but was {value}"));
    if let Ok(n) = text.parse::<i64>() {
        return Ok(n);
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(invalid)?;
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().map_err(|_| invalid())?;
    let scale: i64 = match unit {
        "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        _ => return Err(invalid()),
    };
    number.checked_mul(scale).ok_or_else(invalid)
}

fn parse_positive(key: &str, value: &str) -> Result<i64, SqlError> {
    match value.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be a positive integer, but was {value}"))),
    }
}

/// Checks a value for a known key; unknown keys take any text.
pub fn validate(key: &str, value: &str) -> Result<(), SqlError> {
    let mut conf = SparkConf::default();
    conf.apply(key, value)
}

impl SparkConf {
    /// The session's settings over the defaults. Values were validated when set.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Self {
        let mut conf = SparkConf::default();
        for (key, value) in settings {
            let _ = conf.apply(key, value);
        }
        conf
    }

    fn apply(&mut self, key: &str, value: &str) -> Result<(), SqlError> {
        let Some(key) = canonical_key(key) else {
            return Ok(());
        };
        match key {
            "spark.sql.autoBroadcastJoinThreshold" => self.auto_broadcast_join_threshold = parse_bytes(key, value)?,
            "spark.sql.shuffle.partitions" => self.shuffle_partitions = parse_positive(key, value)? as usize,
            "spark.sql.sources.bucketing.enabled" => self.bucketing_enabled = parse_bool(key, value)?,
            "spark.sql.bucketing.coalesceBucketsInJoin.enabled" => self.coalesce_buckets_in_join = parse_bool(key, value)?,
            "spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio" => {
                self.coalesce_max_bucket_ratio = u32::try_from(parse_positive(key, value)?)
                    .map_err(|_| SqlError::invalid_parameter(format!("{key} is too large")))?
            }
            "spark.sql.sources.bucketing.autoBucketedScan.enabled" => self.auto_bucketed_scan = parse_bool(key, value)?,
            "spark.sql.join.preferSortMergeJoin" => self.prefer_sort_merge_join = parse_bool(key, value)?,
            "spark.sql.requireAllClusterKeysForCoPartition" => {
                self.require_all_cluster_keys_for_co_partition = parse_bool(key, value)?
            }
            "spark.sql.requireAllClusterKeysForDistribution" => {
                self.require_all_cluster_keys_for_distribution = parse_bool(key, value)?
            }
            "spark.sql.adaptive.enabled" => self.adaptive_enabled = parse_bool(key, value)?,
            "spark.sql.legacy.bucketedTableScan.outputOrdering" => {
                self.legacy_bucketed_scan_output_ordering = parse_bool(key, value)?
            }
            "spark.sql.sources.v2.bucketing.enabled" => self.v2_bucketing_enabled = parse_bool(key, value)?,
            "spark.sql.shuffledHashJoinFactor" => self.shuffled_hash_join_factor = parse_positive(key, value)?,
            "spark.sql.sources.bucketing.maxBuckets" => {
                parse_positive(key, value)?;
            }
            "spark.sql.sources.partitionOverwriteMode" => {
                self.dynamic_partition_overwrite = match value.trim().to_ascii_lowercase().as_str() {
                    "static" => false,
                    "dynamic" => true,
                    _ => return Err(SqlError::invalid_parameter(format!("{key} should be STATIC or DYNAMIC, but was {value}"))),
                };
            }
            _ => unreachable!("every known key is handled"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_as_spark_parses_them() {
        let settings: BTreeMap<String, String> = [
            ("spark.sql.autobroadcastjointhreshold".to_string(), "-1".to_string()),
            ("spark.sql.shuffle.partitions".to_string(), "8".to_string()),
            ("spark.sql.bucketing.coalescebucketsinjoin.enabled".to_string(), "TRUE".to_string()),
        ]
        .into();
        let conf = SparkConf::from_settings(&settings);
        assert_eq!(conf.auto_broadcast_join_threshold, -1);
        assert_eq!(conf.shuffle_partitions, 8);
        assert!(conf.coalesce_buckets_in_join);
        assert_eq!(parse_bytes("k", "10MB").unwrap(), 10 * 1024 * 1024);
    }

    #[test]
    fn bad_values_are_refused() {
        assert_eq!(validate("spark.sql.shuffle.partitions", "0").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.adaptive.enabled", "maybe").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.autoBroadcastJoinThreshold", "lots").unwrap_err().code, "22023");
        assert!(validate("spark.some.unknown.key", "anything").is_ok());
    }
}

//! The Spark SQL settings the planner honours, with Spark's names, defaults and validation,
//! bucketsql's own (`bucketsql.engine`),
//! the one PostgreSQL setting that changes how statements run (`statement_timeout`), and the
//! values `SHOW` gives for settings a session has not made (the server's PostgreSQL
//! parameters, else Spark's defaults).
//! `SET k=v` on a known key checks the value (SQLSTATE 22023 when it does not parse); other
//! keys are kept as text, as Spark keeps them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::prelude::SessionConfig;

use crate::error::SqlError;

/// Declares Spark's settings once: each becomes a typed field of [`SparkConf`], a key that
/// `SET` validates and `SET k` shows (with its default), and a parser shared by both.
macro_rules! spark_settings {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = $key:literal, $default:literal, $parse:ident;)*) => {
        /// The settings of one session, as typed values.
        #[derive(Debug, Clone, PartialEq)]
        pub struct SparkConf {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Default for SparkConf {
            fn default() -> Self {
                SparkConf { $($field: $parse($key, $default).expect("a valid default"),)* }
            }
        }

        /// Every key the planner reads: (Spark's spelling, default shown by `SET k`).
        pub const KNOWN_KEYS: &[(&str, &str)] = &[$(($key, $default),)*];

        impl SparkConf {
            fn apply(&mut self, key: &str, value: &str) -> Result<(), SqlError> {
                match canonical_key(key) {
                    $(Some($key) => self.$field = $parse($key, value)?,)*
                    _ => {}
                }
                Ok(())
            }
        }
    };
}

spark_settings! {
    auto_broadcast_join_threshold: i64 = "spark.sql.autoBroadcastJoinThreshold", "10485760", parse_bytes;
    shuffle_partitions: usize = "spark.sql.shuffle.partitions", "200", parse_positive;
    bucketing_enabled: bool = "spark.sql.sources.bucketing.enabled", "true", parse_bool;
    coalesce_buckets_in_join: bool = "spark.sql.bucketing.coalesceBucketsInJoin.enabled", "false", parse_bool;
    coalesce_max_bucket_ratio: u32 = "spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio", "4", parse_positive;
    auto_bucketed_scan: bool = "spark.sql.sources.bucketing.autoBucketedScan.enabled", "true", parse_bool;
    prefer_sort_merge_join: bool = "spark.sql.join.preferSortMergeJoin", "true", parse_bool;
    require_all_cluster_keys_for_co_partition: bool = "spark.sql.requireAllClusterKeysForCoPartition", "true", parse_bool;
    require_all_cluster_keys_for_distribution: bool = "spark.sql.requireAllClusterKeysForDistribution", "false", parse_bool;
    union_output_partitioning: bool = "spark.sql.unionOutputPartitioning", "true", parse_bool;
    exchange_reuse: bool = "spark.sql.exchange.reuse", "true", parse_bool;
    adaptive_enabled: bool = "spark.sql.adaptive.enabled", "true", parse_bool;
    legacy_bucketed_scan_output_ordering: bool = "spark.sql.legacy.bucketedTableScan.outputOrdering", "false", parse_bool;
    v2_bucketing_enabled: bool = "spark.sql.sources.v2.bucketing.enabled", "false", parse_bool;
    shuffled_hash_join_factor: i64 = "spark.sql.shuffledHashJoinFactor", "3", parse_positive;
    max_buckets: u32 = "spark.sql.sources.bucketing.maxBuckets", "100000", parse_positive;
    /// ANSI mode, Spark 4's default. Off, Spark's legacy answers: integers wrap around, and a
    /// zero divisor, a cast that fails or a DECIMAL past its precision give NULL
    /// ([`EvalMode`]).
    ansi_enabled: bool = "spark.sql.ansi.enabled", "true", parse_bool;
    /// How DECIMAL results of `+ - * /` are typed past 38 digits ([`PrecisionLoss`]).
    allow_precision_loss: bool = "spark.sql.decimalOperations.allowPrecisionLoss", "true", parse_bool;
    /// `spark.sql.sources.partitionOverwriteMode=dynamic`: INSERT OVERWRITE replaces only
    /// the partitions it writes.
    dynamic_partition_overwrite: bool = "spark.sql.sources.partitionOverwriteMode", "static", parse_overwrite_mode;
    coalesce_partitions_enabled: bool = "spark.sql.adaptive.coalescePartitions.enabled", "true", parse_bool;
    /// The size adaptive execution aims for when it coalesces or splits shuffle partitions.
    advisory_partition_size: u64 = "spark.sql.adaptive.advisoryPartitionSizeInBytes", "64MB", parse_positive_bytes;
    coalesce_min_partition_size: u64 = "spark.sql.adaptive.coalescePartitions.minPartitionSize", "1MB", parse_positive_bytes;
    /// Coalescing keeps at least as many partitions as there are cores, down to `minPartitionSize`.
    coalesce_parallelism_first: bool = "spark.sql.adaptive.coalescePartitions.parallelismFirst", "true", parse_bool;
    /// Broadcast threshold for sides whose size is known from a finished stage; unset means
    /// `spark.sql.autoBroadcastJoinThreshold`.
    adaptive_auto_broadcast_join_threshold: Option<i64> = "spark.sql.adaptive.autoBroadcastJoinThreshold", "<undefined>", parse_optional_bytes;
    non_empty_partition_ratio_for_broadcast_join: f64 = "spark.sql.adaptive.nonEmptyPartitionRatioForBroadcastJoin", "0.2", parse_non_negative;
    max_shuffled_hash_join_local_map_threshold: u64 = "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold", "0", parse_non_negative_bytes;
    skew_join_enabled: bool = "spark.sql.adaptive.skewJoin.enabled", "true", parse_bool;
    skewed_partition_factor: f64 = "spark.sql.adaptive.skewJoin.skewedPartitionFactor", "5.0", parse_non_negative;
    skewed_partition_threshold: u64 = "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "256MB", parse_non_negative_bytes;
    local_shuffle_reader_enabled: bool = "spark.sql.adaptive.localShuffleReader.enabled", "true", parse_bool;
    /// Sorts radix-sort rows whose fixed-width keys pack into 64 bits; off, every sort compares.
    radix_sort: bool = "spark.sql.sort.enableRadixSort", "true", parse_bool;
    /// The most bytes of files one partition of a non-bucketed scan reads.
    max_partition_bytes: u64 = "spark.sql.files.maxPartitionBytes", "128MB", parse_positive_bytes;
    /// What opening a file costs, in bytes read: small files are packed into partitions by it.
    open_cost_in_bytes: u64 = "spark.sql.files.openCostInBytes", "4MB", parse_non_negative_bytes;
    /// The partitions a non-bucketed scan aims for at least; unset, the number of cores.
    min_partition_num: Option<usize> = "spark.sql.files.minPartitionNum", "<undefined>", parse_optional_positive;
    /// Parquet's record-level filtering of the pushed filters while decoding: the filter
    /// columns first, the others only for the rows that pass. Off, as in Spark, row groups and
    /// pages are still skipped by their statistics.
    record_level_filter: bool = "spark.sql.parquet.recordLevelFilter.enabled", "false", parse_bool;
    /// Adaptive execution's runtime filters: a side of a shuffled join waits for the other,
    /// which has a selective filter, and drops the rows whose keys that side lacks before its
    /// exchange. Spark's plan is unchanged.
    runtime_filter_enabled: bool = "bucketsql.runtimeFilter.enabled", "true", parse_bool;
    /// The bytes of files a side must scan to wait for a runtime filter.
    runtime_filter_scan_threshold: u64 = "bucketsql.runtimeFilter.applicationSideScanSizeThreshold", "64MB", parse_non_negative_bytes;
    /// Where statements run: here (`local`), on the Spark Connect server `serve
    /// --spark-connect` names (`spark`), or there when their scans are large (`auto`).
    engine: EngineChoice = "bucketsql.engine", "local", parse_engine;
    /// Under `bucketsql.engine = auto`, the bytes of table files past which a statement runs
    /// on Spark.
    engine_auto_threshold: u64 = "bucketsql.engine.autoThresholdBytes", "10GB", parse_non_negative_bytes;
}

/// `bucketsql.engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    Local,
    Spark,
    Auto,
}

impl EngineChoice {
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Local => "local",
            EngineChoice::Spark => "spark",
            EngineChoice::Auto => "auto",
        }
    }
}

fn parse_engine(key: &str, value: &str) -> Result<EngineChoice, SqlError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "local" => Ok(EngineChoice::Local),
        "spark" => Ok(EngineChoice::Spark),
        "auto" => Ok(EngineChoice::Auto),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be local, spark or auto, but was {value}"))),
    }
}

impl SparkConf {
    /// The broadcast threshold for a join side whose size a finished stage measured.
    pub fn adaptive_broadcast_threshold(&self) -> i64 {
        self.adaptive_auto_broadcast_join_threshold.unwrap_or(self.auto_broadcast_join_threshold)
    }
}

/// Spark's spelling of a key given in any case, for known keys.
pub fn canonical_key(name: &str) -> Option<&'static str> {
    KNOWN_KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(k, _)| *k)
}

pub fn default_value(name: &str) -> Option<&'static str> {
    KNOWN_KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
}

/// A setting's value when the session has not set it: the server's PostgreSQL parameter, else
/// Spark's default.
pub fn default_setting(name: &str) -> Option<&'static str> {
    server_setting(name).or_else(|| default_value(name))
}

/// Settings PostgreSQL clients ask for with `SHOW`; the values match the startup parameters.
fn server_setting(name: &str) -> Option<&'static str> {
    Some(match name {
        "server_version" => "16.6",
        "server_version_num" => "160006",
        "search_path" => "\"default\"",
        "max_identifier_length" => "63",
        "max_index_keys" => "32",
        "server_encoding" | "client_encoding" => "UTF8",
        "datestyle" => "ISO, YMD",
        "timezone" => "Etc/UTC",
        "integer_datetimes" | "standard_conforming_strings" => "on",
        "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "transaction_read_only" | "default_transaction_read_only" => "off",
        "idle_in_transaction_session_timeout" => "0",
        "statement_timeout" => "0",
        _ => return None,
    })
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
    let invalid = || {
        SqlError::invalid_parameter(format!("{key} should be a size in bytes (e.g. 10485760 or 10MB), but was {value}"))
    };
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

/// A size in bytes that is at least `minimum`.
fn bytes_at_least(key: &str, value: &str, minimum: i64) -> Result<u64, SqlError> {
    let bytes = parse_bytes(key, value)?;
    u64::try_from(bytes).ok().filter(|_| bytes >= minimum).ok_or_else(|| {
        let what = if minimum > 0 { "positive" } else { "non-negative" };
        SqlError::invalid_parameter(format!("{key} should be a {what} size in bytes, but was {value}"))
    })
}

fn parse_positive_bytes(key: &str, value: &str) -> Result<u64, SqlError> {
    bytes_at_least(key, value, 1)
}

fn parse_non_negative_bytes(key: &str, value: &str) -> Result<u64, SqlError> {
    bytes_at_least(key, value, 0)
}

/// A size in bytes, or Spark's `<undefined>` for a setting that defers to another.
fn parse_optional_bytes(key: &str, value: &str) -> Result<Option<i64>, SqlError> {
    if value.trim() == "<undefined>" { Ok(None) } else { parse_bytes(key, value).map(Some) }
}

/// A positive integer, or Spark's `<undefined>` for a setting that defers to another.
fn parse_optional_positive(key: &str, value: &str) -> Result<Option<usize>, SqlError> {
    if value.trim() == "<undefined>" { Ok(None) } else { parse_positive(key, value).map(Some) }
}

/// A number at least zero (`0.2`, `5`, `5.0`).
fn parse_non_negative(key: &str, value: &str) -> Result<f64, SqlError> {
    match value.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be a non-negative number, but was {value}"))),
    }
}

/// A positive integer that fits the setting's type and Spark's `intConf` (at most `i32::MAX`):
/// past it a bucket id or partition number would wrap when made an `Int`.
fn parse_positive<T: TryFrom<i32>>(key: &str, value: &str) -> Result<T, SqlError> {
    match value.trim().parse::<i32>() {
        Ok(n) if n > 0 => T::try_from(n).map_err(|_| SqlError::invalid_parameter(format!("{key} is too large"))),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be a positive integer, but was {value}"))),
    }
}

/// `static` or `dynamic`, as `true` for dynamic.
fn parse_overwrite_mode(key: &str, value: &str) -> Result<bool, SqlError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "static" => Ok(false),
        "dynamic" => Ok(true),
        _ => Err(SqlError::invalid_parameter(format!("{key} should be STATIC or DYNAMIC, but was {value}"))),
    }
}

/// Checks a value for a known key — Spark's settings and PostgreSQL's `statement_timeout` and
/// `log_min_duration_statement` — wherever it is set (`SET`, `set_config()`, the startup
/// packet); unknown keys take any text.
pub fn validate(key: &str, value: &str) -> Result<(), SqlError> {
    if key.eq_ignore_ascii_case(STATEMENT_TIMEOUT) {
        return parse_statement_timeout(value).map(|_| ());
    }
    if key.eq_ignore_ascii_case(LOG_MIN_DURATION_STATEMENT) {
        return parse_log_min_duration(value).map(|_| ());
    }
    if key.eq_ignore_ascii_case(IDLE_IN_TRANSACTION_SESSION_TIMEOUT) {
        return parse_idle_in_transaction_timeout(value).map(|_| ());
    }
    if key.eq_ignore_ascii_case(DEFAULT_TRANSACTION_ISOLATION) || key.eq_ignore_ascii_case(TRANSACTION_ISOLATION) {
        return Isolation::setting(key, value).map(|_| ());
    }
    if key.eq_ignore_ascii_case(DEFAULT_TRANSACTION_READ_ONLY) {
        return parse_on_off(key, value).map(|_| ());
    }
    let mut conf = SparkConf::default();
    conf.apply(key, value)
}

pub const STATEMENT_TIMEOUT: &str = "statement_timeout";
pub const LOG_MIN_DURATION_STATEMENT: &str = "log_min_duration_statement";
pub const IDLE_IN_TRANSACTION_SESSION_TIMEOUT: &str = "idle_in_transaction_session_timeout";
pub const DEFAULT_TRANSACTION_ISOLATION: &str = "default_transaction_isolation";
pub const DEFAULT_TRANSACTION_READ_ONLY: &str = "default_transaction_read_only";
/// The open transaction's isolation level (the default outside one).
pub const TRANSACTION_ISOLATION: &str = "transaction_isolation";
pub const TRANSACTION_READ_ONLY: &str = "transaction_read_only";

/// A transaction's isolation level, PostgreSQL's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// READ UNCOMMITTED is READ COMMITTED, as in PostgreSQL.
    pub fn parse(name: &str) -> Option<Self> {
        match name.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase().as_str() {
            "read committed" | "read uncommitted" => Some(Isolation::ReadCommitted),
            "repeatable read" => Some(Isolation::RepeatableRead),
            "serializable" => Some(Isolation::Serializable),
            _ => None,
        }
    }

    /// The level a setting `key` names, or PostgreSQL's error for one it does not.
    pub fn setting(key: &str, value: &str) -> Result<Self, SqlError> {
        Self::parse(value)
            .ok_or_else(|| SqlError::invalid_parameter(format!("invalid value for parameter \"{key}\": \"{value}\"")))
    }

    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }
}

/// A PostgreSQL boolean parameter: `on`, `off`, `true`, `false`, `yes`, `no`, `1`, `0`.
pub fn parse_on_off(key: &str, value: &str) -> Result<bool, SqlError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(SqlError::invalid_parameter(format!("parameter \"{key}\" requires a Boolean value"))),
    }
}

/// The `idle_in_transaction_session_timeout` that `value` sets, in `statement_timeout`'s
/// units: a session idle that long inside a transaction block is ended; `None` (`0`) is off.
pub fn parse_idle_in_transaction_timeout(value: &str) -> Result<Option<Duration>, SqlError> {
    let millis = parse_millis(IDLE_IN_TRANSACTION_SESSION_TIMEOUT, value, 0.0)?;
    Ok((millis > 0.0).then(|| Duration::from_millis(millis as u64)))
}

/// PostgreSQL's largest time setting (`INT_MAX` milliseconds).
const MAX_MILLIS: f64 = i32::MAX as f64;

/// The `statement_timeout` that `value` sets, read as PostgreSQL reads it: milliseconds, or
/// a number with one of the units `us`, `ms`, `s`, `min`, `h`, `d`; `None` (`0`) is off.
pub fn parse_statement_timeout(value: &str) -> Result<Option<Duration>, SqlError> {
    let millis = parse_millis(STATEMENT_TIMEOUT, value, 0.0)?;
    Ok((millis > 0.0).then(|| Duration::from_millis(millis as u64)))
}

/// The `log_min_duration_statement` that `value` sets, in `statement_timeout`'s units:
/// statements that take at least this long are logged with their plans; `None` (`-1`) is off
/// and `0` logs every statement.
pub fn parse_log_min_duration(value: &str) -> Result<Option<Duration>, SqlError> {
    let millis = parse_millis(LOG_MIN_DURATION_STATEMENT, value, -1.0)?;
    Ok((millis >= 0.0).then(|| Duration::from_millis(millis as u64)))
}

/// A time setting in milliseconds, from `minimum` to PostgreSQL's largest.
fn parse_millis(parameter: &str, value: &str, minimum: f64) -> Result<f64, SqlError> {
    let text = value.trim();
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len()));
    let invalid = || SqlError::invalid_parameter(format!("invalid value for parameter \"{parameter}\": \"{value}\""));
    let number: f64 = number.trim().parse().map_err(|_| invalid())?;
    let unit_millis = match unit {
        "" | "ms" => 1.0,
        "us" => 1e-3,
        "s" => 1e3,
        "min" => 6e4,
        "h" => 3.6e6,
        "d" => 8.64e7,
        _ => return Err(invalid()),
    };
    let millis = (number * unit_millis).round();
    if !(minimum..=MAX_MILLIS).contains(&millis) {
        return Err(SqlError::invalid_parameter(format!(
            "{value} is outside the valid range for parameter \"{parameter}\" ({minimum} .. {MAX_MILLIS})"
        )));
    }
    Ok(millis)
}

extensions_options! {
    /// The settings that change what an expression computes, kept in DataFusion's options: the
    /// analyzer rules and functions see those, not the session's [`SparkConf`].
    pub struct ExpressionSettings {
        pub ansi_enabled: bool, default = true
        pub allow_precision_loss: bool, default = true
    }
}

impl ConfigExtension for ExpressionSettings {
    const PREFIX: &'static str = "bucketsql_expressions";
}

/// How an expression answers where ANSI mode would fail, as Spark's expressions take it from
/// `spark.sql.ansi.enabled` when they are built (`EvalMode.fromSQLConf`). The `try_` functions
/// are Spark's `TRY` mode whatever the setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvalMode {
    /// An error: overflow is 22003, a zero divisor 22012, a bad cast 22018.
    Ansi,
    /// Spark's legacy answers: integers wrap around, the rest is NULL.
    Legacy,
}

impl EvalMode {
    /// The mode `spark.sql.ansi.enabled = ansi_enabled` asks for.
    pub fn when_ansi(ansi_enabled: bool) -> EvalMode {
        if ansi_enabled { EvalMode::Ansi } else { EvalMode::Legacy }
    }

    /// The mode of the session whose DataFusion options are `options`; ANSI where none was
    /// installed.
    pub fn of(options: &ConfigOptions) -> EvalMode {
        options.extensions.get::<ExpressionSettings>().map_or(EvalMode::Ansi, |s| EvalMode::when_ansi(s.ansi_enabled))
    }
}

/// How Spark types a DECIMAL result of `+`, `-`, `*` or `/` that needs more than 38 digits
/// (`spark.sql.decimalOperations.allowPrecisionLoss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrecisionLoss {
    /// Spark's default: the scale gives way to integral digits, down to 6
    /// (`DecimalType.adjustPrecisionScale`).
    Allowed,
    /// Precision and scale each cut to 38 (`DecimalType.bounded`), so that larger values no
    /// longer fit.
    Refused,
}

impl PrecisionLoss {
    /// What `spark.sql.decimalOperations.allowPrecisionLoss = allowed` asks for.
    pub fn when_allowed(allowed: bool) -> PrecisionLoss {
        if allowed { PrecisionLoss::Allowed } else { PrecisionLoss::Refused }
    }

    /// The setting of the session whose DataFusion options are `options`; Spark's default where
    /// none was installed.
    pub fn of(options: &ConfigOptions) -> PrecisionLoss {
        options
            .extensions
            .get::<ExpressionSettings>()
            .map_or(PrecisionLoss::Allowed, |s| PrecisionLoss::when_allowed(s.allow_precision_loss))
    }
}

impl SparkConf {
    pub fn eval_mode(&self) -> EvalMode {
        EvalMode::when_ansi(self.ansi_enabled)
    }

    pub fn precision_loss(&self) -> PrecisionLoss {
        PrecisionLoss::when_allowed(self.allow_precision_loss)
    }

    /// This session's [`ExpressionSettings`], to install in its DataFusion options.
    pub fn expression_settings(&self) -> ExpressionSettings {
        ExpressionSettings { ansi_enabled: self.ansi_enabled, allow_precision_loss: self.allow_precision_loss }
    }

    /// The settings a session installed in its DataFusion config before planning, where the
    /// planner, scans, sorts and writes read them. Missing settings are an error, not Spark's
    /// defaults: a plan made or run without its session's settings would follow other rules
    /// than the user set.
    pub fn of(config: &SessionConfig) -> datafusion::error::Result<Arc<SparkConf>> {
        config.get_extension::<SparkConf>().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal("the session's Spark settings are not installed".to_string())
        })
    }

    /// The session's settings over the defaults. Values were validated when set.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Self {
        let mut conf = SparkConf::default();
        for (key, value) in settings {
            let _ = conf.apply(key, value);
        }
        conf
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
    fn adaptive_settings_default_as_in_spark() {
        let conf = SparkConf::default();
        assert!(conf.coalesce_partitions_enabled && conf.coalesce_parallelism_first);
        assert_eq!(conf.advisory_partition_size, 64 << 20);
        assert_eq!(conf.coalesce_min_partition_size, 1 << 20);
        assert_eq!(conf.non_empty_partition_ratio_for_broadcast_join, 0.2);
        assert_eq!(conf.max_shuffled_hash_join_local_map_threshold, 0);
        assert!(conf.skew_join_enabled && conf.local_shuffle_reader_enabled);
        assert_eq!(conf.skewed_partition_factor, 5.0);
        assert_eq!(conf.skewed_partition_threshold, 256 << 20);
        // Unset, the adaptive broadcast threshold is the static one.
        assert_eq!(conf.adaptive_auto_broadcast_join_threshold, None);
        assert_eq!(conf.adaptive_broadcast_threshold(), 10 << 20);
        let settings: BTreeMap<String, String> = [
            ("spark.sql.autobroadcastjointhreshold".to_string(), "-1".to_string()),
            ("spark.sql.adaptive.autobroadcastjointhreshold".to_string(), "300KB".to_string()),
        ]
        .into();
        let conf = SparkConf::from_settings(&settings);
        assert_eq!(conf.adaptive_broadcast_threshold(), 300 << 10);
        assert_eq!(validate("spark.sql.adaptive.advisoryPartitionSizeInBytes", "0").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "-1").unwrap_err().code, "22023");
        assert_eq!(
            validate("spark.sql.adaptive.nonEmptyPartitionRatioForBroadcastJoin", "x").unwrap_err().code,
            "22023"
        );
        assert!(validate("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "100KB").is_ok());
    }

    #[test]
    fn statement_timeout_units_as_postgresql_reads_them() {
        assert_eq!(parse_statement_timeout("1000").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(parse_statement_timeout("1s").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(parse_statement_timeout(" 500ms ").unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(parse_statement_timeout("1.5min").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(parse_statement_timeout("0").unwrap(), None);
        assert_eq!(parse_statement_timeout("0s").unwrap(), None);
        for bad in ["abc", "", "1 sec", "10S", "-1", "1e3", "30d"] {
            assert_eq!(parse_statement_timeout(bad).unwrap_err().code, "22023", "{bad}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert_eq!(validate("spark.sql.shuffle.partitions", "0").unwrap_err().code, "22023");
        // Spark's Int settings stop at i32::MAX, which bucket ids and partition numbers fit in.
        assert!(validate("spark.sql.sources.bucketing.maxBuckets", "2147483647").is_ok());
        assert_eq!(validate("spark.sql.sources.bucketing.maxBuckets", "3000000000").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.shuffle.partitions", "2147483648").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.adaptive.enabled", "maybe").unwrap_err().code, "22023");
        assert_eq!(validate("spark.sql.autoBroadcastJoinThreshold", "lots").unwrap_err().code, "22023");
        assert!(validate("spark.some.unknown.key", "anything").is_ok());
        assert_eq!(validate("statement_timeout", "soon").unwrap_err().code, "22023");
        assert!(validate("STATEMENT_TIMEOUT", "5s").is_ok());
    }
}

//! What a table is: its columns, bucketing and partitioning, the files a version of it holds,
//! and how a write's files join it; what CREATE TABLE asks for.

use std::collections::{BTreeMap, BTreeSet};

use super::location::Location;
use super::types::SparkType;

#[derive(Debug, Clone)]
pub struct ColumnMeta {
    pub name: String,
    pub ty: SparkType,
    pub nullable: bool,
    pub comment: Option<String>,
}

/// A committed Parquet file, its path relative to the table location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    pub path: String,
    /// Hive-style partition directory (`d=2026-01-01`), empty when unpartitioned.
    pub partition: String,
    pub bucket: Option<u32>,
    pub row_count: u64,
    pub byte_size: u64,
}

/// Spark's `BucketSpec`: rows go to bucket `pmod(murmur3(bucket columns), num_buckets)`
/// and are sorted by the sort columns within each file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpec {
    pub num_buckets: u32,
    pub bucket_columns: Vec<String>,
    pub sort_columns: Vec<String>,
}

/// Spark's catalog keys for a table's statistics, kept among its properties.
pub const STATISTICS_PREFIX: &str = "spark.sql.statistics.";
pub const STATISTICS_SIZE: &str = "spark.sql.statistics.totalSize";
pub const STATISTICS_ROWS: &str = "spark.sql.statistics.numRows";

/// The key of one column statistic (`distinctCount`, `nullCount`, `min`, `max`, `avgLen`,
/// `maxLen`, `version`), as Spark's `CatalogColumnStat.toMap` names it.
pub fn column_statistic_key(column: &str, statistic: &str) -> String {
    format!("{STATISTICS_PREFIX}colStats.{column}.{statistic}")
}

/// The bucket function recorded with every bucketed table.
pub const BUCKET_HASH: &str = "spark_murmur3_x86_32";
pub const BUCKET_HASH_VERSION: i64 = 1;

/// A table as of one committed version, with the files that version holds.
#[derive(Debug, Clone)]
pub struct TableMeta {
    pub id: i64,
    pub schema: String,
    pub name: String,
    pub provider: String,
    pub location: Location,
    pub external: bool,
    pub comment: Option<String>,
    pub created_at: i64,
    /// Moves on with every committed change of the table's files.
    pub version: i64,
    /// Moves on with every committed change of the table, of any kind; what a transaction
    /// that read this version checks its conflicts from.
    pub change_seq: i64,
    /// Data columns first, then partition columns (Spark's order).
    pub columns: Vec<ColumnMeta>,
    pub partition_columns: Vec<String>,
    pub bucket_spec: Option<BucketSpec>,
    pub properties: BTreeMap<String, String>,
    pub files: Vec<DataFile>,
    /// Partition directories, sorted.
    pub partitions: Vec<String>,
}

impl TableMeta {
    pub fn file_path(&self, file: &DataFile) -> Location {
        self.location.join(&file.path)
    }

    /// The size its catalog statistics give (`ANALYZE TABLE`, or declared with `ALTER TABLE
    /// .. SET TBLPROPERTIES`), which Spark plans with in place of the files' size.
    pub fn declared_size(&self) -> Option<u64> {
        self.properties.get(STATISTICS_SIZE)?.parse().ok()
    }
}

/// What `CREATE TABLE` asks for.
#[derive(Debug, Clone)]
pub struct NewTable {
    pub schema: String,
    pub name: String,
    pub provider: String,
    pub location: Location,
    pub external: bool,
    pub comment: Option<String>,
    pub columns: Vec<ColumnMeta>,
    pub partition_columns: Vec<String>,
    pub bucket_spec: Option<BucketSpec>,
    pub properties: BTreeMap<String, String>,
}

/// How a write's files join the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteMode {
    Append,
    /// Replaces every file of the table.
    Overwrite,
    /// Replaces the files of the partitions the write produced (Spark's dynamic
    /// `partitionOverwriteMode`), keeping the others.
    OverwritePartitions,
    /// Replaces the partitions under one directory (`d=x`: static partition values).
    OverwriteUnder(String),
    /// Empties the table (`TRUNCATE TABLE`), or the partitions whose directories have all of
    /// these `column=value` segments (`TRUNCATE TABLE … PARTITION`, whose spec may name any of
    /// the partition columns). The partitions stay registered, as Spark keeps them.
    Truncate(Vec<String>),
}

impl WriteMode {
    /// Whether the files of `partition` leave the table when a write in this mode commits
    /// files of the partitions `written`.
    pub fn replaces(&self, partition: &str, written: &[&str]) -> bool {
        match self {
            WriteMode::Append => false,
            WriteMode::Overwrite => true,
            WriteMode::OverwritePartitions => written.contains(&partition),
            WriteMode::OverwriteUnder(directory) => {
                partition.strip_prefix(directory.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            }
            WriteMode::Truncate(segments) => segments.iter().all(|s| partition.split('/').any(|p| p == s)),
        }
    }

    /// Whether `partition` stops being registered when a write in this mode commits files of
    /// the partitions `written`: a partition it replaces, except under TRUNCATE.
    pub fn forgets(&self, partition: &str, written: &[&str]) -> bool {
        !matches!(self, WriteMode::Truncate(_)) && self.replaces(partition, written)
    }
}

/// Which partitions a re-read of an external table's directory registers and forgets:
/// Spark's `MSCK REPAIR TABLE t [ADD | DROP | SYNC] PARTITIONS`. A partition is on disk when
/// its directory holds data files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionRepair {
    /// Registers the partitions on disk and keeps those whose files are gone (Spark's default).
    Add,
    /// Forgets the partitions whose files are gone and registers no new one.
    Drop,
    /// Both: the partitions become those on disk.
    Sync,
}

impl PartitionRepair {
    /// The partitions registered after a repair of a table that had `known` and whose
    /// directory holds files of `on_disk`.
    pub fn registered(self, known: &BTreeSet<String>, on_disk: &BTreeSet<String>) -> BTreeSet<String> {
        match self {
            PartitionRepair::Add => known.union(on_disk).cloned().collect(),
            PartitionRepair::Drop => known.intersection(on_disk).cloned().collect(),
            PartitionRepair::Sync => on_disk.clone(),
        }
    }
}

//! Registers a directory written by someone else (Spark's `bucketBy`, most often) as a
//! table's committed files: Hive partition directories are read from the paths, bucket ids
//! from the file names (as Spark's `BucketingUtils.getBucketId` reads them), row counts from
//! the Parquet footers.

use std::path::{Path, PathBuf};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

use super::file_naming::bucket_id_of;
use crate::catalog::table::{BucketSpec, ColumnMeta, DataFile};
use crate::catalog::types::SparkType;
use crate::error::SqlError;

/// Names Spark and Hadoop give to files that are not data (`_SUCCESS`, `.crc`, staging).
fn is_hidden(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.')
}

/// The table a directory is registered as.
pub struct ExpectedLayout<'a> {
    /// Columns stored in the files (not the partition columns): their declared types, and
    /// whether they may be NULL.
    pub data_columns: Vec<(&'a str, &'a SparkType, bool)>,
    pub partition_columns: &'a [String],
    pub bucket_spec: Option<&'a BucketSpec>,
}

impl<'a> ExpectedLayout<'a> {
    /// The layout of a table with these columns (partition columns among them), partitioning
    /// and buckets.
    pub fn new(
        columns: &'a [ColumnMeta],
        partition_columns: &'a [String],
        bucket_spec: Option<&'a BucketSpec>,
    ) -> Self {
        let data_columns = columns
            .iter()
            .filter(|c| !partition_columns.contains(&c.name))
            .map(|c| (c.name.as_str(), &c.ty, c.nullable))
            .collect();
        ExpectedLayout { data_columns, partition_columns, bucket_spec }
    }
}

/// Every data file under `location`, checked against the table's columns, partitioning and
/// buckets.
pub fn discover(location: &Path, expected: &ExpectedLayout<'_>) -> Result<Vec<DataFile>, SqlError> {
    let mut found = Vec::new();
    collect(location, location, expected.partition_columns, 0, &mut found)?;
    found.sort();
    found.into_iter().map(|(path, partition)| describe(location, &path, partition, expected)).collect()
}

fn collect(
    root: &Path,
    dir: &Path,
    partition_columns: &[String],
    depth: usize,
    found: &mut Vec<(PathBuf, String)>,
) -> Result<(), SqlError> {
    if !dir.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if is_hidden(&name) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            let expected = partition_columns.get(depth).ok_or_else(|| {
                SqlError::invalid_parameter(format!(
                    "{} is a directory, but the table has no partition level for it",
                    path.display()
                ))
            })?;
            let column = name.split_once('=').map(|(c, _)| c.to_lowercase());
            if column.as_deref() != Some(expected.as_str()) {
                return Err(SqlError::invalid_parameter(format!(
                    "directory {} is not a partition of column {expected} (expected {expected}=value)",
                    path.display()
                )));
            }
            collect(root, &path, partition_columns, depth + 1, found)?;
        } else if depth == partition_columns.len() {
            let partition = dir.strip_prefix(root).unwrap_or(Path::new("")).to_string_lossy().to_string();
            found.push((path, partition));
        } else {
            return Err(SqlError::invalid_parameter(format!(
                "data file {} lies outside the partition directories",
                path.display()
            )));
        }
    }
    Ok(())
}

fn describe(
    location: &Path,
    path: &Path,
    partition: String,
    expected: &ExpectedLayout<'_>,
) -> Result<DataFile, SqlError> {
    let relative = path.strip_prefix(location).unwrap_or(path).to_string_lossy().to_string();
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let bucket = match expected.bucket_spec {
        None => None,
        Some(spec) => {
            let id = bucket_id_of(&name).ok_or_else(|| {
                SqlError::invalid_parameter(format!("INVALID_BUCKET_FILE: invalid bucket file {}", path.display()))
            })?;
            if id >= spec.num_buckets {
                return Err(SqlError::invalid_parameter(format!(
                    "bucket file {} names bucket {id}, but the table has {} buckets",
                    path.display(),
                    spec.num_buckets
                )));
            }
            Some(id)
        }
    };
    let reader = open(path)?;
    let schema = arrow_schema(&reader)?;
    for (column, declared, nullable) in &expected.data_columns {
        // A file written before a column was added reads it as NULL, as Spark's reader does.
        let Some(field) = schema.fields().iter().find(|f| f.name().eq_ignore_ascii_case(column)) else {
            if *nullable {
                continue;
            }
            return Err(SqlError::undefined_column(format!(
                "column {column} is missing from data file {}, and may not be NULL",
                path.display()
            )));
        };
        // A column read as another type than it was written hashes differently, so a shuffled
        // side would no longer meet the rows in the files' buckets.
        let stored = SparkType::from_arrow(field.data_type());
        if !stored.as_ref().is_ok_and(|stored| same_values(stored, declared)) {
            let stored = stored.map_or_else(|_| field.data_type().to_string(), |t| t.as_str().to_string());
            return Err(SqlError::datatype_mismatch(format!(
                "column {column} is declared {} but data file {} stores it as {stored}",
                declared.as_str(),
                path.display()
            )));
        }
    }
    let row_count = reader.metadata().file_metadata().num_rows() as u64;
    let byte_size = std::fs::metadata(path)?.len();
    Ok(DataFile { path: relative, partition, bucket, row_count, byte_size })
}

/// Whether a column stored as `stored` reads as `declared` unchanged. Timestamps written
/// as Parquet's INT96 (Spark's default) carry no time zone, so either timestamp type is
/// accepted for them; both hold microseconds and hash alike.
fn same_values(stored: &SparkType, declared: &SparkType) -> bool {
    let timestamp = |t: &SparkType| matches!(t.as_str(), "timestamp" | "timestamp_ntz");
    stored == declared || (timestamp(stored) && timestamp(declared))
}

pub(super) fn open(path: &Path) -> Result<SerializedFileReader<std::fs::File>, SqlError> {
    let file = std::fs::File::open(path)?;
    SerializedFileReader::new(file)
        .map_err(|e| SqlError::invalid_parameter(format!("{} is not a Parquet file: {e}", path.display())))
}

pub(super) fn arrow_schema(reader: &SerializedFileReader<std::fs::File>) -> Result<SchemaRef, SqlError> {
    let metadata = reader.metadata().file_metadata();
    let schema = parquet_to_arrow_schema(metadata.schema_descr(), metadata.key_value_metadata())?;
    Ok(std::sync::Arc::new(schema))
}

/// The Arrow schema of the first data file under `location`, for tables created over files
/// without a column list.
pub fn first_file_schema(location: &Path, partition_columns: &[String]) -> Result<Option<SchemaRef>, SqlError> {
    let mut found = Vec::new();
    collect(location, location, partition_columns, 0, &mut found)?;
    found.sort();
    found.first().map(|(path, _)| arrow_schema(&open(path)?)).transpose()
}

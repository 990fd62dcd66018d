//! Registers a directory written by someone else (Spark's `bucketBy`, most often) as a
//! table's committed files: Hive partition directories are read from the paths, bucket ids
//! from the file names (as Spark's `BucketingUtils.getBucketId` reads them), row counts from
//! the Parquet footers. On object storage the listing is the objects under the location's
//! prefix, and each footer is read with a range request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataReader};
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use super::file_naming::bucket_id_of;
use super::object_stores::{ObjectStores, object_error, object_path};
use crate::catalog::location::{Location, ObjectLocation};
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
pub async fn discover(
    location: &Location,
    expected: &ExpectedLayout<'_>,
    stores: &ObjectStores,
) -> Result<Vec<DataFile>, SqlError> {
    match location {
        Location::Local(dir) => discover_in(dir, expected),
        Location::Object(prefix) => {
            let store = stores.store(prefix)?;
            let mut found = Vec::new();
            for (object, size, partition) in list_objects(&store, prefix, expected.partition_columns).await? {
                let footer = footer(&store, &object, size).await?;
                let name = object.key.rsplit('/').next().unwrap_or_default();
                let bucket = bucket_of(name, &Location::Object(object.clone()), expected)?;
                check_columns(&Location::Object(object.clone()), &schema_of(footer.file_metadata())?, expected)?;
                let relative = relative_key(&object, prefix).to_string();
                let row_count = footer.file_metadata().num_rows() as u64;
                found.push(DataFile { path: relative, partition, bucket, row_count, byte_size: size });
            }
            Ok(found)
        }
    }
}

/// Whether anything lives at `location` already: a directory with entries, or objects under
/// the prefix.
pub async fn is_occupied(location: &Location, stores: &ObjectStores) -> Result<bool, SqlError> {
    match location {
        Location::Local(dir) => Ok(std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())),
        Location::Object(prefix) => {
            let store = stores.store(prefix)?;
            let mut listed = store.list(Some(&object_path(prefix)?));
            Ok(listed.try_next().await.map_err(|e| object_error("list", prefix, e))?.is_some())
        }
    }
}

/// `object`'s key below `prefix`.
fn relative_key<'a>(object: &'a ObjectLocation, prefix: &ObjectLocation) -> &'a str {
    object.key.strip_prefix(prefix.key.as_str()).unwrap_or(&object.key).trim_start_matches('/')
}

/// The data objects under `prefix`, sorted, with their sizes and partition directories; the
/// same names are skipped, and the same directories refused, as on a file system.
async fn list_objects(
    store: &Arc<dyn ObjectStore>,
    prefix: &ObjectLocation,
    partition_columns: &[String],
) -> Result<Vec<(ObjectLocation, u64, String)>, SqlError> {
    let listed: Vec<_> =
        store.list(Some(&object_path(prefix)?)).try_collect().await.map_err(|e| object_error("list", prefix, e))?;
    let mut found = Vec::new();
    for meta in listed {
        let key = meta.location.to_string();
        let object = ObjectLocation { bucket: prefix.bucket.clone(), key: key.clone() };
        let relative = relative_key(&object, prefix).to_string();
        let segments: Vec<&str> = relative.split('/').collect();
        let Some((name, dirs)) = segments.split_last() else { continue };
        // Empty objects are no data files: among them the directory markers some tools put
        // in a bucket (`dir/`, Hadoop's `dir_$folder$`).
        if meta.size == 0 || name.is_empty() || segments.iter().any(|segment| is_hidden(segment)) {
            continue;
        }
        for (depth, dir) in dirs.iter().enumerate() {
            check_partition_dir(dir, depth, partition_columns, &prefix.key)?;
        }
        if dirs.len() != partition_columns.len() {
            return Err(outside_partitions(&format!("s3://{}/{key}", prefix.bucket)));
        }
        found.push((object, meta.size, dirs.join("/")));
    }
    found.sort();
    Ok(found)
}

/// How much of an object's end a footer read asks for first: most footers fit.
const FOOTER_GUESS: u64 = 64 << 10;

/// The footer of the object `object` of `size` bytes: its end, read with one range request
/// (two when the footer is larger than the first guess).
pub(super) async fn footer(
    store: &Arc<dyn ObjectStore>,
    object: &ObjectLocation,
    size: u64,
) -> Result<ParquetMetaData, SqlError> {
    let path = object_path(object)?;
    let not_parquet = |e: ParquetError| {
        SqlError::invalid_parameter(format!("s3://{}/{} is not a Parquet file: {e}", object.bucket, object.key))
    };
    let mut reader = ParquetMetaDataReader::new();
    let mut tail = size.min(FOOTER_GUESS);
    loop {
        let bytes = store.get_range(&path, size - tail..size).await.map_err(|e| object_error("read", object, e))?;
        match reader.try_parse_sized(&bytes, size) {
            Ok(()) => break,
            Err(ParquetError::NeedMoreData(needed)) if (needed as u64) > tail => tail = needed as u64,
            Err(e) => return Err(not_parquet(e)),
        }
    }
    reader.finish().map_err(not_parquet)
}

fn discover_in(location: &Path, expected: &ExpectedLayout<'_>) -> Result<Vec<DataFile>, SqlError> {
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
            check_partition_dir(&name, depth, partition_columns, &dir.display().to_string())?;
            collect(root, &path, partition_columns, depth + 1, found)?;
        } else if depth == partition_columns.len() {
            let partition = dir.strip_prefix(root).unwrap_or(Path::new("")).to_string_lossy().to_string();
            found.push((path, partition));
        } else {
            return Err(outside_partitions(&path.display().to_string()));
        }
    }
    Ok(())
}

/// A directory `name` at `depth` below a table's location (in `parent`) must be a partition
/// directory of the partition column of that level: `column=value`.
fn check_partition_dir(name: &str, depth: usize, partition_columns: &[String], parent: &str) -> Result<(), SqlError> {
    let expected = partition_columns.get(depth).ok_or_else(|| {
        SqlError::invalid_parameter(format!(
            "{parent}/{name} is a directory, but the table has no partition level for it"
        ))
    })?;
    let column = name.split_once('=').map(|(c, _)| c.to_lowercase());
    if column.as_deref() != Some(expected.as_str()) {
        return Err(SqlError::invalid_parameter(format!(
            "directory {parent}/{name} is not a partition of column {expected} (expected {expected}=value)"
        )));
    }
    Ok(())
}

fn outside_partitions(file: &str) -> SqlError {
    SqlError::invalid_parameter(format!("data file {file} lies outside the partition directories"))
}

fn describe(
    location: &Path,
    path: &Path,
    partition: String,
    expected: &ExpectedLayout<'_>,
) -> Result<DataFile, SqlError> {
    let relative = path.strip_prefix(location).unwrap_or(path).to_string_lossy().to_string();
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let file = Location::Local(path.to_path_buf());
    let bucket = bucket_of(&name, &file, expected)?;
    let reader = open(path)?;
    check_columns(&file, &schema_of(reader.metadata().file_metadata())?, expected)?;
    let row_count = reader.metadata().file_metadata().num_rows() as u64;
    let byte_size = std::fs::metadata(path)?.len();
    Ok(DataFile { path: relative, partition, bucket, row_count, byte_size })
}

/// The bucket a file's name gives, which must be one of the table's; `None` for a table
/// without buckets.
fn bucket_of(name: &str, file: &Location, expected: &ExpectedLayout<'_>) -> Result<Option<u32>, SqlError> {
    let Some(spec) = expected.bucket_spec else { return Ok(None) };
    let id = bucket_id_of(name)
        .ok_or_else(|| SqlError::invalid_parameter(format!("INVALID_BUCKET_FILE: invalid bucket file {file}")))?;
    if id >= spec.num_buckets {
        return Err(SqlError::invalid_parameter(format!(
            "bucket file {file} names bucket {id}, but the table has {} buckets",
            spec.num_buckets
        )));
    }
    Ok(Some(id))
}

/// Every declared data column is stored in `file` (whose columns are `schema`) as its type,
/// or missing and nullable.
fn check_columns(file: &Location, schema: &SchemaRef, expected: &ExpectedLayout<'_>) -> Result<(), SqlError> {
    for (column, declared, nullable) in &expected.data_columns {
        // A file written before a column was added reads it as NULL, as Spark's reader does.
        let Some(field) = schema.fields().iter().find(|f| f.name().eq_ignore_ascii_case(column)) else {
            if *nullable {
                continue;
            }
            return Err(SqlError::undefined_column(format!(
                "column {column} is missing from data file {file}, and may not be NULL"
            )));
        };
        // A column read as another type than it was written hashes differently, so a shuffled
        // side would no longer meet the rows in the files' buckets.
        let stored = SparkType::from_arrow(field.data_type());
        if !stored.as_ref().is_ok_and(|stored| same_values(stored, declared)) {
            let stored = stored.map_or_else(|_| field.data_type().to_string(), |t| t.as_str().to_string());
            return Err(SqlError::datatype_mismatch(format!(
                "column {column} is declared {} but data file {file} stores it as {stored}",
                declared.as_str()
            )));
        }
    }
    Ok(())
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

pub(super) fn schema_of(metadata: &FileMetaData) -> Result<SchemaRef, SqlError> {
    let schema = parquet_to_arrow_schema(metadata.schema_descr(), metadata.key_value_metadata())?;
    Ok(std::sync::Arc::new(schema))
}

/// The Arrow schema of the first data file under `location`, for tables created over files
/// without a column list.
pub async fn first_file_schema(
    location: &Location,
    partition_columns: &[String],
    stores: &ObjectStores,
) -> Result<Option<SchemaRef>, SqlError> {
    match location {
        Location::Local(dir) => {
            let mut found = Vec::new();
            collect(dir, dir, partition_columns, 0, &mut found)?;
            found.sort();
            found.first().map(|(path, _)| schema_of(open(path)?.metadata().file_metadata())).transpose()
        }
        Location::Object(prefix) => {
            let store = stores.store(prefix)?;
            let first = list_objects(&store, prefix, partition_columns).await?.into_iter().next();
            match first {
                Some((object, size, _)) => Ok(Some(schema_of(footer(&store, &object, size).await?.file_metadata())?)),
                None => Ok(None),
            }
        }
    }
}

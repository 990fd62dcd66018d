//! The SQLite metastore: what exists (schemas, tables, columns) and which files each table
//! holds. A write is visible exactly when its file list commits here, in one transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::migrations;
use super::types::SparkType;
use crate::error::SqlError;

pub const DEFAULT_SCHEMA: &str = "default";

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
    pub location: PathBuf,
    pub external: bool,
    pub comment: Option<String>,
    pub created_at: i64,
    pub version: i64,
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
    pub fn file_path(&self, file: &DataFile) -> PathBuf {
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
    pub location: PathBuf,
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

pub struct Metastore {
    conn: Mutex<Connection>,
}

impl Metastore {
    pub fn open(path: &Path) -> Result<Self, SqlError> {
        let mut conn = Connection::open(path)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        migrations::migrate(&mut conn)?;
        Ok(Metastore { conn: Mutex::new(conn) })
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, SqlError>) -> Result<T, SqlError> {
        let mut conn = self.conn.lock().map_err(|_| SqlError::internal("metastore lock poisoned"))?;
        f(&mut conn)
    }

    fn in_transaction<T>(&self, f: impl FnOnce(&Transaction) -> Result<T, SqlError>) -> Result<T, SqlError> {
        self.with_conn(|conn| {
            let tx = conn.transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    pub fn schema_exists(&self, schema: &str) -> Result<bool, SqlError> {
        self.with_conn(|conn| {
            Ok(conn.query_row("SELECT 1 FROM schemas WHERE name = ?1", [schema], |_| Ok(())).optional()?.is_some())
        })
    }

    pub fn schema_names(&self) -> Result<Vec<String>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT name FROM schemas ORDER BY name")?;
            let names = stmt.query_map([], |row| row.get(0))?.collect::<Result<_, _>>()?;
            Ok(names)
        })
    }

    pub fn table_names(&self, schema: &str) -> Result<Vec<String>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT name FROM tables WHERE schema_name = ?1 ORDER BY name")?;
            let names = stmt.query_map([schema], |row| row.get(0))?.collect::<Result<_, _>>()?;
            Ok(names)
        })
    }

    /// The table's latest committed version, or `None` if it does not exist.
    pub fn table(&self, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
        self.with_conn(|conn| {
            let tx = conn.transaction()?;
            let meta = load_table(&tx, schema, name)?;
            tx.commit()?;
            Ok(meta)
        })
    }

    /// Every table's location, for startup recovery.
    pub fn table_locations(&self) -> Result<Vec<PathBuf>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT location FROM tables")?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))?
                .map(|r| r.map(PathBuf::from))
                .collect::<Result<_, _>>()?;
            Ok(rows)
        })
    }

    /// Creates a table, with the files of its first write (CTAS) in the same transaction so
    /// that a failed CTAS leaves no table behind.
    pub fn create_table(&self, table: &NewTable, files: &[DataFile]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            if !schema_exists(tx, &table.schema)? {
                return Err(SqlError::undefined_schema(format!("schema \"{}\" does not exist", table.schema)));
            }
            if load_table_id(tx, &table.schema, &table.name)?.is_some() {
                return Err(SqlError::duplicate_table(format!(
                    "relation \"{}.{}\" already exists",
                    table.schema, table.name
                )));
            }
            tx.execute(
                "INSERT INTO tables (schema_name, name, provider, location, is_external, comment, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, CAST(strftime('%s', 'now') AS INTEGER))",
                params![
                    table.schema,
                    table.name,
                    table.provider,
                    table.location.to_string_lossy(),
                    table.external,
                    table.comment
                ],
            )?;
            let id = tx.last_insert_rowid();
            if let Some(spec) = &table.bucket_spec {
                tx.execute(
                    "UPDATE tables SET num_buckets = ?2, bucket_hash = ?3, bucket_hash_version = ?4 WHERE id = ?1",
                    params![id, spec.num_buckets, BUCKET_HASH, BUCKET_HASH_VERSION],
                )?;
            }
            let index_in = |names: &[String], column: &str| names.iter().position(|n| n == column).map(|i| i as i64);
            let (bucket_columns, sort_columns) = match &table.bucket_spec {
                Some(spec) => (spec.bucket_columns.as_slice(), spec.sort_columns.as_slice()),
                None => (&[][..], &[][..]),
            };
            for (position, column) in table.columns.iter().enumerate() {
                tx.execute(
                    "INSERT INTO columns (table_id, position, name, data_type, nullable, comment,
                                          partition_index, bucket_index, sort_index)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        id,
                        position as i64,
                        column.name,
                        column.ty.as_str(),
                        column.nullable,
                        column.comment,
                        index_in(&table.partition_columns, &column.name),
                        index_in(bucket_columns, &column.name),
                        index_in(sort_columns, &column.name)
                    ],
                )?;
            }
            for (key, value) in &table.properties {
                tx.execute(
                    "INSERT INTO table_properties (table_id, key, value) VALUES (?1, ?2, ?3)",
                    params![id, key, value],
                )?;
            }
            commit_files(tx, id, &table.location, WriteMode::Append, files)?;
            Ok(())
        })
    }

    /// Removes a table. Returns its metadata so the caller can retire managed files.
    pub fn drop_table(&self, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
        self.in_transaction(|tx| {
            let Some(meta) = load_table(tx, schema, name)? else {
                return Ok(None);
            };
            if !meta.external {
                for file in &meta.files {
                    retire(tx, meta.id, &meta.file_path(file))?;
                }
            }
            tx.execute("DELETE FROM tables WHERE id = ?1", [meta.id])?;
            Ok(Some(meta))
        })
    }

    /// Records files about to be moved into a table directory, before they are moved.
    pub fn add_pending(&self, paths: &[PathBuf]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                tx.execute("INSERT OR IGNORE INTO pending_files (path) VALUES (?1)", [path.to_string_lossy()])?;
            }
            Ok(())
        })
    }

    /// Forgets pending files whose write failed after their removal.
    pub fn clear_pending(&self, paths: &[PathBuf]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                tx.execute("DELETE FROM pending_files WHERE path = ?1", [path.to_string_lossy()])?;
            }
            Ok(())
        })
    }

    /// Commits a write: its files join the table (replacing every file on overwrite), the
    /// pending records go, and the table version moves on.
    pub fn commit_write(&self, table_id: i64, mode: WriteMode, files: &[DataFile]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            let location: Option<String> =
                tx.query_row("SELECT location FROM tables WHERE id = ?1", [table_id], |row| row.get(0)).optional()?;
            let Some(location) = location else {
                return Err(SqlError::undefined_table("the table was dropped while the write ran"));
            };
            commit_files(tx, table_id, Path::new(&location), mode, files)
        })
    }

    /// Commits a rewrite of some of a table's files (`OPTIMIZE`): `replaced` leave the table
    /// and `files` join it in one transaction. Fails, changing nothing, when a replaced file
    /// is no longer in the table because a concurrent write replaced it first.
    pub fn commit_rewrite(&self, table_id: i64, replaced: &[DataFile], files: &[DataFile]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            let location: String =
                tx.query_row("SELECT location FROM tables WHERE id = ?1", [table_id], |row| row.get(0))?;
            for file in replaced {
                let removed = tx.execute(
                    "DELETE FROM data_files WHERE table_id = ?1 AND path = ?2",
                    params![table_id, file.path],
                )?;
                if removed == 0 {
                    return Err(SqlError::new(
                        "40001",
                        "the table changed while it was being rewritten; run the statement again",
                    ));
                }
                retire(tx, table_id, &Path::new(&location).join(&file.path))?;
            }
            commit_files(tx, table_id, Path::new(&location), WriteMode::Append, files)
        })
    }

    /// Makes an external table's file list what its directory holds (`REFRESH TABLE`, `MSCK
    /// REPAIR TABLE`): `found` is every data file found there while the table was at version
    /// `read_at`. Files of partitions that `repair` leaves unregistered stay out; listed files
    /// that were not found leave the list and are not deleted (another engine owns them).
    /// Files a running write has moved in but not committed yet, and files an overwrite
    /// retired, are not the table's and stay out. Fails with 40001, changing nothing, when a
    /// write committed since `read_at` (its files may have arrived after the directory was read).
    pub fn resync_files(
        &self,
        table_id: i64,
        read_at: i64,
        found: &[DataFile],
        repair: PartitionRepair,
    ) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            let table: Option<(String, i64)> = tx
                .query_row("SELECT location, version FROM tables WHERE id = ?1", [table_id], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()?;
            let Some((location, version)) = table else {
                return Err(SqlError::undefined_table("the table was dropped while its directory was read"));
            };
            if version != read_at {
                return Err(SqlError::new(
                    "40001",
                    "the table changed while its directory was read; run the statement again",
                ));
            }
            let mut stmt = tx.prepare("SELECT path FROM partitions WHERE table_id = ?1")?;
            let known: BTreeSet<String> = stmt.query_map([table_id], |row| row.get(0))?.collect::<Result<_, _>>()?;
            let on_disk: BTreeSet<String> =
                found.iter().filter(|f| !f.partition.is_empty()).map(|f| f.partition.clone()).collect();
            let registered: BTreeSet<String> = match repair {
                PartitionRepair::Add => known.union(&on_disk).cloned().collect(),
                PartitionRepair::Drop => known.intersection(&on_disk).cloned().collect(),
                PartitionRepair::Sync => on_disk,
            };
            tx.execute("DELETE FROM data_files WHERE table_id = ?1", [table_id])?;
            tx.execute("DELETE FROM partitions WHERE table_id = ?1", [table_id])?;
            for partition in &registered {
                tx.execute("INSERT INTO partitions (table_id, path) VALUES (?1, ?2)", params![table_id, partition])?;
            }
            let mut not_committed = tx.prepare(
                "SELECT EXISTS (SELECT 1 FROM pending_files WHERE path = ?1)
                     OR EXISTS (SELECT 1 FROM retired_files WHERE path = ?1)",
            )?;
            for file in found {
                let absolute = Path::new(&location).join(&file.path);
                if (!file.partition.is_empty() && !registered.contains(&file.partition))
                    || not_committed.query_row([absolute.to_string_lossy()], |row| row.get::<_, bool>(0))?
                {
                    continue;
                }
                tx.execute(
                    "INSERT INTO data_files (table_id, path, partition_path, bucket_id, row_count, byte_size)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        table_id,
                        file.path,
                        file.partition,
                        file.bucket,
                        file.row_count as i64,
                        file.byte_size as i64
                    ],
                )?;
            }
            new_version(tx, table_id)
        })
    }

    /// Sets table properties (`ALTER TABLE .. SET TBLPROPERTIES`).
    pub fn set_properties(&self, table_id: i64, properties: &[(&str, String)]) -> Result<(), SqlError> {
        self.in_transaction(|tx| set_properties(tx, table_id, properties))
    }

    /// Stores statistics computed from the table at `version`; fails with 40001, storing
    /// nothing, when a write has committed since (its commit dropped the statistics, and these
    /// would describe the table before it).
    pub fn set_statistics(&self, table_id: i64, version: i64, statistics: &[(&str, String)]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            let current: i64 =
                tx.query_row("SELECT version FROM tables WHERE id = ?1", [table_id], |row| row.get(0))?;
            if current != version {
                return Err(SqlError::new("40001", "the table changed while it was analyzed; run the statement again"));
            }
            set_properties(tx, table_id, statistics)
        })
    }

    /// Removes table properties; keys the table does not have are ignored.
    pub fn unset_properties(&self, table_id: i64, keys: &[String]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for key in keys {
                tx.execute("DELETE FROM table_properties WHERE table_id = ?1 AND key = ?2", params![table_id, key])?;
            }
            Ok(())
        })
    }

    pub fn pending_files(&self) -> Result<Vec<PathBuf>, SqlError> {
        self.paths_in("SELECT path FROM pending_files")
    }

    pub fn retired_files(&self) -> Result<Vec<PathBuf>, SqlError> {
        self.paths_in("SELECT path FROM retired_files")
    }

    fn paths_in(&self, query: &str) -> Result<Vec<PathBuf>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare(query)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))?
                .map(|r| r.map(PathBuf::from))
                .collect::<Result<_, _>>()?;
            Ok(rows)
        })
    }

    /// Forgets pending or retired records whose files are gone.
    pub fn forget_files(&self, paths: &[PathBuf]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                let path = path.to_string_lossy();
                tx.execute("DELETE FROM pending_files WHERE path = ?1", [&path])?;
                tx.execute("DELETE FROM retired_files WHERE path = ?1", [&path])?;
            }
            Ok(())
        })
    }
}

fn schema_exists(tx: &Transaction, schema: &str) -> Result<bool, SqlError> {
    Ok(tx.query_row("SELECT 1 FROM schemas WHERE name = ?1", [schema], |_| Ok(())).optional()?.is_some())
}

fn load_table_id(tx: &Transaction, schema: &str, name: &str) -> Result<Option<i64>, SqlError> {
    Ok(tx
        .query_row("SELECT id FROM tables WHERE schema_name = ?1 AND name = ?2", [schema, name], |row| row.get(0))
        .optional()?)
}

fn load_table(tx: &Transaction, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
    let row = tx
        .query_row(
            "SELECT id, provider, location, is_external, comment, created_at, version, num_buckets
             FROM tables WHERE schema_name = ?1 AND name = ?2",
            [schema, name],
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, bool>(3)?,
                    row.get::<_, Option<String>>(4)?,
                    row.get::<_, i64>(5)?,
                    row.get::<_, i64>(6)?,
                    row.get::<_, Option<u32>>(7)?,
                ))
            },
        )
        .optional()?;
    let Some((id, provider, location, external, comment, created_at, version, num_buckets)) = row else {
        return Ok(None);
    };

    let mut stmt = tx.prepare(
        "SELECT name, data_type, nullable, comment, partition_index, bucket_index, sort_index
         FROM columns WHERE table_id = ?1 ORDER BY position",
    )?;
    let mut columns = Vec::new();
    let (mut partition_columns, mut bucket_columns, mut sort_columns) = (Vec::new(), Vec::new(), Vec::new());
    let rows = stmt.query_map([id], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, bool>(2)?,
            row.get::<_, Option<String>>(3)?,
            [row.get::<_, Option<i64>>(4)?, row.get::<_, Option<i64>>(5)?, row.get::<_, Option<i64>>(6)?],
        ))
    })?;
    for row in rows {
        let (name, ty, nullable, comment, roles) = row?;
        for (index, names) in roles.into_iter().zip([&mut partition_columns, &mut bucket_columns, &mut sort_columns]) {
            if let Some(index) = index {
                names.push((index, name.clone()));
            }
        }
        columns.push(ColumnMeta { name, ty: SparkType::parse(&ty)?, nullable, comment });
    }
    let in_order = |mut named: Vec<(i64, String)>| -> Vec<String> {
        named.sort();
        named.into_iter().map(|(_, n)| n).collect()
    };
    let partition_columns = in_order(partition_columns);
    let bucket_spec = num_buckets.map(|num_buckets| BucketSpec {
        num_buckets,
        bucket_columns: in_order(bucket_columns),
        sort_columns: in_order(sort_columns),
    });

    let mut stmt = tx.prepare("SELECT key, value FROM table_properties WHERE table_id = ?1")?;
    let properties =
        stmt.query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<BTreeMap<_, _>, _>>()?;

    let mut stmt = tx.prepare(
        "SELECT path, partition_path, bucket_id, row_count, byte_size FROM data_files WHERE table_id = ?1 ORDER BY path",
    )?;
    let files = stmt
        .query_map([id], |row| {
            Ok(DataFile {
                path: row.get(0)?,
                partition: row.get(1)?,
                bucket: row.get(2)?,
                row_count: row.get::<_, i64>(3)? as u64,
                byte_size: row.get::<_, i64>(4)? as u64,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;

    let mut stmt = tx.prepare("SELECT path FROM partitions WHERE table_id = ?1 ORDER BY path")?;
    let partitions = stmt.query_map([id], |row| row.get(0))?.collect::<Result<Vec<String>, _>>()?;

    Ok(Some(TableMeta {
        id,
        schema: schema.to_string(),
        name: name.to_string(),
        provider,
        location: PathBuf::from(location),
        external,
        comment,
        created_at,
        version,
        columns,
        partition_columns,
        bucket_spec,
        properties,
        files,
        partitions,
    }))
}

/// Marks a file that table `owner` no longer lists for deletion, unless another table
/// still lists it: external tables over one directory share its files, and `INSERT
/// OVERWRITE` or `DROP TABLE` on one must not delete the others' rows.
fn retire(tx: &Transaction, owner: i64, path: &Path) -> Result<(), SqlError> {
    let path = path.to_string_lossy();
    let shared: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM data_files f JOIN tables t ON t.id = f.table_id
                        WHERE f.table_id != ?1 AND t.location || '/' || f.path = ?2)",
        params![owner, path],
        |row| row.get(0),
    )?;
    if !shared {
        tx.execute("INSERT OR IGNORE INTO retired_files (path) VALUES (?1)", [path])?;
    }
    Ok(())
}

fn commit_files(
    tx: &Transaction,
    table_id: i64,
    location: &Path,
    mode: WriteMode,
    files: &[DataFile],
) -> Result<(), SqlError> {
    let written: Vec<&str> = files.iter().map(|f| f.partition.as_str()).collect();
    let is_replaced = |partition: &str| match &mode {
        WriteMode::Append => false,
        WriteMode::Overwrite => true,
        WriteMode::OverwritePartitions => written.contains(&partition),
        WriteMode::OverwriteUnder(directory) => {
            partition.strip_prefix(directory.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        }
    };
    if mode != WriteMode::Append {
        let mut stmt = tx.prepare("SELECT path FROM partitions WHERE table_id = ?1")?;
        let partitions: Vec<String> = stmt.query_map([table_id], |row| row.get(0))?.collect::<Result<_, _>>()?;
        for partition in partitions.iter().filter(|p| is_replaced(p)) {
            tx.execute("DELETE FROM partitions WHERE table_id = ?1 AND path = ?2", params![table_id, partition])?;
        }
        let mut stmt = tx.prepare("SELECT path, partition_path FROM data_files WHERE table_id = ?1")?;
        let old: Vec<(String, String)> =
            stmt.query_map([table_id], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<_, _>>()?;
        for (path, partition) in old {
            if is_replaced(&partition) {
                retire(tx, table_id, &location.join(&path))?;
                tx.execute("DELETE FROM data_files WHERE table_id = ?1 AND path = ?2", params![table_id, path])?;
            }
        }
    }
    for file in files {
        tx.execute(
            "INSERT INTO data_files (table_id, path, partition_path, bucket_id, row_count, byte_size)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![table_id, file.path, file.partition, file.bucket, file.row_count as i64, file.byte_size as i64],
        )?;
        if !file.partition.is_empty() {
            tx.execute(
                "INSERT OR IGNORE INTO partitions (table_id, path) VALUES (?1, ?2)",
                params![table_id, file.partition],
            )?;
        }
        tx.execute("DELETE FROM pending_files WHERE path = ?1", [location.join(&file.path).to_string_lossy()])?;
    }
    new_version(tx, table_id)
}

fn set_properties(tx: &Transaction, table_id: i64, properties: &[(&str, String)]) -> Result<(), SqlError> {
    for (key, value) in properties {
        tx.execute(
            "INSERT INTO table_properties (table_id, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (table_id, key) DO UPDATE SET value = excluded.value",
            params![table_id, key, value],
        )?;
    }
    Ok(())
}

/// A committed change of a table's files: its version moves on and its statistics go, as
/// Spark drops a table's statistics after a write
/// (`spark.sql.statistics.size.autoUpdate.enabled=false`), so that no plan uses stale ones.
fn new_version(tx: &Transaction, table_id: i64) -> Result<(), SqlError> {
    tx.execute("UPDATE tables SET version = version + 1 WHERE id = ?1", [table_id])?;
    tx.execute(
        "DELETE FROM table_properties WHERE table_id = ?1 AND substr(key, 1, length(?2)) = ?2",
        params![table_id, STATISTICS_PREFIX],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_table(name: &str) -> NewTable {
        NewTable {
            schema: DEFAULT_SCHEMA.into(),
            name: name.into(),
            provider: "parquet".into(),
            location: PathBuf::from("/warehouse/default").join(name),
            external: false,
            comment: None,
            columns: vec![ColumnMeta {
                name: "a".into(),
                ty: SparkType::parse("bigint").unwrap(),
                nullable: true,
                comment: None,
            }],
            partition_columns: vec![],
            bucket_spec: None,
            properties: BTreeMap::new(),
        }
    }

    fn file(path: &str, rows: u64) -> DataFile {
        DataFile { path: path.into(), partition: String::new(), bucket: None, row_count: rows, byte_size: 100 }
    }

    #[test]
    fn tables_keep_columns_and_committed_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        store.create_table(&new_table("t"), &[file("a.parquet", 2)]).unwrap();
        let err = store.create_table(&new_table("t"), &[]).unwrap_err();
        assert_eq!(err.code, "42P07");

        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.columns[0].ty.as_str(), "bigint");
        assert_eq!(t.files, vec![file("a.parquet", 2)]);

        store.commit_write(t.id, WriteMode::Append, &[file("b.parquet", 3)]).unwrap();
        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.files.len(), 2);
        assert_eq!(t.version, 2);

        store.commit_write(t.id, WriteMode::Overwrite, &[file("c.parquet", 1)]).unwrap();
        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.files, vec![file("c.parquet", 1)]);
        let retired = store.retired_files().unwrap();
        assert_eq!(retired.len(), 2, "{retired:?}");

        assert!(store.drop_table("default", "t").unwrap().is_some());
        assert!(store.table("default", "t").unwrap().is_none());
        assert_eq!(store.retired_files().unwrap().len(), 3);
    }

    #[test]
    fn files_another_table_lists_are_not_retired() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        let shared = |name: &str| NewTable { location: PathBuf::from("/lake/tx"), external: true, ..new_table(name) };
        store.create_table(&shared("writer"), &[file("a.parquet", 2)]).unwrap();
        store.create_table(&shared("reader"), &[file("a.parquet", 2)]).unwrap();
        let writer = store.table("default", "writer").unwrap().unwrap();
        store.commit_write(writer.id, WriteMode::Overwrite, &[file("b.parquet", 1)]).unwrap();
        assert_eq!(store.retired_files().unwrap(), Vec::<PathBuf>::new());
        // Once no table lists it, an overwrite retires it.
        let reader = store.table("default", "reader").unwrap().unwrap();
        store.commit_write(reader.id, WriteMode::Overwrite, &[file("c.parquet", 1)]).unwrap();
        assert_eq!(store.retired_files().unwrap(), vec![PathBuf::from("/lake/tx/a.parquet")]);
    }

    #[test]
    fn resync_lists_what_was_found_in_the_partitions_it_registers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        let in_partition = |partition: &str, name: &str| DataFile {
            path: format!("{partition}/{name}"),
            partition: partition.into(),
            ..file(name, 1)
        };
        let table = NewTable { location: PathBuf::from("/lake/ev"), external: true, ..new_table("ev") };
        store.create_table(&table, &[in_partition("d=1", "a.parquet"), in_partition("d=2", "b.parquet")]).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        // d=2 went, d=3 came, d=1 has one more file; a write's uncommitted file is not the table's.
        store.add_pending(&[PathBuf::from("/lake/ev/d=1/pending.parquet")]).unwrap();
        let found = [
            in_partition("d=1", "a.parquet"),
            in_partition("d=1", "c.parquet"),
            in_partition("d=1", "pending.parquet"),
            in_partition("d=3", "e.parquet"),
        ];
        let stale = store.resync_files(ev.id, ev.version - 1, &found, PartitionRepair::Sync).unwrap_err();
        assert_eq!(stale.code, "40001");

        store.resync_files(ev.id, ev.version, &found, PartitionRepair::Drop).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1"]);
        assert_eq!(ev.files, vec![in_partition("d=1", "a.parquet"), in_partition("d=1", "c.parquet")]);

        store.resync_files(ev.id, ev.version, &found, PartitionRepair::Add).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1", "d=3"]);
        assert_eq!(ev.files.len(), 3);

        store.resync_files(ev.id, ev.version, &found[..1], PartitionRepair::Add).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1", "d=3"], "ADD keeps partitions whose files went");
        assert_eq!(ev.files, vec![in_partition("d=1", "a.parquet")]);
        store.resync_files(ev.id, ev.version, &found[..1], PartitionRepair::Sync).unwrap();
        assert_eq!(store.table("default", "ev").unwrap().unwrap().partitions, vec!["d=1"]);
        assert_eq!(store.retired_files().unwrap(), Vec::<PathBuf>::new(), "nothing found missing is deleted");
    }

    #[test]
    fn state_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sqlite");
        Metastore::open(&path).unwrap().create_table(&new_table("kept"), &[file("x.parquet", 7)]).unwrap();
        let store = Metastore::open(&path).unwrap();
        assert_eq!(store.table_names("default").unwrap(), vec!["kept".to_string()]);
        assert_eq!(store.table("default", "kept").unwrap().unwrap().files[0].row_count, 7);
    }
}

//! The SQLite metastore: what exists (schemas, tables, columns) and which files each table
//! holds. A write is visible exactly when its file list commits here, in one transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::change::{CatalogChange, ChangeKind, TableRef};
use super::location::Location;
use super::migrations;
use super::table::{
    BUCKET_HASH, BUCKET_HASH_VERSION, BucketSpec, ColumnMeta, DataFile, NewTable, PartitionRepair, STATISTICS_PREFIX,
    TableMeta, WriteMode,
};
use super::types::SparkType;
use crate::error::SqlError;

pub const DEFAULT_SCHEMA: &str = "default";

pub struct Metastore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// The metastore as it was at one moment, for a transaction that reads one snapshot
/// (REPEATABLE READ): a connection of its own holding a SQLite read transaction open, which
/// later commits do not change.
pub struct MetastoreSnapshot {
    conn: Mutex<Connection>,
}

impl MetastoreSnapshot {
    pub fn schema_exists(&self, schema: &str) -> Result<bool, SqlError> {
        schema_exists(&*lock(&self.conn)?, schema)
    }

    pub fn schema_names(&self) -> Result<Vec<String>, SqlError> {
        schema_names(&*lock(&self.conn)?)
    }

    pub fn table_names(&self, schema: &str) -> Result<Vec<String>, SqlError> {
        table_names(&*lock(&self.conn)?, schema)
    }

    pub fn table(&self, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
        load_table(&*lock(&self.conn)?, schema, name)
    }
}

fn lock(conn: &Mutex<Connection>) -> Result<std::sync::MutexGuard<'_, Connection>, SqlError> {
    conn.lock().map_err(|_| SqlError::internal("metastore lock poisoned"))
}

impl Metastore {
    pub fn open(path: &Path) -> Result<Self, SqlError> {
        let mut conn = Connection::open(path)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        migrations::migrate(&mut conn)?;
        Ok(Metastore { path: path.to_path_buf(), conn: Mutex::new(conn) })
    }

    /// The metastore as it is now, unchanged by what commits later, for as long as the
    /// snapshot lives.
    pub fn snapshot(&self) -> Result<MetastoreSnapshot, SqlError> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // In WAL mode a read transaction's snapshot is taken at its first read.
        conn.execute_batch("BEGIN DEFERRED")?;
        conn.query_row("SELECT count(*) FROM tables", [], |row| row.get::<_, i64>(0))?;
        Ok(MetastoreSnapshot { conn: Mutex::new(conn) })
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, SqlError>) -> Result<T, SqlError> {
        f(&mut *lock(&self.conn)?)
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
        self.with_conn(|conn| schema_exists(conn, schema))
    }

    pub fn schema_names(&self) -> Result<Vec<String>, SqlError> {
        self.with_conn(|conn| schema_names(conn))
    }

    pub fn table_names(&self, schema: &str) -> Result<Vec<String>, SqlError> {
        self.with_conn(|conn| table_names(conn, schema))
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
    pub fn table_locations(&self) -> Result<Vec<Location>, SqlError> {
        self.locations_in("SELECT location FROM tables")
    }

    /// Commits `changes`, in order, in one transaction: all of them or, when one fails or
    /// conflicts with a change committed since its table was read (40001), none.
    pub fn commit(&self, changes: &[CatalogChange]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            // Conflicts are checked against the other transactions' changes, before this
            // one's own move the tables' change records on. A table this transaction renames
            // is checked under the name it had.
            let mut renamed = Vec::new();
            for change in changes {
                if let Some(table) = change.table_ref()
                    && !renamed.contains(&(table.schema.as_str(), table.name.as_str()))
                {
                    check_conflicts(tx, table, change.kind())?;
                }
                renamed.extend(change.renamed_to());
            }
            for change in changes {
                apply(tx, change)?;
            }
            Ok(())
        })
    }

    /// Records files about to be moved into a table directory, before they are moved.
    pub fn add_pending(&self, paths: &[Location]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                tx.execute("INSERT OR IGNORE INTO pending_files (path) VALUES (?1)", [path.to_string()])?;
            }
            Ok(())
        })
    }

    /// Forgets pending files whose write failed after their removal.
    pub fn clear_pending(&self, paths: &[Location]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                tx.execute("DELETE FROM pending_files WHERE path = ?1", [path.to_string()])?;
            }
            Ok(())
        })
    }
    pub fn pending_files(&self) -> Result<Vec<Location>, SqlError> {
        self.locations_in("SELECT path FROM pending_files")
    }

    /// Records the multipart upload writing the pending object at `path`.
    pub fn record_upload(&self, path: &Location, upload_id: &str) -> Result<(), SqlError> {
        self.with_conn(|conn| {
            conn.execute("UPDATE pending_files SET upload_id = ?2 WHERE path = ?1", [&path.to_string(), upload_id])?;
            Ok(())
        })
    }

    /// The pending objects written by multipart uploads, with the uploads' ids.
    pub fn pending_uploads(&self) -> Result<Vec<(Location, String)>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT path, upload_id FROM pending_files WHERE upload_id IS NOT NULL")?;
            let rows: Vec<(String, String)> =
                stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<_, _>>()?;
            rows.into_iter().map(|(path, id)| Ok((Location::parse(&path)?, id))).collect()
        })
    }

    pub fn retired_files(&self) -> Result<Vec<Location>, SqlError> {
        self.locations_in("SELECT path FROM retired_files")
    }

    fn locations_in(&self, query: &str) -> Result<Vec<Location>, SqlError> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare(query)?;
            let texts: Vec<String> = stmt.query_map([], |row| row.get(0))?.collect::<Result<_, _>>()?;
            texts.iter().map(|text| Location::parse(text)).collect()
        })
    }

    /// Forgets pending or retired records whose files are gone.
    pub fn forget_files(&self, paths: &[Location]) -> Result<(), SqlError> {
        self.in_transaction(|tx| {
            for path in paths {
                let path = path.to_string();
                tx.execute("DELETE FROM pending_files WHERE path = ?1", [&path])?;
                tx.execute("DELETE FROM retired_files WHERE path = ?1", [&path])?;
            }
            Ok(())
        })
    }
}

fn schema_exists(conn: &Connection, schema: &str) -> Result<bool, SqlError> {
    Ok(conn.query_row("SELECT 1 FROM schemas WHERE name = ?1", [schema], |_| Ok(())).optional()?.is_some())
}

fn schema_names(conn: &Connection) -> Result<Vec<String>, SqlError> {
    let mut stmt = conn.prepare("SELECT name FROM schemas ORDER BY name")?;
    let names = stmt.query_map([], |row| row.get(0))?.collect::<Result<_, _>>()?;
    Ok(names)
}

fn table_names(conn: &Connection, schema: &str) -> Result<Vec<String>, SqlError> {
    let mut stmt = conn.prepare("SELECT name FROM tables WHERE schema_name = ?1 ORDER BY name")?;
    let names = stmt.query_map([schema], |row| row.get(0))?.collect::<Result<_, _>>()?;
    Ok(names)
}

/// The 40001 of a transaction that lost to one that committed first.
fn serialization_failure(detail: String) -> SqlError {
    SqlError::new("40001", format!("could not serialize access: {detail}; run the transaction again"))
}

/// Fails with 40001 when a change of a kind `kind` of `table` conflicts with one another
/// transaction committed after `table` was read, or the table was dropped since.
fn check_conflicts(tx: &Transaction, table: &TableRef, kind: ChangeKind) -> Result<(), SqlError> {
    let Some(id) = table.id else {
        // Created by this transaction: no one else has seen it.
        return Ok(());
    };
    let (schema, name) = (&table.schema, &table.name);
    match load_location(tx, schema, name)?.map(|(id, _)| id) {
        None => {
            return Err(serialization_failure(format!(
                "table {schema}.{name} was dropped by a transaction that committed first"
            )));
        }
        Some(current) if current != id => {
            return Err(serialization_failure(format!(
                "table {schema}.{name} was dropped and created again by a transaction that committed first"
            )));
        }
        Some(_) => {}
    }
    let mut stmt = tx.prepare("SELECT kind FROM table_changes WHERE table_id = ?1 AND seq > ?2")?;
    let theirs: Vec<String> = stmt.query_map(params![id, table.seen], |row| row.get(0))?.collect::<Result<_, _>>()?;
    for theirs in theirs.iter().filter_map(|k| ChangeKind::parse(k)) {
        if kind.conflicts_with(theirs) {
            return Err(serialization_failure(format!(
                "table {schema}.{name} was changed by a transaction that committed first (its {} against this {})",
                theirs.name(),
                kind.name()
            )));
        }
    }
    Ok(())
}

/// Applies one change; its table is looked up by name, so that a table created earlier in
/// the same commit is found.
fn apply(tx: &Transaction, change: &CatalogChange) -> Result<(), SqlError> {
    if let CatalogChange::CreateTable { table, files } = change {
        let id = create_table(tx, table)?;
        commit_files(tx, id, &table.location, &WriteMode::Append, files)?;
        return record_change(tx, id, change.kind());
    }
    let (schema, name) = change.target();
    let dropped =
        || serialization_failure(format!("table {schema}.{name} was dropped by a transaction that committed first"));
    let (id, location) = load_location(tx, schema, name)?.ok_or_else(dropped)?;
    match change {
        CatalogChange::CreateTable { .. } => unreachable!("created above"),
        // Dropping a table and re-reading its directory work on its whole file list.
        CatalogChange::DropTable { .. } => return drop_table(tx, &load_table(tx, schema, name)?.ok_or_else(dropped)?),
        CatalogChange::Resync { found, repair, .. } => {
            resync_files(tx, &load_table(tx, schema, name)?.ok_or_else(dropped)?, found, *repair)?
        }
        CatalogChange::Write { mode, files, .. } => commit_files(tx, id, &location, mode, files)?,
        CatalogChange::Rewrite { replaced, files, .. } => rewrite_files(tx, id, &location, replaced, files)?,
        CatalogChange::SetProperties { properties, .. }
        | CatalogChange::SetStatistics { statistics: properties, .. } => set_properties(tx, id, properties)?,
        CatalogChange::UnsetProperties { keys, .. } => {
            for key in keys {
                tx.execute("DELETE FROM table_properties WHERE table_id = ?1 AND key = ?2", params![id, key])?;
            }
        }
        CatalogChange::SetLocation { location, found, .. } => {
            tx.execute("UPDATE tables SET location = ?2 WHERE id = ?1", params![id, location.to_string()])?;
            let moved = load_table(tx, schema, name)?.ok_or_else(dropped)?;
            resync_files(tx, &moved, found, PartitionRepair::Sync)?
        }
        CatalogChange::RenameTable { to, location: new_location, .. } => {
            rename_table(tx, &load_table(tx, schema, name)?.ok_or_else(dropped)?, to, new_location)?
        }
        CatalogChange::AddColumns { .. } => {
            let meta = load_table(tx, schema, name)?.ok_or_else(dropped)?;
            let altered = change.apply(Some(meta), "").ok_or_else(dropped)?;
            tx.execute("DELETE FROM columns WHERE table_id = ?1", [id])?;
            insert_columns(tx, id, &altered.columns, &altered.partition_columns, altered.bucket_spec.as_ref())?;
        }
    }
    record_change(tx, id, change.kind())
}

/// The id and location of the table `schema.name`, without its columns and files.
fn load_location(conn: &Connection, schema: &str, name: &str) -> Result<Option<(i64, Location)>, SqlError> {
    let row = conn
        .query_row("SELECT id, location FROM tables WHERE schema_name = ?1 AND name = ?2", [schema, name], |row| {
            Ok((row.get(0)?, row.get::<_, String>(1)?))
        })
        .optional()?;
    row.map(|(id, location)| Ok((id, Location::parse(&location)?))).transpose()
}

/// The table's change takes the catalog's next change number, and its latest change of `kind`
/// is this one.
fn record_change(tx: &Transaction, table_id: i64, kind: ChangeKind) -> Result<(), SqlError> {
    tx.execute("UPDATE change_sequence SET last = last + 1", [])?;
    tx.execute("UPDATE tables SET change_seq = (SELECT last FROM change_sequence) WHERE id = ?1", [table_id])?;
    tx.execute(
        "INSERT INTO table_changes (table_id, kind, seq) SELECT id, ?2, change_seq FROM tables WHERE id = ?1
         ON CONFLICT (table_id, kind) DO UPDATE SET seq = excluded.seq",
        params![table_id, kind.name()],
    )?;
    Ok(())
}

fn create_table(tx: &Transaction, table: &NewTable) -> Result<i64, SqlError> {
    if !schema_exists(tx, &table.schema)? {
        return Err(SqlError::undefined_schema(format!("schema \"{}\" does not exist", table.schema)));
    }
    if load_location(tx, &table.schema, &table.name)?.is_some() {
        return Err(SqlError::duplicate_table(format!("relation \"{}.{}\" already exists", table.schema, table.name)));
    }
    tx.execute(
        "INSERT INTO tables (schema_name, name, provider, location, is_external, comment, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, CAST(strftime('%s', 'now') AS INTEGER))",
        params![table.schema, table.name, table.provider, table.location.to_string(), table.external, table.comment],
    )?;
    let id = tx.last_insert_rowid();
    if let Some(spec) = &table.bucket_spec {
        tx.execute(
            "UPDATE tables SET num_buckets = ?2, bucket_hash = ?3, bucket_hash_version = ?4 WHERE id = ?1",
            params![id, spec.num_buckets, BUCKET_HASH, BUCKET_HASH_VERSION],
        )?;
    }
    insert_columns(tx, id, &table.columns, &table.partition_columns, table.bucket_spec.as_ref())?;
    for (key, value) in &table.properties {
        tx.execute("INSERT INTO table_properties (table_id, key, value) VALUES (?1, ?2, ?3)", params![id, key, value])?;
    }
    Ok(id)
}

/// The table's columns in order, with their parts in its partitioning and bucketing.
fn insert_columns(
    tx: &Transaction,
    id: i64,
    columns: &[ColumnMeta],
    partition_columns: &[String],
    bucket_spec: Option<&BucketSpec>,
) -> Result<(), SqlError> {
    let index_in = |names: &[String], column: &str| names.iter().position(|n| n == column).map(|i| i as i64);
    let (bucket_columns, sort_columns) = match bucket_spec {
        Some(spec) => (spec.bucket_columns.as_slice(), spec.sort_columns.as_slice()),
        None => (&[][..], &[][..]),
    };
    for (position, column) in columns.iter().enumerate() {
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
                index_in(partition_columns, &column.name),
                index_in(bucket_columns, &column.name),
                index_in(sort_columns, &column.name)
            ],
        )?;
    }
    Ok(())
}

/// Removes a table; the files of a managed one are retired.
fn drop_table(tx: &Transaction, meta: &TableMeta) -> Result<(), SqlError> {
    if !meta.external {
        for file in &meta.files {
            retire(tx, meta.id, &meta.file_path(file))?;
        }
    }
    tx.execute("DELETE FROM tables WHERE id = ?1", [meta.id])?;
    Ok(())
}

/// Spark's error for a table renamed to a name another table has.
pub fn name_taken(schema: &str, name: &str) -> SqlError {
    SqlError::duplicate_table(format!(
        "[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view `{schema}`.`{name}` because it already exists."
    ))
}

/// Gives the table its new name and location. When the location moves (a managed table),
/// the files the commit has just published there are the table's from now on, and those at
/// the old location are retired.
fn rename_table(tx: &Transaction, meta: &TableMeta, to: &str, location: &Location) -> Result<(), SqlError> {
    if load_location(tx, &meta.schema, to)?.is_some() {
        return Err(name_taken(&meta.schema, to));
    }
    if *location != meta.location {
        for file in &meta.files {
            retire(tx, meta.id, &meta.file_path(file))?;
            live_again(tx, &location.join(&file.path))?;
        }
    }
    tx.execute("UPDATE tables SET name = ?2, location = ?3 WHERE id = ?1", params![meta.id, to, location.to_string()])?;
    Ok(())
}

/// `replaced` leave the table and `files` join it (`OPTIMIZE`). Fails when a replaced file
/// is no longer in the table because a concurrent write replaced it first.
fn rewrite_files(
    tx: &Transaction,
    table_id: i64,
    location: &Location,
    replaced: &[DataFile],
    files: &[DataFile],
) -> Result<(), SqlError> {
    for file in replaced {
        let removed =
            tx.execute("DELETE FROM data_files WHERE table_id = ?1 AND path = ?2", params![table_id, file.path])?;
        if removed == 0 {
            return Err(serialization_failure("the table changed while it was being rewritten".to_string()));
        }
        retire(tx, table_id, &location.join(&file.path))?;
    }
    commit_files(tx, table_id, location, &WriteMode::Append, files)
}

/// Makes an external table's file list what its directory holds (`REFRESH TABLE`, `MSCK
/// REPAIR TABLE`): `found` is every data file found there. Files of partitions that `repair`
/// leaves unregistered stay out; listed files that were not found leave the list and are not
/// deleted (another engine owns them). Files a running write has moved in but not committed
/// yet, and files an overwrite retired, are not the table's and stay out.
fn resync_files(
    tx: &Transaction,
    table: &TableMeta,
    found: &[DataFile],
    repair: PartitionRepair,
) -> Result<(), SqlError> {
    let table_id = table.id;
    let on_disk: BTreeSet<String> =
        found.iter().filter(|f| !f.partition.is_empty()).map(|f| f.partition.clone()).collect();
    let registered = repair.registered(&table.partitions.iter().cloned().collect(), &on_disk);
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
        let absolute = table.file_path(file);
        if (!file.partition.is_empty() && !registered.contains(&file.partition))
            || not_committed.query_row([absolute.to_string()], |row| row.get::<_, bool>(0))?
        {
            continue;
        }
        insert_file(tx, table_id, file)?;
    }
    new_version(tx, table_id)
}

fn insert_file(tx: &Transaction, table_id: i64, file: &DataFile) -> Result<(), SqlError> {
    tx.execute(
        "INSERT INTO data_files (table_id, path, partition_path, bucket_id, row_count, byte_size)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![table_id, file.path, file.partition, file.bucket, file.row_count as i64, file.byte_size as i64],
    )?;
    Ok(())
}

fn load_table(conn: &Connection, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
    let row = conn
        .query_row(
            "SELECT id, provider, location, is_external, comment, created_at, version, num_buckets, change_seq
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
                    row.get::<_, i64>(8)?,
                ))
            },
        )
        .optional()?;
    let Some((id, provider, location, external, comment, created_at, version, num_buckets, change_seq)) = row else {
        return Ok(None);
    };

    let mut stmt = conn.prepare(
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

    let mut stmt = conn.prepare("SELECT key, value FROM table_properties WHERE table_id = ?1")?;
    let properties =
        stmt.query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<BTreeMap<_, _>, _>>()?;

    let mut stmt = conn.prepare(
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

    let mut stmt = conn.prepare("SELECT path FROM partitions WHERE table_id = ?1 ORDER BY path")?;
    let partitions = stmt.query_map([id], |row| row.get(0))?.collect::<Result<Vec<String>, _>>()?;

    Ok(Some(TableMeta {
        id,
        schema: schema.to_string(),
        name: name.to_string(),
        provider,
        location: Location::parse(&location)?,
        external,
        comment,
        created_at,
        version,
        change_seq,
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
fn retire(tx: &Transaction, owner: i64, path: &Location) -> Result<(), SqlError> {
    let path = path.to_string();
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

/// A file a table lists from now on: no longer pending, and not to be deleted even if a
/// record from its path's earlier life says it was retired (a table renamed away and back
/// reuses its files' names).
fn live_again(tx: &Transaction, path: &Location) -> Result<(), SqlError> {
    tx.execute("DELETE FROM pending_files WHERE path = ?1", [path.to_string()])?;
    tx.execute("DELETE FROM retired_files WHERE path = ?1", [path.to_string()])?;
    Ok(())
}

fn commit_files(
    tx: &Transaction,
    table_id: i64,
    location: &Location,
    mode: &WriteMode,
    files: &[DataFile],
) -> Result<(), SqlError> {
    let written: Vec<&str> = files.iter().map(|f| f.partition.as_str()).collect();
    if *mode != WriteMode::Append {
        let mut stmt = tx.prepare("SELECT path FROM partitions WHERE table_id = ?1")?;
        let partitions: Vec<String> = stmt.query_map([table_id], |row| row.get(0))?.collect::<Result<_, _>>()?;
        for partition in partitions.iter().filter(|p| mode.forgets(p, &written)) {
            tx.execute("DELETE FROM partitions WHERE table_id = ?1 AND path = ?2", params![table_id, partition])?;
        }
        let mut stmt = tx.prepare("SELECT path, partition_path FROM data_files WHERE table_id = ?1")?;
        let old: Vec<(String, String)> =
            stmt.query_map([table_id], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<_, _>>()?;
        for (path, partition) in old {
            if mode.replaces(&partition, &written) {
                retire(tx, table_id, &location.join(&path))?;
                tx.execute("DELETE FROM data_files WHERE table_id = ?1 AND path = ?2", params![table_id, path])?;
            }
        }
    }
    for file in files {
        insert_file(tx, table_id, file)?;
        if !file.partition.is_empty() {
            tx.execute(
                "INSERT OR IGNORE INTO partitions (table_id, path) VALUES (?1, ?2)",
                params![table_id, file.partition],
            )?;
        }
        live_again(tx, &location.join(&file.path))?;
    }
    new_version(tx, table_id)
}

fn set_properties(tx: &Transaction, table_id: i64, properties: &[(String, String)]) -> Result<(), SqlError> {
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
            location: Location::parse("/warehouse/default").unwrap().join(name),
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

    fn create(table: NewTable, files: &[DataFile]) -> CatalogChange {
        CatalogChange::CreateTable { table, files: files.to_vec() }
    }

    fn write(table: &TableMeta, mode: WriteMode, files: &[DataFile]) -> CatalogChange {
        CatalogChange::Write { table: TableRef::of(table), mode, files: files.to_vec() }
    }

    fn resync(table: &TableMeta, found: &[DataFile], repair: PartitionRepair) -> CatalogChange {
        CatalogChange::Resync { table: TableRef::of(table), found: found.to_vec(), repair }
    }

    #[test]
    fn tables_keep_columns_and_committed_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        store.commit(&[create(new_table("t"), &[file("a.parquet", 2)])]).unwrap();
        let err = store.commit(&[create(new_table("t"), &[])]).unwrap_err();
        assert_eq!(err.code, "42P07");

        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.columns[0].ty.as_str(), "bigint");
        assert_eq!(t.files, vec![file("a.parquet", 2)]);

        store.commit(&[write(&t, WriteMode::Append, &[file("b.parquet", 3)])]).unwrap();
        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.files.len(), 2);
        assert_eq!(t.version, 2);

        store.commit(&[write(&t, WriteMode::Overwrite, &[file("c.parquet", 1)])]).unwrap();
        let t = store.table("default", "t").unwrap().unwrap();
        assert_eq!(t.files, vec![file("c.parquet", 1)]);
        let retired = store.retired_files().unwrap();
        assert_eq!(retired.len(), 2, "{retired:?}");

        let t = store.table("default", "t").unwrap().unwrap();
        store.commit(&[CatalogChange::DropTable { table: TableRef::of(&t) }]).unwrap();
        assert!(store.table("default", "t").unwrap().is_none());
        assert_eq!(store.retired_files().unwrap().len(), 3);
    }

    #[test]
    fn a_renamed_managed_table_reads_its_files_at_the_new_location_and_retires_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        store.commit(&[create(new_table("t"), &[file("a.parquet", 2)]), create(new_table("taken"), &[])]).unwrap();
        let t = store.table("default", "t").unwrap().unwrap();
        let rename = |to: &str| CatalogChange::RenameTable {
            table: TableRef::of(&t),
            to: to.into(),
            location: Location::parse("/warehouse/default").unwrap().join(to),
            files: t.files.clone(),
        };
        assert_eq!(store.commit(&[rename("taken")]).unwrap_err().code, "42P07");
        // A change made after the rename in the same commit names the table by its new name.
        let renamed = TableMeta { name: "u".into(), ..t.clone() };
        store.commit(&[rename("u"), write(&renamed, WriteMode::Append, &[file("b.parquet", 1)])]).unwrap();
        assert!(store.table("default", "t").unwrap().is_none());
        let u = store.table("default", "u").unwrap().unwrap();
        assert_eq!((u.id, u.location.to_string().as_str()), (t.id, "/warehouse/default/u"));
        assert_eq!(u.files.len(), 2);
        assert_eq!(store.retired_files().unwrap(), vec![Location::parse("/warehouse/default/t/a.parquet").unwrap()]);
        // Seen before the rename, the table is gone under its old name for a later writer.
        assert_eq!(store.commit(&[write(&t, WriteMode::Append, &[file("c.parquet", 1)])]).unwrap_err().code, "40001");
    }

    #[test]
    fn files_another_table_lists_are_not_retired() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        let shared =
            |name: &str| NewTable { location: Location::parse("/lake/tx").unwrap(), external: true, ..new_table(name) };
        store.commit(&[create(shared("writer"), &[file("a.parquet", 2)])]).unwrap();
        store.commit(&[create(shared("reader"), &[file("a.parquet", 2)])]).unwrap();
        let writer = store.table("default", "writer").unwrap().unwrap();
        store.commit(&[write(&writer, WriteMode::Overwrite, &[file("b.parquet", 1)])]).unwrap();
        assert_eq!(store.retired_files().unwrap(), Vec::<Location>::new());
        // Once no table lists it, an overwrite retires it.
        let reader = store.table("default", "reader").unwrap().unwrap();
        store.commit(&[write(&reader, WriteMode::Overwrite, &[file("c.parquet", 1)])]).unwrap();
        assert_eq!(store.retired_files().unwrap(), vec![Location::parse("/lake/tx/a.parquet").unwrap()]);
    }

    #[test]
    fn a_pending_objects_upload_is_kept_until_its_record_goes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        let small = Location::parse("s3://lake/t/part-00000-a.c000.snappy.parquet").unwrap();
        let large = Location::parse("s3://lake/t/part-00001-a.c000.snappy.parquet").unwrap();
        store.add_pending(&[small.clone(), large.clone()]).unwrap();
        store.record_upload(&large, "upload-1").unwrap();
        assert_eq!(store.pending_uploads().unwrap(), vec![(large.clone(), "upload-1".to_string())]);
        store.forget_files(std::slice::from_ref(&large)).unwrap();
        assert_eq!(store.pending_uploads().unwrap(), vec![]);
        assert_eq!(store.pending_files().unwrap(), vec![small]);
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
        let table = NewTable { location: Location::parse("/lake/ev").unwrap(), external: true, ..new_table("ev") };
        store.commit(&[create(table, &[in_partition("d=1", "a.parquet"), in_partition("d=2", "b.parquet")])]).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        // d=2 went, d=3 came, d=1 has one more file; a write's uncommitted file is not the table's.
        store.add_pending(&[Location::parse("/lake/ev/d=1/pending.parquet").unwrap()]).unwrap();
        let found = [
            in_partition("d=1", "a.parquet"),
            in_partition("d=1", "c.parquet"),
            in_partition("d=1", "pending.parquet"),
            in_partition("d=3", "e.parquet"),
        ];
        let stale = TableRef { seen: ev.change_seq - 1, ..TableRef::of(&ev) };
        let stale = CatalogChange::Resync { table: stale, found: found.to_vec(), repair: PartitionRepair::Sync };
        assert_eq!(store.commit(&[stale]).unwrap_err().code, "40001");

        store.commit(&[resync(&ev, &found, PartitionRepair::Drop)]).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1"]);
        assert_eq!(ev.files, vec![in_partition("d=1", "a.parquet"), in_partition("d=1", "c.parquet")]);

        store.commit(&[resync(&ev, &found, PartitionRepair::Add)]).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1", "d=3"]);
        assert_eq!(ev.files.len(), 3);

        store.commit(&[resync(&ev, &found[..1], PartitionRepair::Add)]).unwrap();
        let ev = store.table("default", "ev").unwrap().unwrap();
        assert_eq!(ev.partitions, vec!["d=1", "d=3"], "ADD keeps partitions whose files went");
        assert_eq!(ev.files, vec![in_partition("d=1", "a.parquet")]);
        store.commit(&[resync(&ev, &found[..1], PartitionRepair::Sync)]).unwrap();
        assert_eq!(store.table("default", "ev").unwrap().unwrap().partitions, vec!["d=1"]);
        assert_eq!(store.retired_files().unwrap(), Vec::<Location>::new(), "nothing found missing is deleted");
    }

    #[test]
    fn the_first_committer_wins_and_a_snapshot_keeps_what_it_saw() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        store.commit(&[create(new_table("t"), &[file("a.parquet", 1)])]).unwrap();
        let seen = store.table("default", "t").unwrap().unwrap();
        let snapshot = store.snapshot().unwrap();
        // Two transactions that read the same version: appends commute.
        store.commit(&[write(&seen, WriteMode::Append, &[file("b.parquet", 1)])]).unwrap();
        store.commit(&[write(&seen, WriteMode::Append, &[file("c.parquet", 1)])]).unwrap();
        // An overwrite that did not see them loses, and publishes nothing of its transaction.
        let lost = store.commit(&[
            write(&seen, WriteMode::Append, &[file("d.parquet", 1)]),
            write(&seen, WriteMode::Overwrite, &[file("e.parquet", 1)]),
        ]);
        assert_eq!(lost.unwrap_err().code, "40001");
        let now = store.table("default", "t").unwrap().unwrap();
        assert_eq!(
            now.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["a.parquet", "b.parquet", "c.parquet"]
        );
        // One that saw them wins; an append that did not see the overwrite then loses.
        store.commit(&[write(&now, WriteMode::Overwrite, &[file("f.parquet", 1)])]).unwrap();
        assert_eq!(store.commit(&[write(&now, WriteMode::Append, &[file("g.parquet", 1)])]).unwrap_err().code, "40001");
        // The snapshot still reads the table as it was before all of this.
        assert_eq!(snapshot.table("default", "t").unwrap().unwrap().files, vec![file("a.parquet", 1)]);
        assert_eq!(store.table("default", "t").unwrap().unwrap().files, vec![file("f.parquet", 1)]);
    }

    #[test]
    fn a_table_dropped_and_created_again_under_the_same_id_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        store.commit(&[create(new_table("t"), &[file("a.parquet", 1)])]).unwrap();
        store.commit(&[write(&store.table("default", "t").unwrap().unwrap(), WriteMode::Append, &[])]).unwrap();
        let seen = store.table("default", "t").unwrap().unwrap();
        store.commit(&[CatalogChange::DropTable { table: TableRef::of(&seen) }]).unwrap();
        store.commit(&[create(new_table("t"), &[])]).unwrap();
        let again = store.table("default", "t").unwrap().unwrap();
        assert_eq!(again.id, seen.id, "SQLite gives the newest table's id to the next one");
        let late = store.commit(&[write(&seen, WriteMode::Append, &[file("b.parquet", 1)])]);
        assert_eq!(late.unwrap_err().code, "40001");
    }

    #[test]
    fn state_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sqlite");
        Metastore::open(&path).unwrap().commit(&[create(new_table("kept"), &[file("x.parquet", 7)])]).unwrap();
        let store = Metastore::open(&path).unwrap();
        assert_eq!(store.table_names("default").unwrap(), vec!["kept".to_string()]);
        assert_eq!(store.table("default", "kept").unwrap().unwrap().files[0].row_count, 7);
    }
}

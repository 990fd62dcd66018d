//! The commit protocol: a write becomes part of a table only when its file list commits in
//! the metastore.
//!
//! For a table on the local file system:
//! 1. Files are written under `<table>/_temporary/<write id>/`, invisible to everyone but
//!    the transaction that wrote them.
//! 2. At commit, the final paths of every write of the transaction are recorded as pending
//!    in the metastore, then the files are moved into their tables' directories (where Spark
//!    will find them).
//! 3. One SQLite transaction adds them to the tables' file lists, with every other change of
//!    the transaction, and clears the pending records. Until then no other session sees them.
//!
//! Each file is fsynced when written and each directory whose entries changed is fsynced
//! after the renames, before the SQLite commit (itself `synchronous = FULL`): once a write is
//! acknowledged, its files survive a power loss as well as a crash.
//!
//! A failure before step 3 removes the moved files again; a crash leaves pending records and
//! staging directories that [`super::janitor::FileJanitor::recover`] deletes at the next start.
//!
//! A table on object storage has no rename: its files are written in place, each recorded as
//! pending first ([`super::object_write`]), and step 3 is the whole commit.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use object_store::ObjectStoreExt;
use uuid::Uuid;

use super::file_naming::STAGING_DIR;
use super::object_stores::{object_error, object_path};
use super::object_write::ObjectWrite;
use super::parquet_writer::StagedFile;
use super::write_target::WriteTarget;
use crate::catalog::change::UNCOMMITTED_TABLE_ID;
use crate::catalog::location::Location;
use crate::catalog::metastore::Metastore;
use crate::catalog::table::{DataFile, TableMeta};
use crate::error::SqlError;
use crate::metrics::METRICS;

/// One write's private staging area; dropping it (on failure or cancellation) removes
/// everything that was not published.
pub struct StagedWrite {
    pub id: Uuid,
    table_location: Location,
    target: WriteTarget,
    /// A CREATE TABLE … AS: if it does not commit, the table's directory goes too (once empty).
    new_table: bool,
    published: bool,
}

impl StagedWrite {
    /// A write to the local table directory `table_location`, staged below it.
    pub fn local(table_location: &Path) -> Self {
        let id = Uuid::new_v4();
        let staging_dir = table_location.join(STAGING_DIR).join(id.to_string());
        Self::to(Location::Local(table_location.to_path_buf()), id, WriteTarget::Staging(staging_dir))
    }

    /// A write in place to a table on object storage.
    pub fn in_place(write: ObjectWrite) -> Self {
        Self::to(write.table_location(), Uuid::new_v4(), WriteTarget::InPlace(Arc::new(write)))
    }

    fn to(table_location: Location, id: Uuid, target: WriteTarget) -> Self {
        StagedWrite { id, table_location, target, new_table: false, published: false }
    }

    /// A write of `table`: of a new one when its transaction created it and has not
    /// committed, so that the table's directory goes too if the write never commits.
    pub fn for_table(mut self, table: &TableMeta) -> Self {
        self.new_table = table.id == UNCOMMITTED_TABLE_ID;
        self
    }

    /// The write of a table that does not exist until the write commits.
    pub fn of_new_table(mut self) -> Self {
        self.new_table = true;
        self
    }

    pub fn target(&self) -> &WriteTarget {
        &self.target
    }

    /// Renames the staged files into the table directory, then syncs every directory whose
    /// entries changed (and those that were created), so that the renames are durable before
    /// the metastore commits them. The files' contents were synced when they were written.
    fn move_into_place(&self, files: &[StagedFile], finals: &[Location]) -> Result<(), SqlError> {
        let Location::Local(table_location) = &self.table_location else { return Ok(()) };
        let mut changed = BTreeSet::new();
        for (file, target) in files.iter().zip(finals) {
            let (Location::Local(staged), Location::Local(target)) = (&file.staged, target) else {
                return Err(SqlError::internal("a local write staged a file elsewhere"));
            };
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
                // A new partition directory is itself an entry of its parent, up to the table.
                let mut dir = parent;
                while dir.starts_with(table_location) && changed.insert(dir.to_path_buf()) {
                    dir = dir.parent().unwrap_or(dir);
                }
            }
            std::fs::rename(staged, target)?;
        }
        if let Some(parent) = table_location.parent() {
            changed.insert(parent.to_path_buf());
        }
        for dir in changed {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

/// A staged write and the files it wrote, waiting to be published.
pub struct StagedFiles {
    pub write: StagedWrite,
    pub files: Vec<StagedFile>,
}

impl StagedFiles {
    /// The files as the table will list them once published.
    pub fn described(&self) -> Vec<DataFile> {
        self.files
            .iter()
            .map(|f| DataFile {
                path: f.relative.clone(),
                partition: f.partition.clone(),
                bucket: f.bucket,
                row_count: f.rows,
                byte_size: f.bytes,
            })
            .collect()
    }

    /// Where the files wait until published, relative to the table's directory, with a
    /// trailing `/`; empty for files written in place.
    pub fn staged_prefix(&self) -> String {
        match self.write.target {
            WriteTarget::Staging(_) => format!("{STAGING_DIR}/{}/", self.write.id),
            WriteTarget::InPlace(_) => String::new(),
        }
    }

    fn finals(&self) -> Vec<Location> {
        self.files.iter().map(|f| self.write.table_location.join(&f.relative)).collect()
    }
}

/// The files of `table`, linked into a staging area of `location` under the names they will
/// have there once published: a managed table's move to the directory of its new name. The
/// files stay where they were for the statements reading them until the commit retires them;
/// the links cost no copy. Where the file system has no links, the files are copied.
pub fn stage_links(table: &TableMeta, location: &Path) -> Result<StagedFiles, SqlError> {
    let write = StagedWrite::local(location).of_new_table();
    let WriteTarget::Staging(staging_dir) = &write.target else { unreachable!("a local write stages") };
    let from = table.location.local_for("moving a managed table's files")?;
    let files = table
        .files
        .iter()
        .map(|file| {
            let relative = published_path(&file.path).unwrap_or_else(|| file.path.clone());
            let staged = staging_dir.join(&relative);
            if let Some(parent) = staged.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let source = from.join(&file.path);
            if std::fs::hard_link(&source, &staged).is_err() {
                std::fs::copy(&source, &staged)
                    .map_err(|e| SqlError::storage(&format!("could not copy {}", source.display()), &e))?;
            }
            Ok(StagedFile {
                relative,
                partition: file.partition.clone(),
                bucket: file.bucket,
                staged: Location::Local(staged),
                rows: file.row_count,
                bytes: file.byte_size,
            })
        })
        .collect::<Result<_, SqlError>>()?;
    Ok(StagedFiles { write, files })
}

/// The objects of `table` copied by their store to the same names under `write`'s table (a
/// managed table's move to its new name on object storage, which has no rename), each
/// recorded as pending first, as a write's are.
pub async fn stage_copies(table: &TableMeta, write: StagedWrite) -> Result<StagedFiles, SqlError> {
    let (WriteTarget::InPlace(target), Location::Object(_)) = (&write.target, &table.location) else {
        return Err(SqlError::feature_not_supported(format!(
            "moving the files of a table at {} to {}",
            table.location, write.table_location
        )));
    };
    let mut files = Vec::with_capacity(table.files.len());
    for file in &table.files {
        let relative = published_path(&file.path).unwrap_or_else(|| file.path.clone());
        let Location::Object(source) = table.file_path(file) else { unreachable!("an object location joins to one") };
        let (staged, key) = target.begin(&relative)?;
        target.store.copy(&object_path(&source)?, &key).await.map_err(|e| object_error("copy", &source, e))?;
        files.push(StagedFile {
            relative,
            partition: file.partition.clone(),
            bucket: file.bucket,
            staged,
            rows: file.row_count,
            bytes: file.byte_size,
        });
    }
    Ok(StagedFiles { write, files })
}

/// Where a file staged at `path` (relative to its table: `_temporary/<write id>/…`) is once
/// published; `None` for a path that is not staged.
pub fn published_path(path: &str) -> Option<String> {
    let mut parts = Path::new(path).strip_prefix(STAGING_DIR).ok()?.components();
    parts.next()?;
    Some(parts.as_path().to_string_lossy().into_owned())
}

/// Moves the files of `writes` into their tables' directories and runs `commit`, which makes
/// them part of their tables in the metastore; if `commit` fails, the moved files are deleted
/// and every table is exactly as it was. A crash at any step leaves pending records and
/// staging directories that the next start deletes.
pub fn publish(
    metastore: &Metastore,
    writes: &mut [StagedFiles],
    commit: impl FnOnce() -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    pause_point("staged");
    let finals: Vec<Vec<Location>> = writes.iter().map(StagedFiles::finals).collect();
    let renamed: Vec<Location> = writes
        .iter()
        .zip(&finals)
        .filter(|(staged, _)| matches!(staged.write.target, WriteTarget::Staging(_)))
        .flat_map(|(_, finals)| finals.iter().cloned())
        .collect();
    metastore.add_pending(&renamed)?;
    pause_point("pending-recorded");
    let moved = writes
        .iter()
        .zip(&finals)
        .enumerate()
        .try_for_each(|(i, (staged, finals))| {
            staged.write.move_into_place(&staged.files, finals)?;
            if i == 0 {
                pause_point("first-write-moved");
            }
            Ok(())
        })
        .and_then(|()| {
            pause_point("files-moved");
            commit()
        });
    if let Err(e) = moved {
        // Files written in place go as their unpublished writes are dropped.
        for (staged, finals) in writes.iter().zip(&finals) {
            let Location::Local(table_location) = &staged.write.table_location else { continue };
            for path in finals.iter().filter_map(Location::local) {
                let _ = std::fs::remove_file(path);
                if let Some(dir) = path.parent() {
                    prune_empty_dirs(dir, table_location);
                }
            }
        }
        metastore.clear_pending(&renamed)?;
        return Err(e);
    }
    pause_point("metastore-committed");
    for staged in writes.iter_mut() {
        staged.write.published = true;
    }
    METRICS.commits.inc();
    Ok(())
}

/// The steps of [`publish`] at which `BUCKETSQL_PAUSE_AT` stops the server, for the crash
/// test to kill it there: `staged`, `pending-recorded`, `first-write-moved`, `files-moved`,
/// `metastore-committed`.
fn pause_point(step: &str) {
    static PAUSE_AT: LazyLock<Option<String>> = LazyLock::new(|| std::env::var("BUCKETSQL_PAUSE_AT").ok());
    if PAUSE_AT.as_deref() == Some(step) {
        tracing::warn!(step, "paused at a commit step");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

impl Drop for StagedWrite {
    fn drop(&mut self) {
        let (WriteTarget::Staging(staging_dir), Location::Local(table_location)) = (&self.target, &self.table_location)
        else {
            if let WriteTarget::InPlace(write) = &self.target
                && !self.published
            {
                write.discard();
            }
            return;
        };
        if staging_dir.exists()
            && let Err(e) = std::fs::remove_dir_all(staging_dir)
        {
            tracing::warn!(dir = %staging_dir.display(), "could not remove staging directory: {e}");
        }
        // Only succeeds once no other write is staging here.
        let _ = std::fs::remove_dir(table_location.join(STAGING_DIR));
        if self.new_table && !self.published {
            // Only succeeds if no other write put files here.
            let _ = std::fs::remove_dir(table_location);
        }
    }
}

/// Removes `dir` and then its parents while they are empty, up to but not including `stop`
/// (a table's directory, or the schema directory of a table that no longer exists). Does
/// nothing unless `dir` lies under `stop`.
pub fn prune_empty_dirs(dir: &Path, stop: &Path) {
    let mut dir = dir;
    while dir != stop && dir.starts_with(stop) && std::fs::remove_dir(dir).is_ok() {
        let Some(parent) = dir.parent() else { return };
        dir = parent;
    }
}

/// Removes every empty directory below `dir` (not `dir` itself), deepest first; whether
/// `dir` is empty afterwards.
pub fn remove_empty_subdirs(dir: &Path) -> std::io::Result<bool> {
    let mut empty = true;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() && remove_empty_subdirs(&path)? && std::fs::remove_dir(&path).is_ok() {
            continue;
        }
        empty = false;
    }
    Ok(empty)
}

/// `fsync` on a directory makes the entries created or renamed in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), SqlError> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

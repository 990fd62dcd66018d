//! The commit protocol: a write becomes part of a table only when its file list commits in
//! the metastore.
//!
//! 1. Files are written under `<table>/_temporary/<write id>/`, invisible to everyone.
//! 2. Their final paths are recorded as pending in the metastore, then they are moved into
//!    the table directory (where Spark will find them).
//! 3. One SQLite transaction adds them to the table's file list and clears the pending
//!    records. Until then no reader sees them.
//!
//! Each file is fsynced when written and each directory whose entries changed is fsynced
//! after the renames, before the SQLite commit (itself `synchronous = FULL`): once a write is
//! acknowledged, its files survive a power loss as well as a crash.
//!
//! A failure before step 3 removes the moved files again; a crash leaves pending records and
//! staging directories that [`super::janitor::FileJanitor::recover`] deletes at the next start.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::file_naming::STAGING_DIR;
use super::parquet_writer::StagedFile;
use crate::catalog::metastore::{DataFile, Metastore};
use crate::error::SqlError;
use crate::metrics::METRICS;

/// One write's private staging area; dropping it (on failure or cancellation) removes
/// everything that was not published.
pub struct StagedWrite {
    pub id: Uuid,
    table_location: PathBuf,
    staging_dir: PathBuf,
    /// A CREATE TABLE … AS: if it does not commit, the table's directory goes too (once empty).
    new_table: bool,
    published: bool,
}

impl StagedWrite {
    pub fn new(table_location: &Path) -> Self {
        let id = Uuid::new_v4();
        let staging_dir = table_location.join(STAGING_DIR).join(id.to_string());
        StagedWrite {
            id,
            table_location: table_location.to_path_buf(),
            staging_dir,
            new_table: false,
            published: false,
        }
    }

    /// The write of a table that does not exist until the write commits.
    pub fn of_new_table(table_location: &Path) -> Self {
        let mut write = Self::new(table_location);
        write.new_table = true;
        write
    }

    pub fn staging_dir(&self) -> &Path {
        &self.staging_dir
    }

    /// Moves the staged files into the table directory and runs `commit` with their
    /// descriptions; if `commit` fails, the moved files are deleted and the table is
    /// exactly as it was.
    pub fn publish(
        mut self,
        metastore: &Metastore,
        files: &[StagedFile],
        commit: impl FnOnce(&[DataFile]) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let finals: Vec<PathBuf> = files.iter().map(|f| self.table_location.join(&f.relative)).collect();
        metastore.add_pending(&finals)?;
        let moved = self.move_into_place(files, &finals).and_then(|()| {
            let described: Vec<DataFile> = files
                .iter()
                .map(|f| DataFile {
                    path: f.relative.clone(),
                    partition: f.partition.clone(),
                    bucket: f.bucket,
                    row_count: f.rows,
                    byte_size: f.bytes,
                })
                .collect();
            commit(&described)
        });
        if let Err(e) = moved {
            for path in &finals {
                let _ = std::fs::remove_file(path);
                if let Some(dir) = path.parent() {
                    prune_empty_dirs(dir, &self.table_location);
                }
            }
            metastore.clear_pending(&finals)?;
            return Err(e);
        }
        self.published = true;
        METRICS.commits.inc();
        Ok(())
    }

    /// Renames the staged files into the table directory, then syncs every directory whose
    /// entries changed (and those that were created), so that the renames are durable before
    /// the metastore commits them. The files' contents were synced when they were written.
    fn move_into_place(&self, files: &[StagedFile], finals: &[PathBuf]) -> Result<(), SqlError> {
        let mut changed = BTreeSet::new();
        for (file, target) in files.iter().zip(finals) {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
                // A new partition directory is itself an entry of its parent, up to the table.
                let mut dir = parent;
                while dir.starts_with(&self.table_location) && changed.insert(dir.to_path_buf()) {
                    dir = dir.parent().unwrap_or(dir);
                }
            }
            std::fs::rename(&file.staged, target)?;
        }
        if let Some(parent) = self.table_location.parent() {
            changed.insert(parent.to_path_buf());
        }
        for dir in changed {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

impl Drop for StagedWrite {
    fn drop(&mut self) {
        if self.staging_dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.staging_dir)
        {
            tracing::warn!(dir = %self.staging_dir.display(), "could not remove staging directory: {e}");
        }
        let staging_root = self.table_location.join(STAGING_DIR);
        // Only succeeds once no other write is staging here.
        let _ = std::fs::remove_dir(staging_root);
        if self.new_table && !self.published {
            // Only succeeds if no other write put files here.
            let _ = std::fs::remove_dir(&self.table_location);
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

//! Deletes files no table holds any more, without pulling them from under a running query.
//!
//! An overwrite or a drop retires the old files in the same metastore transaction that
//! commits the change. A statement that started before that commit may still read them, so
//! each retired file waits until every statement running at its retirement has finished.
//! Statements register when they start (`begin_statement`) and leave when their result is
//! consumed or dropped.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::file_naming::STAGING_DIR;
use crate::catalog::metastore::Metastore;
use crate::error::SqlError;

pub struct FileJanitor {
    metastore: Arc<Metastore>,
    state: Mutex<JanitorState>,
}

#[derive(Default)]
struct JanitorState {
    /// Advances at every commit that retires files.
    epoch: u64,
    /// Running statements, by the epoch they started in.
    running: BTreeMap<u64, usize>,
    /// Retired files, by the epoch of their retirement.
    retired: Vec<(u64, PathBuf)>,
}

/// Held while a statement may read table files.
pub struct StatementGuard {
    janitor: Arc<FileJanitor>,
    epoch: u64,
}

impl Drop for StatementGuard {
    fn drop(&mut self) {
        let mut state = self.janitor.lock();
        if let Some(count) = state.running.get_mut(&self.epoch) {
            *count -= 1;
            if *count == 0 {
                state.running.remove(&self.epoch);
            }
        }
        drop(state);
        self.janitor.collect();
    }
}

impl FileJanitor {
    pub fn new(metastore: Arc<Metastore>) -> Arc<Self> {
        Arc::new(FileJanitor { metastore, state: Mutex::new(JanitorState::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, JanitorState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Startup: nothing runs yet, so every retired file, every file of a write that never
    /// committed and every staging directory can go: those of known tables, wherever they
    /// live, and those under `warehouse` of tables a CREATE TABLE … AS never committed, whose
    /// directory goes too once empty.
    pub fn recover(&self, warehouse: &Path) -> Result<(), SqlError> {
        let mut gone = Vec::new();
        for path in self.metastore.pending_files()?.into_iter().chain(self.metastore.retired_files()?) {
            if remove_file(&path) {
                gone.push(path);
            }
        }
        self.metastore.forget_files(&gone)?;
        let known: HashSet<PathBuf> = self.metastore.table_locations()?.into_iter().collect();
        let uncommitted: Vec<PathBuf> =
            managed_directories(warehouse)?.into_iter().filter(|dir| !known.contains(dir)).collect();
        for location in &known {
            remove_staging(location)?;
        }
        for location in &uncommitted {
            if remove_staging(location)? {
                // Fails, and stays, if anything else is in it.
                let _ = std::fs::remove_dir(location);
            }
        }
        if !gone.is_empty() {
            tracing::info!(files = gone.len(), "removed uncommitted or retired files");
        }
        Ok(())
    }

    pub fn begin_statement(self: &Arc<Self>) -> StatementGuard {
        let mut state = self.lock();
        let epoch = state.epoch;
        *state.running.entry(epoch).or_default() += 1;
        StatementGuard { janitor: Arc::clone(self), epoch }
    }

    /// Called after a commit that may have retired files.
    pub fn files_retired(&self) -> Result<(), SqlError> {
        let retired = self.metastore.retired_files()?;
        {
            let mut state = self.lock();
            state.epoch += 1;
            let epoch = state.epoch;
            let known: HashSet<PathBuf> = state.retired.iter().map(|(_, p)| p.clone()).collect();
            state.retired.extend(retired.into_iter().filter(|p| !known.contains(p)).map(|p| (epoch, p)));
        }
        self.collect();
        Ok(())
    }

    /// Deletes retired files that no running statement can still be reading.
    fn collect(&self) {
        let deletable: Vec<PathBuf> = {
            let mut state = self.lock();
            let oldest_running = state.running.keys().next().copied().unwrap_or(u64::MAX);
            let (ready, waiting): (Vec<_>, Vec<_>) =
                std::mem::take(&mut state.retired).into_iter().partition(|(epoch, _)| *epoch <= oldest_running);
            state.retired = waiting;
            ready.into_iter().map(|(_, p)| p).collect()
        };
        if deletable.is_empty() {
            return;
        }
        let gone: Vec<PathBuf> = deletable.into_iter().filter(|p| remove_file(p)).collect();
        if let Err(e) = self.metastore.forget_files(&gone) {
            tracing::warn!("could not record deleted files: {e}");
        }
    }
}

/// True when the file is gone afterwards.
fn remove_file(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::warn!(path = %path.display(), "could not delete file: {e}");
            false
        }
    }
}

/// Removes the staging directory under `location`, if there is one; whether there was.
fn remove_staging(location: &Path) -> Result<bool, SqlError> {
    let staging = location.join(STAGING_DIR);
    if !staging.exists() {
        return Ok(false);
    }
    tracing::info!(dir = %staging.display(), "removing files of an interrupted write");
    std::fs::remove_dir_all(&staging)?;
    Ok(true)
}

/// `<warehouse>/<schema>/<table>` directories, whether or not the metastore knows them.
fn managed_directories(warehouse: &Path) -> Result<Vec<PathBuf>, SqlError> {
    let mut found = Vec::new();
    for schema in std::fs::read_dir(warehouse)? {
        let schema = schema?.path();
        if schema.is_dir() {
            for table in std::fs::read_dir(&schema)? {
                let table = table?.path();
                if table.is_dir() {
                    found.push(table);
                }
            }
        }
    }
    Ok(found)
}

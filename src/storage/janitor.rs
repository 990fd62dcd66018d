//! Deletes files no table holds any more, without pulling them from under a running query.
//!
//! An overwrite or a drop retires the old files in the same metastore transaction that
//! commits the change. A statement that started before that commit may still read them, so
//! each retired file waits until every statement running at its retirement has finished.
//! Statements register when they start (`begin_statement`) and leave when their result is
//! consumed or dropped.
//!
//! Objects on object storage are deleted on the runtime, in the background; a record stays
//! until its object is gone, so an object whose deletion failed is tried again at the next
//! start. The multipart upload of an object a crash left pending is aborted before the object
//! is deleted, so that the store keeps none of its parts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::commit::{prune_empty_dirs, remove_empty_subdirs};
use super::file_naming::STAGING_DIR;
use super::object_stores::{BucketClient, ObjectStores};
use super::object_write::{abort_uploads, delete_objects};
use crate::catalog::location::{Location, ObjectLocation};
use crate::catalog::metastore::Metastore;
use crate::error::SqlError;
use crate::metrics::METRICS;

pub struct FileJanitor {
    metastore: Arc<Metastore>,
    /// Where managed tables live, at `<warehouse>/<schema>/<table>`.
    warehouse: Location,
    stores: Arc<ObjectStores>,
    state: Mutex<JanitorState>,
}

#[derive(Default)]
struct JanitorState {
    /// Advances at every commit that retires files.
    epoch: u64,
    /// Running statements, by the epoch they started in.
    running: BTreeMap<u64, usize>,
    /// Retired files, by the epoch of their retirement.
    retired: Vec<(u64, Location)>,
    /// Objects being deleted in the background, whose records go once they are gone: not
    /// queued again meanwhile.
    deleting: HashSet<Location>,
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
    pub fn new(metastore: Arc<Metastore>, warehouse: &Location, stores: Arc<ObjectStores>) -> Arc<Self> {
        Arc::new(FileJanitor {
            metastore,
            warehouse: warehouse.clone(),
            stores,
            state: Mutex::new(JanitorState::default()),
        })
    }

    /// The clients of the object stores tables live on.
    pub fn stores(&self) -> &Arc<ObjectStores> {
        &self.stores
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, JanitorState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Startup: nothing runs yet, so every retired file, every file of a write that never
    /// committed with its upload, every staging directory and every directory left empty can
    /// go: those of known tables, wherever they live, and those under the warehouse of tables
    /// a CREATE TABLE … AS never committed or a DROP removed, whose directory goes too once
    /// empty.
    pub fn recover(self: &Arc<Self>) -> Result<(), SqlError> {
        let left = self.metastore.pending_files()?.into_iter().chain(self.metastore.retired_files()?).collect();
        let uploads = self.metastore.pending_uploads()?.into_iter().collect();
        let gone = self.remove(left, uploads);
        self.metastore.forget_files(&gone)?;
        let known: HashSet<Location> = self.metastore.table_locations()?.into_iter().collect();
        for location in known.iter().filter_map(Location::local).filter(|location| location.is_dir()) {
            remove_staging(location)?;
            remove_empty_subdirs(location)?;
        }
        if let Location::Local(warehouse) = &self.warehouse {
            for location in managed_directories(warehouse)? {
                if known.contains(&Location::Local(location.clone())) {
                    continue;
                }
                remove_staging(&location)?;
                if remove_empty_subdirs(&location)? {
                    std::fs::remove_dir(&location)?;
                }
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
    pub fn files_retired(self: &Arc<Self>) -> Result<(), SqlError> {
        let retired = self.metastore.retired_files()?;
        {
            let mut state = self.lock();
            state.epoch += 1;
            let epoch = state.epoch;
            let known: HashSet<Location> =
                state.retired.iter().map(|(_, p)| p.clone()).chain(state.deleting.iter().cloned()).collect();
            state.retired.extend(retired.into_iter().filter(|p| !known.contains(p)).map(|p| (epoch, p)));
        }
        self.collect();
        Ok(())
    }

    /// Deletes retired files that no running statement can still be reading.
    fn collect(self: &Arc<Self>) {
        let deletable: Vec<Location> = {
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
        // A path a table lists again since (a table renamed away and back) is no longer
        // retired in the metastore, and stays.
        let still_retired: HashSet<Location> = match self.metastore.retired_files() {
            Ok(retired) => retired.into_iter().collect(),
            Err(e) => {
                tracing::warn!("could not read the retired files: {e}");
                return;
            }
        };
        let gone =
            self.remove(deletable.into_iter().filter(|path| still_retired.contains(path)).collect(), HashMap::new());
        if let Err(e) = self.metastore.forget_files(&gone) {
            tracing::warn!("could not record deleted files: {e}");
        }
        match self.metastore.table_locations() {
            Ok(tables) => {
                let tables: Vec<&Path> = tables.iter().filter_map(Location::local).collect();
                for path in gone.iter().filter_map(Location::local) {
                    self.prune_after(path, &tables);
                }
            }
            Err(e) => tracing::warn!("could not list tables to remove empty directories: {e}"),
        }
    }

    /// Removes `files`: the local ones at once, giving those gone afterwards; objects in
    /// the background, each bucket's in turn, forgetting their records once they are gone.
    /// An object with an upload in `uploads` goes once the upload is aborted.
    fn remove(self: &Arc<Self>, files: Vec<Location>, mut uploads: HashMap<Location, String>) -> Vec<Location> {
        let mut gone = Vec::new();
        let mut objects: BTreeMap<String, Vec<ObjectLocation>> = BTreeMap::new();
        for file in files {
            match file {
                Location::Local(path) => {
                    if remove_file(&path) {
                        gone.push(Location::Local(path));
                    }
                }
                Location::Object(object) => objects.entry(object.bucket.clone()).or_default().push(object),
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return gone };
        for bucket in objects.into_values() {
            let BucketClient { store, uploads: client } = match self.stores.client(&bucket[0].bucket) {
                Ok(client) => client,
                Err(e) => {
                    tracing::warn!("could not delete retired objects: {e}");
                    continue;
                }
            };
            let batch: Vec<Location> = bucket.iter().cloned().map(Location::Object).collect();
            let open: Vec<(ObjectLocation, String)> = bucket
                .iter()
                .filter_map(|object| Some((object.clone(), uploads.remove(&Location::Object(object.clone()))?)))
                .collect();
            self.lock().deleting.extend(batch.iter().cloned());
            let janitor = Arc::clone(self);
            runtime.spawn(async move {
                let still_open = abort_uploads(&client, open).await;
                let bucket = bucket.into_iter().filter(|object| !still_open.contains(object)).collect();
                let gone = delete_objects(store, bucket).await;
                if let Err(e) = janitor.metastore.forget_files(&gone) {
                    tracing::warn!("could not record deleted objects: {e}");
                }
                let mut state = janitor.lock();
                for object in &batch {
                    state.deleting.remove(object);
                }
            });
        }
        gone
    }

    /// Removes the directories a deleted file leaves empty (an overwritten partition, a
    /// dropped table's directory), never a live table's own directory or anything above a
    /// table.
    fn prune_after(&self, file: &Path, tables: &[&Path]) {
        let Some(dir) = file.parent() else { return };
        let Location::Local(warehouse) = &self.warehouse else { return };
        let stop = match tables.iter().find(|location| file.starts_with(location)) {
            Some(location) => location.to_path_buf(),
            // A dropped managed table's files: up to its schema's directory.
            None => match file.strip_prefix(warehouse).ok().and_then(|rest| rest.components().next()) {
                Some(schema) => warehouse.join(schema),
                None => return,
            },
        };
        prune_empty_dirs(dir, &stop);
    }
}

/// True when the file is gone afterwards.
fn remove_file(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => {
            METRICS.janitor_removals.inc();
            true
        }
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
fn managed_directories(warehouse: &Path) -> Result<Vec<std::path::PathBuf>, SqlError> {
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

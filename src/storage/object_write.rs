//! A write to a table on object storage. An object store has no rename, so there is no
//! staging area to publish from: each file is uploaded at its final key, under a name no
//! other write uses (Spark's, with the write's id in it), and Spark reads the layout as it
//! would its own. The commit stays the metastore transaction that adds the files to the
//! table's list; until then no reader lists them.
//!
//! Each object is recorded as pending in the metastore before its upload starts, and a
//! multipart upload's id before its first part, so that whatever a crash leaves behind is
//! deleted or aborted at the next start. A write that does not publish deletes its objects as
//! it is dropped; their records go at the next start.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::{MultipartId, ObjectStore, ObjectStoreExt};

use super::object_stores::{Uploads, object_error, object_path};
use crate::catalog::location::{Location, ObjectLocation};
use crate::catalog::metastore::Metastore;
use crate::error::SqlError;

pub struct ObjectWrite {
    pub store: Arc<dyn ObjectStore>,
    pub uploads: Uploads,
    table: ObjectLocation,
    metastore: Arc<Metastore>,
    /// Every object this write has started, to delete if it does not publish.
    started: Mutex<Vec<ObjectLocation>>,
}

impl ObjectWrite {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        uploads: Uploads,
        table: ObjectLocation,
        metastore: Arc<Metastore>,
    ) -> Self {
        ObjectWrite { store, uploads, table, metastore, started: Mutex::default() }
    }

    pub fn table_location(&self) -> Location {
        Location::Object(self.table.clone())
    }

    /// Records the object at `relative` (to the table) as pending and gives its key, for the
    /// upload to start.
    pub fn begin(&self, relative: &str) -> Result<(Location, ObjectPath), SqlError> {
        let location = Location::Object(self.table.clone()).join(relative);
        let Location::Object(object) = &location else { unreachable!("an object location joins to one") };
        let key = object_path(object)?;
        self.metastore.add_pending(std::slice::from_ref(&location))?;
        self.started.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(object.clone());
        Ok((location, key))
    }

    /// Records the multipart upload writing the object at `location`, before its first part.
    pub fn record_upload(&self, location: &Location, id: &MultipartId) -> Result<(), SqlError> {
        self.metastore.record_upload(location, id)
    }

    /// Deletes every object the write started, in the background. Their pending records stay
    /// until the next start: a listing that saw an object before its deletion (REFRESH of an
    /// external table over the same prefix) must still take it for uncommitted, and an upload
    /// cut off mid-way may yet complete after the deletion, for the next start to delete.
    pub fn discard(&self) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if !started.is_empty() {
            runtime.spawn(delete_objects(Arc::clone(&self.store), started));
        }
    }
}

/// Deletes `objects` from `store`, one after another; those gone afterwards (a missing object
/// is gone too). Those it cannot delete are logged and left to a later attempt.
pub async fn delete_objects(store: Arc<dyn ObjectStore>, objects: Vec<ObjectLocation>) -> Vec<Location> {
    let mut gone = Vec::with_capacity(objects.len());
    for object in objects {
        let deleted = match object_path(&object) {
            Ok(key) => store.delete(&key).await.map_err(|e| object_error("delete", &object, e)),
            Err(e) => Err(e),
        };
        match deleted {
            Ok(()) => {
                crate::metrics::METRICS.janitor_removals.inc();
                gone.push(Location::Object(object));
            }
            Err(e) if e.code == "58P01" => gone.push(Location::Object(object)),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    gone
}

/// Aborts the multipart uploads of `uploads`, one after another; the objects whose upload may
/// still be open (the store did not answer), to be left with their records for a later start.
pub async fn abort_uploads(client: &Uploads, uploads: Vec<(ObjectLocation, MultipartId)>) -> HashSet<ObjectLocation> {
    let mut open = HashSet::new();
    for (object, id) in uploads {
        let aborted = match object_path(&object) {
            Ok(key) => client.abort(&key, &id).await.map_err(|e| object_error("abort the upload of", &object, e)),
            Err(e) => Err(e),
        };
        if let Err(e) = aborted {
            tracing::warn!("{e}");
            open.insert(object);
        }
    }
    open
}

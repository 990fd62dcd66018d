//! A write to a table on object storage. An object store has no rename, so there is no
//! staging area to publish from: each file is uploaded at its final key, under a name no
//! other write uses (Spark's, with the write's id in it), and Spark reads the layout as it
//! would its own. The commit stays the metastore transaction that adds the files to the
//! table's list; until then no reader lists them.
//!
//! Each object is recorded as pending in the metastore before its upload starts, so that
//! whatever a crash leaves behind is deleted at the next start. A write that does not
//! publish deletes its objects as it is dropped.

use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::object_stores::object_error;
use crate::catalog::location::{Location, ObjectLocation};
use crate::catalog::metastore::Metastore;
use crate::error::SqlError;

pub struct ObjectWrite {
    pub store: Arc<dyn ObjectStore>,
    table: ObjectLocation,
    metastore: Arc<Metastore>,
    /// Every object this write has started, to delete if it does not publish.
    started: Mutex<Vec<ObjectLocation>>,
}

impl ObjectWrite {
    pub fn new(store: Arc<dyn ObjectStore>, table: ObjectLocation, metastore: Arc<Metastore>) -> Self {
        ObjectWrite { store, table, metastore, started: Mutex::default() }
    }

    pub fn table_location(&self) -> Location {
        Location::Object(self.table.clone())
    }

    /// Records the object at `relative` (to the table) as pending and gives its key, for the
    /// upload to start.
    pub fn begin(&self, relative: &str) -> Result<(Location, ObjectPath), SqlError> {
        let location = Location::Object(self.table.clone()).join(relative);
        let Location::Object(object) = &location else { unreachable!("an object location joins to one") };
        self.metastore.add_pending(std::slice::from_ref(&location))?;
        self.started.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(object.clone());
        Ok((location.clone(), ObjectPath::from(object.key.as_str())))
    }

    /// Deletes every object the write started, in the background, and forgets their pending
    /// records once they are gone; those it cannot delete stay pending for the next start.
    pub fn discard(&self) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        if started.is_empty() {
            return;
        }
        delete_in_background(Arc::clone(&self.store), Arc::clone(&self.metastore), started);
    }
}

/// Deletes `objects` from `store` on the runtime, and forgets the pending or retired records
/// of those gone (a missing object is gone too). Without a runtime (a process that is
/// stopping) they stay recorded, and the next start deletes them.
pub fn delete_in_background(store: Arc<dyn ObjectStore>, metastore: Arc<Metastore>, objects: Vec<ObjectLocation>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        let mut gone = Vec::with_capacity(objects.len());
        for object in objects {
            match store.delete(&ObjectPath::from(object.key.as_str())).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    crate::metrics::METRICS.janitor_removals.inc();
                    gone.push(Location::Object(object));
                }
                Err(e) => tracing::warn!("{}", object_error("delete", &object, e)),
            }
        }
        if let Err(e) = metastore.forget_files(&gone) {
            tracing::warn!("could not record deleted objects: {e}");
        }
    });
}

//! One file's upload to an object store, as the Parquet writer's sink.
//!
//! A file smaller than a part goes up in one PUT as it completes. A larger one becomes a
//! multipart upload whose id is recorded with the object's pending record before its first
//! part leaves. The parts of an upload never completed (a crash, a store that stopped
//! answering) are out of every listing and stay in the store until the upload is aborted: one
//! dropped before completing is aborted at once in the background, and the next start aborts
//! those left by a crash, by their recorded ids. A crash between an upload's creation and its
//! record leaves an upload without parts.
//!
//! object_store's `BufWriter` does the same but hides the upload's id.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::parquet::errors::{ParquetError, Result};
use object_store::WriteMultipart;
use object_store::multipart::PartId;
use object_store::path::Path as ObjectPath;
use object_store::{MultipartId, MultipartUpload, ObjectStoreExt, PutPayload, PutPayloadMut, PutResult, UploadPart};

use super::object_stores::Uploads;
use super::object_write::ObjectWrite;
use crate::catalog::location::Location;

/// The size of each part but the last; S3 takes parts of 5 MiB and more.
const PART_BYTES: usize = 10 * 1024 * 1024;
/// Parts of one upload in flight at once, the memory a write holds per open file.
const PARTS_IN_FLIGHT: usize = 8;

pub struct ObjectUpload {
    write: Arc<ObjectWrite>,
    location: Location,
    key: ObjectPath,
    state: UploadState,
}

enum UploadState {
    /// Less than a part so far.
    Buffered(PutPayloadMut),
    Parts {
        parts: WriteMultipart,
        id: MultipartId,
    },
    /// Completing or completed: `complete` aborts an upload whose completion fails, so a drop
    /// has nothing left to abort.
    Finishing,
}

impl ObjectUpload {
    pub fn new(write: Arc<ObjectWrite>, location: Location, key: ObjectPath) -> Self {
        ObjectUpload { write, location, key, state: UploadState::Buffered(PutPayloadMut::new()) }
    }

    pub async fn write(&mut self, bytes: Bytes) -> Result<()> {
        match &mut self.state {
            UploadState::Buffered(buffer) => {
                buffer.push(bytes);
                if buffer.content_length() >= PART_BYTES {
                    let buffered = std::mem::take(buffer);
                    self.start_parts(buffered.freeze()).await?;
                }
                Ok(())
            }
            UploadState::Parts { parts, .. } => {
                parts.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(external)?;
                parts.put(bytes);
                Ok(())
            }
            UploadState::Finishing => Err(ParquetError::General("the upload has completed".into())),
        }
    }

    /// Turns the upload into a multipart one, recorded before `buffered` goes as its first parts.
    async fn start_parts(&mut self, buffered: PutPayload) -> Result<()> {
        let uploads = &self.write.uploads;
        let id = uploads.create(&self.key).await.map_err(external)?;
        if let Err(e) = self.write.record_upload(&self.location, &id) {
            abort_in_background(uploads.clone(), self.key.clone(), id);
            return Err(external(e));
        }
        let recorded =
            RecordedParts { uploads: uploads.clone(), key: self.key.clone(), id: id.clone(), parts: Arc::default() };
        let mut parts = WriteMultipart::new_with_chunk_size(Box::new(recorded), PART_BYTES);
        for chunk in buffered.iter() {
            parts.put(chunk.clone());
        }
        self.state = UploadState::Parts { parts, id };
        Ok(())
    }

    pub async fn complete(&mut self) -> Result<()> {
        match std::mem::replace(&mut self.state, UploadState::Finishing) {
            UploadState::Buffered(buffer) => {
                self.write.store.put(&self.key, buffer.freeze()).await.map_err(external)?;
            }
            UploadState::Parts { parts, id } => {
                if let Err(e) = parts.finish().await {
                    abort_in_background(self.write.uploads.clone(), self.key.clone(), id);
                    return Err(external(e));
                }
            }
            UploadState::Finishing => {}
        }
        Ok(())
    }
}

impl Drop for ObjectUpload {
    /// Dropped before completing: the write failed or was cancelled, and its parts go.
    fn drop(&mut self) {
        if let UploadState::Parts { id, .. } = std::mem::replace(&mut self.state, UploadState::Finishing) {
            abort_in_background(self.write.uploads.clone(), self.key.clone(), id);
        }
    }
}

fn abort_in_background(uploads: Uploads, key: ObjectPath, id: MultipartId) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        if let Err(e) = uploads.abort(&key, &id).await {
            tracing::warn!("could not abort the upload of {key}, left for the next start: {e}");
        }
    });
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> ParquetError {
    ParquetError::External(Box::new(e))
}

/// The parts of an upload whose id is known, for `WriteMultipart` to cut and send.
struct RecordedParts {
    uploads: Uploads,
    key: ObjectPath,
    id: MultipartId,
    /// Each part's id once it is stored, by its index.
    parts: Arc<Mutex<Vec<Option<PartId>>>>,
}

impl std::fmt::Debug for RecordedParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedParts").field("key", &self.key).field("id", &self.id).finish()
    }
}

#[async_trait]
impl MultipartUpload for RecordedParts {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let index = {
            let mut parts = self.parts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            parts.push(None);
            parts.len() - 1
        };
        let (uploads, key, id, parts) =
            (self.uploads.clone(), self.key.clone(), self.id.clone(), Arc::clone(&self.parts));
        Box::pin(async move {
            let part = uploads.put_part(&key, &id, index, data).await?;
            parts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[index] = Some(part);
            Ok(())
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let parts: Option<Vec<PartId>> =
            self.parts.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect();
        let parts = parts.ok_or_else(|| object_store::Error::Generic {
            store: "S3",
            source: format!("a part of the upload of {} was not stored", self.key).into(),
        })?;
        self.uploads.complete(&self.key, &self.id, parts).await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.uploads.abort(&self.key, &self.id).await
    }
}

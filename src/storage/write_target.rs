//! Where a write's files wait for its commit: what the commit protocol and the Parquet writer
//! both go by.

use std::path::PathBuf;
use std::sync::Arc;

use super::object_write::ObjectWrite;

#[derive(Clone)]
pub enum WriteTarget {
    /// A local table's staging directory, whose files the commit renames into place.
    Staging(PathBuf),
    /// A table on object storage, whose files are written where they stay.
    InPlace(Arc<ObjectWrite>),
}

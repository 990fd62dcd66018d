//! Where a table's files live: a local directory, or a prefix of an object store's bucket
//! (`s3://bucket/prefix`). The metastore records a location, and every file's full path, as
//! the text [`Location::parse`] reads back.
//!
//! Spark on Hadoop names the same S3 objects `s3a://`; both are read, and `s3://` is what is
//! recorded, as object stores outside Hadoop name them.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::SqlError;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    Local(PathBuf),
    Object(ObjectLocation),
}

/// A key prefix in a bucket: `key` has no leading or trailing `/` and is empty for the
/// bucket's root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectLocation {
    pub bucket: String,
    pub key: String,
}

impl ObjectLocation {
    /// The URL that names the bucket's store: `s3://bucket`.
    pub fn store_url(&self) -> String {
        format!("{OBJECT_SCHEME}://{}", self.bucket)
    }
}

/// The scheme locations on object storage are recorded with.
pub const OBJECT_SCHEME: &str = "s3";

impl Location {
    /// A location as the metastore records it, or as LOCATION and `--warehouse` give it: an
    /// `s3://` or `s3a://` URL, or a local path (`file:` URLs too). Relative local paths are
    /// taken as given; callers that need absolute ones check.
    pub fn parse(text: &str) -> Result<Location, SqlError> {
        let Some((scheme, rest)) = text.split_once("://").filter(|(scheme, _)| !scheme.contains('/')) else {
            let path = text.strip_prefix("file:").unwrap_or(text);
            return Ok(Location::Local(PathBuf::from(path)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(SqlError::invalid_parameter(format!("{text} names no bucket")));
                }
                let key = key.trim_matches('/');
                if key.split('/').any(|part| part == "." || part == "..") || key.contains("//") {
                    return Err(SqlError::invalid_parameter(format!("{text} is not a plain object path")));
                }
                Ok(Location::Object(ObjectLocation { bucket: bucket.to_string(), key: key.to_string() }))
            }
            "file" => Ok(Location::Local(PathBuf::from(format!("/{}", rest.trim_start_matches('/'))))),
            other => Err(SqlError::feature_not_supported(format!(
                "locations of scheme {other}:// are not supported: use a local path or s3://"
            ))),
        }
    }

    /// The location `relative` (`/`-separated) below this one.
    pub fn join(&self, relative: &str) -> Location {
        match self {
            Location::Local(path) => Location::Local(path.join(relative)),
            Location::Object(object) => {
                let relative = relative.trim_matches('/');
                let key = match (object.key.is_empty(), relative.is_empty()) {
                    (_, true) => object.key.clone(),
                    (true, false) => relative.to_string(),
                    (false, false) => format!("{}/{relative}", object.key),
                };
                Location::Object(ObjectLocation { bucket: object.bucket.clone(), key })
            }
        }
    }

    /// The location one level up; `None` at a bucket's or file system's root.
    pub fn parent(&self) -> Option<Location> {
        match self {
            Location::Local(path) => path.parent().map(|p| Location::Local(p.to_path_buf())),
            Location::Object(object) if object.key.is_empty() => None,
            Location::Object(object) => {
                let key = object.key.rsplit_once('/').map_or("", |(parent, _)| parent);
                Some(Location::Object(ObjectLocation { bucket: object.bucket.clone(), key: key.to_string() }))
            }
        }
    }

    /// Whether this location is `other` or lies below it, a whole path segment at a time.
    pub fn starts_with(&self, other: &Location) -> bool {
        match (self, other) {
            (Location::Local(path), Location::Local(other)) => path.starts_with(other),
            (Location::Object(object), Location::Object(other)) => {
                object.bucket == other.bucket
                    && (other.key.is_empty()
                        || object.key == other.key
                        || object.key.strip_prefix(&other.key).is_some_and(|rest| rest.starts_with('/')))
            }
            _ => false,
        }
    }

    /// The directory, for a location on the local file system.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            Location::Object(_) => None,
        }
    }

    /// The directory, or a clear refusal for a location on object storage where `what` is
    /// not supported there.
    pub fn local_for(&self, what: &str) -> Result<&Path, SqlError> {
        self.local()
            .ok_or_else(|| SqlError::feature_not_supported(format!("{what} is not supported for tables at {self}")))
    }

    /// How Spark shows the location: `file:/path` or `s3://bucket/key`.
    pub fn uri(&self) -> String {
        match self {
            Location::Local(path) => format!("file:{}", path.display()),
            Location::Object(_) => self.to_string(),
        }
    }
}

/// The text the metastore records: the path itself, or the `s3://` URL.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Object(object) if object.key.is_empty() => write!(f, "{}", object.store_url()),
            Location::Object(object) => write!(f, "{}/{}", object.store_url(), object.key),
        }
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Self {
        Location::Local(path)
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Self {
        Location::Local(path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(text: &str) -> ObjectLocation {
        match Location::parse(text).unwrap() {
            Location::Object(object) => object,
            local => panic!("{text} read as {local:?}"),
        }
    }

    #[test]
    fn object_urls_are_read_and_written_back_alike() {
        let location = object("s3a://lake/warehouse/default/t/");
        assert_eq!((location.bucket.as_str(), location.key.as_str()), ("lake", "warehouse/default/t"));
        let text = Location::Object(location).to_string();
        assert_eq!(text, "s3://lake/warehouse/default/t");
        assert_eq!(Location::parse(&text).unwrap().to_string(), text);
        assert_eq!(Location::parse("s3://lake").unwrap().to_string(), "s3://lake");
    }

    #[test]
    fn paths_and_file_urls_are_local() {
        assert_eq!(Location::parse("/data/t").unwrap(), Location::Local(PathBuf::from("/data/t")));
        assert_eq!(Location::parse("file:/data/t").unwrap(), Location::Local(PathBuf::from("/data/t")));
        assert_eq!(Location::parse("file:///data/t").unwrap(), Location::Local(PathBuf::from("/data/t")));
        assert_eq!(Location::parse("/data/t").unwrap().uri(), "file:/data/t");
    }

    #[test]
    fn unknown_schemes_and_climbing_keys_are_refused() {
        assert_eq!(Location::parse("hdfs://nn/t").unwrap_err().code, "0A000");
        assert_eq!(Location::parse("s3://lake/a/../b").unwrap_err().code, "22023");
        assert_eq!(Location::parse("s3:///t").unwrap_err().code, "22023");
    }

    #[test]
    fn joins_parents_and_prefixes_go_by_whole_segments() {
        let table = Location::parse("s3://lake/w/t").unwrap();
        let file = table.join("d=1/part-0.parquet");
        assert_eq!(file.to_string(), "s3://lake/w/t/d=1/part-0.parquet");
        assert!(file.starts_with(&table));
        assert!(!Location::parse("s3://lake/w/t2/x").unwrap().starts_with(&table));
        assert!(!Location::parse("s3://other/w/t/x").unwrap().starts_with(&table));
        assert_eq!(file.parent().unwrap().parent().unwrap(), table);
        assert_eq!(Location::parse("s3://lake/w").unwrap().parent().unwrap().to_string(), "s3://lake");
        assert_eq!(Location::parse("s3://lake").unwrap().parent(), None);
        assert!(!table.starts_with(&Location::Local(PathBuf::from("/"))));
    }
}

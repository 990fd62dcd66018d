//! The object stores behind `s3://` locations: one client per bucket, built on first use
//! with the server's S3 settings, and shared by the scans DataFusion runs (it is the
//! runtime's [`ObjectStoreRegistry`]) and by the writes, commits and janitor here.
//!
//! Credentials and region come as the AWS tools take them: the `AWS_*` environment
//! variables first, then the shared credentials and config files (`AWS_PROFILE`, or
//! `default`). Requests that fail with a 5xx, a throttling answer or a dropped connection
//! are retried with exponential backoff, up to [`RETRY_TIMEOUT`] after the first attempt, and
//! at most [`MAX_REQUESTS`] are in flight per bucket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry, ObjectStoreUrl};
use object_store::aws::AmazonS3Builder;
use object_store::limit::LimitStore;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use url::Url;

use super::aws_profile::AwsProfile;
use crate::catalog::location::{Location, OBJECT_SCHEME, ObjectLocation};
use crate::error::SqlError;

/// How long a request is retried after its first attempt before its error is returned.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(20);
/// A store that does not accept a connection within this is taken as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, a multipart upload's part included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Requests one bucket's client has in flight at most; more wait their turn rather than open
/// ever more connections to the store.
const MAX_REQUESTS: usize = 64;

/// What `serve` was told about S3.
#[derive(Debug, Clone, Default)]
pub struct S3Settings {
    /// An S3-compatible server to use instead of AWS (`--s3-endpoint`).
    pub endpoint: Option<String>,
    /// Buckets addressed as host names (`bucket.endpoint`) rather than as the path's first
    /// segment.
    pub virtual_hosted: bool,
    /// Whether an `http://` endpoint may be used (`--s3-allow-http`).
    pub allow_http: bool,
}

#[derive(Debug)]
pub struct ObjectStores {
    settings: S3Settings,
    /// `file://` and whatever DataFusion registers itself.
    others: DefaultObjectStoreRegistry,
    buckets: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl ObjectStores {
    pub fn new(settings: S3Settings) -> Result<Arc<Self>, SqlError> {
        if let Some(endpoint) = &settings.endpoint
            && endpoint.starts_with("http://")
            && !settings.allow_http
        {
            return Err(SqlError::invalid_parameter(format!(
                "--s3-endpoint {endpoint} is plain HTTP: add --s3-allow-http to use it"
            )));
        }
        Ok(Arc::new(ObjectStores { settings, others: DefaultObjectStoreRegistry::new(), buckets: Mutex::default() }))
    }

    /// The client of `location`'s bucket.
    pub fn store(&self, location: &ObjectLocation) -> Result<Arc<dyn ObjectStore>, SqlError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(store) = buckets.get(&location.bucket) {
            return Ok(Arc::clone(store));
        }
        let store = self.build(&location.bucket)?;
        buckets.insert(location.bucket.clone(), Arc::clone(&store));
        Ok(store)
    }

    /// The whole of the file at `location`, local or an object.
    pub async fn read(&self, location: &Location) -> Result<bytes::Bytes, SqlError> {
        match location {
            Location::Local(path) => Ok(tokio::fs::read(path).await?.into()),
            Location::Object(object) => {
                let fetched = self.store(object)?.get(&object_path(object)?).await;
                let fetched = fetched.map_err(|e| object_error("read", object, e))?;
                fetched.bytes().await.map_err(|e| object_error("read", object, e))
            }
        }
    }

    fn build(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>, SqlError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
            && let Some(profile) = AwsProfile::load()?
        {
            builder = profile.apply(builder);
        }
        if let Some(endpoint) = &self.settings.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let client = ClientOptions::new()
            .with_allow_http(self.settings.allow_http)
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT);
        let retry = RetryConfig { retry_timeout: RETRY_TIMEOUT, ..RetryConfig::default() };
        let store = builder
            .with_virtual_hosted_style_request(self.settings.virtual_hosted)
            .with_client_options(client)
            .with_retry(retry)
            .build()
            .map_err(|e| SqlError::invalid_parameter(format!("cannot reach bucket {bucket}: {e}")))?;
        Ok(Arc::new(LimitStore::new(store, MAX_REQUESTS)))
    }
}

impl ObjectStoreRegistry for ObjectStores {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.others.register_store(url, store)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        match (url.scheme(), url.host_str()) {
            (OBJECT_SCHEME, Some(bucket)) => self
                .store(&ObjectLocation { bucket: bucket.to_string(), key: String::new() })
                .map_err(|e| DataFusionError::External(Box::new(e))),
            _ => self.others.get_store(url),
        }
    }
}

/// The store's path of `object`'s key, the key as it is: Spark's partition directories hold
/// `%XX` escapes already, which reach the store as they are, as Spark's own writes do.
pub fn object_path(object: &ObjectLocation) -> Result<ObjectPath, SqlError> {
    ObjectPath::parse(&object.key).map_err(|e| {
        SqlError::invalid_parameter(format!("s3://{}/{} is not a valid object key: {e}", object.bucket, object.key))
    })
}

/// The store a scan of files at `location` reads from, and the path of the location in it.
pub fn scan_path(location: &Location) -> Result<(ObjectStoreUrl, ObjectPath), SqlError> {
    match location {
        // `%` and non-ASCII characters in directory names (Spark escapes partition values as
        // `%XX`) are encoded once, as the local store decodes them, rather than read as
        // escapes themselves.
        Location::Local(path) => Ok((
            ObjectStoreUrl::local_filesystem(),
            ObjectPath::from_absolute_path(path).map_err(|e| SqlError::invalid_parameter(e.to_string()))?,
        )),
        Location::Object(object) => Ok((ObjectStoreUrl::parse(object.store_url())?, object_path(object)?)),
    }
}

/// An object store's failure as the client sees it: what was asked, of which object, and the
/// SQLSTATE [`SqlError::object_store`] gives.
pub fn object_error(what: &str, location: &ObjectLocation, e: object_store::Error) -> SqlError {
    SqlError::object_store(&format!("could not {what} s3://{}/{}", location.bucket, location.key), &e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_http_endpoint_needs_to_be_allowed() {
        let settings = S3Settings { endpoint: Some("http://127.0.0.1:9000".into()), ..S3Settings::default() };
        assert_eq!(ObjectStores::new(settings.clone()).unwrap_err().code, "22023");
        assert!(ObjectStores::new(S3Settings { allow_http: true, ..settings }).is_ok());
    }

    #[test]
    fn buckets_get_one_client_each_and_files_stay_local() {
        let stores = ObjectStores::new(S3Settings::default()).unwrap();
        let a = stores.get_store(&Url::parse("s3://a/x/y").unwrap()).unwrap();
        let again = stores.get_store(&Url::parse("s3://a/z").unwrap()).unwrap();
        let b = stores.get_store(&Url::parse("s3://b/").unwrap()).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(stores.get_store(&Url::parse("file:///").unwrap()).unwrap().to_string().contains("LocalFileSystem"));
    }
}

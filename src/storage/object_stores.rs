//! The object stores behind `s3://` locations: one client per bucket, built on first use
//! with the server's S3 settings, and shared by the scans DataFusion runs (it is the
//! runtime's [`ObjectStoreRegistry`]) and by the writes, commits and janitor here.
//!
//! Credentials and region come as the AWS tools take them: the `AWS_*` environment
//! variables first, then the shared credentials and config files (`AWS_PROFILE`, or
//! `default`). Requests that fail with a 5xx, a throttling answer or a dropped connection
//! are retried with exponential backoff, up to [`RETRY_TIMEOUT`] after the first attempt, and
//! at most [`MAX_REQUESTS`] are in flight per bucket, and as many parts of multipart uploads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry, ObjectStoreUrl};
use object_store::aws::AmazonS3Builder;
use object_store::limit::LimitStore;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, MultipartId, ObjectStore, ObjectStoreExt, PutPayload, PutResult, RetryConfig};
use tokio::sync::Semaphore;
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
    /// Buckets addressed as host names (`bucket.s3.amazonaws.com`, or the bucket's name
    /// before the endpoint's host) rather than as the path's first segment.
    pub virtual_hosted: bool,
    /// Whether an `http://` endpoint may be used (`--s3-allow-http`).
    pub allow_http: bool,
}

#[derive(Debug)]
pub struct ObjectStores {
    settings: S3Settings,
    /// `file://` and whatever DataFusion registers itself.
    others: DefaultObjectStoreRegistry,
    buckets: Mutex<HashMap<String, BucketClient>>,
}

/// One bucket's client, for its requests and for its multipart uploads.
#[derive(Clone)]
pub struct BucketClient {
    pub store: Arc<dyn ObjectStore>,
    pub uploads: Uploads,
}

impl std::fmt::Debug for BucketClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketClient").field("store", &self.store).finish_non_exhaustive()
    }
}

/// A bucket's multipart uploads, made a call at a time. `put_multipart` hides an upload's id,
/// and the id is what a later start needs to abort an upload a crash left: the store keeps
/// (and bills) the parts of an upload never completed, out of any listing, until it is
/// aborted.
#[derive(Clone)]
pub struct Uploads {
    store: Arc<dyn MultipartStore>,
    /// Parts in flight to the bucket, at most [`MAX_REQUESTS`].
    parts: Arc<Semaphore>,
}

impl Uploads {
    pub async fn create(&self, key: &ObjectPath) -> object_store::Result<MultipartId> {
        self.store.create_multipart(key).await
    }

    pub async fn put_part(
        &self,
        key: &ObjectPath,
        id: &MultipartId,
        index: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        // The semaphore is never closed.
        let _permit = self.parts.acquire().await.ok();
        self.store.put_part(key, id, index, data).await
    }

    pub async fn complete(
        &self,
        key: &ObjectPath,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        self.store.complete_multipart(key, id, parts).await
    }

    /// Aborts the upload, deleting its parts; one the store does not know (aborted or
    /// completed already) is done with too.
    pub async fn abort(&self, key: &ObjectPath, id: &MultipartId) -> object_store::Result<()> {
        match self.store.abort_multipart(key, id).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            done => done,
        }
    }
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
        Ok(self.client(&location.bucket)?.store)
    }

    /// The client of `bucket`, for requests and multipart uploads alike.
    pub fn client(&self, bucket: &str) -> Result<BucketClient, SqlError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = buckets.get(bucket) {
            return Ok(client.clone());
        }
        let client = self.build(bucket)?;
        buckets.insert(bucket.to_string(), client.clone());
        Ok(client)
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

    fn build(&self, bucket: &str) -> Result<BucketClient, SqlError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
            && let Some(profile) = AwsProfile::load()?
        {
            builder = profile.apply(builder);
        }
        match &self.settings.endpoint {
            Some(endpoint) if self.settings.virtual_hosted => {
                builder = builder.with_endpoint(bucket_endpoint(endpoint, bucket)?);
            }
            Some(endpoint) => builder = builder.with_endpoint(endpoint),
            None => {}
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
        Ok(BucketClient {
            uploads: Uploads { store: Arc::new(store.clone()), parts: Arc::new(Semaphore::new(MAX_REQUESTS)) },
            store: Arc::new(LimitStore::new(store, MAX_REQUESTS)),
        })
    }
}

/// The endpoint of `bucket` addressed by host name: the bucket's name before the host of
/// `endpoint`, as S3-compatible servers take it (`http://minio:9000` gives
/// `http://lake.minio:9000` for bucket `lake`). An IP address has no such names.
fn bucket_endpoint(endpoint: &str, bucket: &str) -> Result<String, SqlError> {
    let refused = |why: &str| SqlError::invalid_parameter(format!("--s3-endpoint {endpoint} {why}"));
    let mut url = Url::parse(endpoint).map_err(|e| refused(&format!("is not a URL: {e}")))?;
    let host = match url.host() {
        Some(url::Host::Domain(host)) => host.to_string(),
        Some(_) => return Err(refused("is an IP address: virtual-hosted-style addressing needs a host name")),
        None => return Err(refused("names no host")),
    };
    url.set_host(Some(&format!("{bucket}.{host}"))).map_err(|e| refused(&e.to_string()))?;
    Ok(url.as_str().trim_end_matches('/').to_string())
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
    fn virtual_hosted_buckets_are_host_names_under_the_endpoint() {
        assert_eq!(bucket_endpoint("http://minio.local:9000", "lake").unwrap(), "http://lake.minio.local:9000");
        assert_eq!(bucket_endpoint("https://storage.example.com/", "a-b").unwrap(), "https://a-b.storage.example.com");
        assert_eq!(bucket_endpoint("http://127.0.0.1:9000", "lake").unwrap_err().code, "22023");
        assert_eq!(bucket_endpoint("not a url", "lake").unwrap_err().code, "22023");
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

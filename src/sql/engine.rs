//! What all connections share: the data directory, the metastore, the file janitor,
//! DataFusion's runtime (memory pool, caches) and the list of connected backends.

use std::fs::{File, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::num::NonZeroUsize;

use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

use crate::catalog::location::Location;
use crate::catalog::metastore::Metastore;
use crate::config::{LOG_MIN_DURATION_STATEMENT, parse_log_min_duration};
use crate::error::SqlError;
use crate::exec::spark_connect::{SparkConnect, SparkConnectUrl};
use crate::planner::table_provider::SystemSchemas;
use crate::sql::activity::{Backend, BackendState, Backends};
use crate::sql::history::QueryHistory;
use crate::sql::pg_catalog;
use crate::sql::statement_stats::{DEFAULT_STATEMENT_STATS_MAX, StatementStats};
use crate::storage::janitor::FileJanitor;
use crate::storage::object_stores::{ObjectStores, S3Settings};

pub const METASTORE_FILE: &str = "metastore.sqlite";
pub const WAREHOUSE_DIR: &str = "warehouse";
/// See [`Engine::sort_in_place_bytes`].
const MAX_SORT_IN_PLACE_BYTES: usize = 128 << 20;

pub const SPILL_DIR: &str = "spill";

/// How often shutting down looks whether the statements have ended.
const SHUTDOWN_POLL: Duration = Duration::from_millis(20);
/// How long shutting down waits for cancelled statements to stop.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Locked by the server that owns the data directory; holds its process id.
pub const LOCK_FILE: &str = "bucketsql.lock";

/// Server-wide settings from the command line.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Directories (and `s3://` prefixes) under which `CREATE TABLE … LOCATION` may place or
    /// find tables.
    pub allowed_locations: Vec<Location>,
    /// Where managed tables live; `<data-dir>/warehouse` when not given.
    pub warehouse: Option<Location>,
    /// How `s3://` locations are reached.
    pub s3: S3Settings,
    /// Memory all running queries share, in bytes; operators that can spill (sorts, joins,
    /// aggregates) spill to `<data-dir>/spill` past it, others fail with SQLSTATE 53200.
    pub memory_limit: Option<usize>,
    /// Statements the query history keeps, with their plans' metrics (0: none).
    pub query_history: usize,
    /// Normalised statement texts `pg_stat_statements` keeps (`pg_stat_statements.max`).
    pub statement_stats_max: usize,
    /// The server's `log_min_duration_statement` (PostgreSQL's text: `-1`, `250ms`, `1s`),
    /// which sessions may change.
    pub log_min_duration_statement: String,
    /// The Spark Connect server statements run on under `bucketsql.engine = spark` or `auto`.
    pub spark_connect: Option<SparkConnectUrl>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            allowed_locations: Vec::new(),
            warehouse: None,
            s3: S3Settings::default(),
            memory_limit: None,
            query_history: 0,
            statement_stats_max: DEFAULT_STATEMENT_STATS_MAX,
            log_min_duration_statement: "-1".to_string(),
            spark_connect: None,
        }
    }
}

pub struct Engine {
    /// Memory a sort keeps back for merging its spilled runs; scaled down under a small
    /// `--memory-limit` so that sorts can still spill.
    pub sort_spill_reservation: Option<usize>,
    /// A sort holding less than this sorts its rows in one piece; past it, it sorts runs of
    /// this size and merges them. 128 MiB (twice Spark's advisory partition size, so that the
    /// partitions adaptive execution coalesces sort without a merge, which costs more than the
    /// sort) when `--memory-limit` affords it: a piece sorted whole is copied once more than
    /// the pool sees, so it is a thirty-second of the limit, and never under 32 MiB.
    pub sort_in_place_bytes: usize,
    pub metastore: Arc<Metastore>,
    pub janitor: Arc<FileJanitor>,
    /// `pg_catalog` and `information_schema`, shared by every session's catalog.
    pub system_schemas: SystemSchemas,
    pub runtime: Arc<RuntimeEnv>,
    /// The connected clients, which `pg_stat_activity` lists.
    pub backends: Arc<Backends>,
    /// The statements run lately, which the web UI shows.
    pub history: QueryHistory,
    /// `pg_stat_statements`' figures, saved at shutdown.
    pub statement_stats: Arc<StatementStats>,
    /// `--memory-limit` (the queries' pool and the footer cache together), `None` when unbounded.
    pub memory_limit: Option<usize>,
    /// The Spark cluster `serve --spark-connect` names.
    pub spark: Option<Arc<SparkConnect>>,
    log_min_duration_statement: String,
    warehouse: Location,
    allowed_locations: Vec<Location>,
    /// Held while the engine lives: one server per data directory.
    _lock: File,
}

impl Engine {
    /// Opens (creating if missing) a data directory, upgrades its metastore and removes what
    /// interrupted writes left behind.
    pub fn open(data_dir: &Path, options: EngineOptions) -> Result<Arc<Self>, SqlError> {
        std::fs::create_dir_all(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        parse_log_min_duration(&options.log_min_duration_statement)?;
        let lock = lock_data_dir(&data_dir)?;
        let warehouse = match options.warehouse {
            Some(Location::Local(dir)) => Location::Local(local_root(&dir)?),
            Some(object) => object,
            None => Location::Local(local_root(&data_dir.join(WAREHOUSE_DIR))?),
        };
        let stores = ObjectStores::new(options.s3)?;
        let spill = data_dir.join(SPILL_DIR);
        if spill.exists() {
            std::fs::remove_dir_all(&spill)?;
        }
        std::fs::create_dir_all(&spill)?;
        let metastore = Arc::new(Metastore::open(&data_dir.join(METASTORE_FILE))?);
        let janitor = FileJanitor::new(Arc::clone(&metastore), &warehouse, Arc::clone(&stores));
        janitor.recover()?;
        let mut runtime = RuntimeEnvBuilder::new().with_temp_file_path(spill).with_object_store_registry(stores);
        if let Some(limit) = options.memory_limit {
            let footers = footer_cache_bytes(limit);
            let queries = limit - footers;
            let pool = TrackConsumersPool::new(FairSpillPool::new(queries), NonZeroUsize::new(5).expect("non-zero"));
            runtime = runtime.with_memory_pool(Arc::new(pool)).with_metadata_cache_limit(footers);
        }
        let allowed_locations = options
            .allowed_locations
            .into_iter()
            .map(|root| match root {
                Location::Local(dir) => Ok(Location::Local(local_root(&dir)?)),
                object => Ok(object),
            })
            .collect::<Result<_, SqlError>>()?;
        Ok(Arc::new(Engine {
            sort_spill_reservation: options.memory_limit.map(|limit| (limit / 16).clamp(256 << 10, 10 << 20)),
            sort_in_place_bytes: options
                .memory_limit
                .map_or(MAX_SORT_IN_PLACE_BYTES, |limit| (limit / 32).clamp(32 << 20, MAX_SORT_IN_PLACE_BYTES)),
            system_schemas: pg_catalog::system_schemas(&metastore),
            metastore,
            janitor,
            runtime: runtime.build_arc()?,
            backends: Arc::default(),
            history: QueryHistory::new(options.query_history),
            statement_stats: Arc::new(StatementStats::open(&data_dir, options.statement_stats_max)),
            memory_limit: options.memory_limit,
            spark: options.spark_connect.map(SparkConnect::new),
            log_min_duration_statement: options.log_min_duration_statement,
            warehouse,
            allowed_locations,
            _lock: lock,
        }))
    }

    /// Shutting down: waits up to `timeout` for the statements running to end, cancels those
    /// still running, and waits for them to stop (a write that is cancelled publishes
    /// nothing); then saves `pg_stat_statements`. Returns how many statements were cancelled.
    pub async fn finish_statements(&self, timeout: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + timeout;
        let running = || -> Vec<Arc<Backend>> {
            self.backends
                .logged_in()
                .into_iter()
                .filter(|backend| backend.statement().state == BackendState::Active)
                .collect()
        };
        while !running().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(SHUTDOWN_POLL).await;
        }
        let cancelled = running();
        for backend in &cancelled {
            backend.cancel_statement();
        }
        let stopped = tokio::time::Instant::now() + CANCEL_GRACE;
        while !running().is_empty() && tokio::time::Instant::now() < stopped {
            tokio::time::sleep(SHUTDOWN_POLL).await;
        }
        if let Err(e) = self.statement_stats.save() {
            tracing::warn!("could not save pg_stat_statements: {e}");
        }
        cancelled.len()
    }

    /// A setting the server was started with (`serve`'s flags), which sessions start from.
    pub fn server_setting(&self, name: &str) -> Option<String> {
        match name.to_lowercase().as_str() {
            LOG_MIN_DURATION_STATEMENT => Some(self.log_min_duration_statement.clone()),
            "pg_stat_statements.max" => Some(self.statement_stats.max().to_string()),
            _ => None,
        }
    }

    /// An external table's directory or object prefix, if it lies under a root allowed at
    /// startup.
    pub fn external_location(&self, location: &str) -> Result<Location, SqlError> {
        let path = match Location::parse(location)? {
            Location::Local(path) => path,
            object => return self.allowed(location, object),
        };
        if !path.is_absolute() {
            return Err(SqlError::invalid_parameter(format!("LOCATION must be an absolute path, not {location}")));
        }
        // Resolve `..` and links through the nearest existing ancestor, so that a path cannot
        // climb out of an allowed root.
        let mut existing = path.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            rest.push(
                existing.file_name().ok_or_else(|| SqlError::invalid_parameter("LOCATION has no existing ancestor"))?,
            );
            existing =
                existing.parent().ok_or_else(|| SqlError::invalid_parameter("LOCATION has no existing ancestor"))?;
        }
        let mut resolved = existing.canonicalize()?;
        for part in rest.iter().rev() {
            if *part == ".." || *part == "." {
                return Err(SqlError::invalid_parameter(format!("LOCATION {location} is not a plain path")));
            }
            resolved.push(part);
        }
        self.allowed(location, Location::Local(resolved))
    }

    fn allowed(&self, given: &str, location: Location) -> Result<Location, SqlError> {
        if self.allowed_locations.iter().any(|root| location.starts_with(root)) {
            Ok(location)
        } else {
            Err(SqlError::insufficient_privilege(format!(
                "LOCATION {given} is outside the directories this server allows (--allow-location)"
            )))
        }
    }

    /// Where a managed table's files live: `<warehouse>/<schema>/<table>`, the warehouse
    /// being `<data-dir>/warehouse` unless `--warehouse` names another. Names that are not
    /// plain identifiers never become paths.
    pub fn managed_location(&self, schema: &str, table: &str) -> Result<Location, SqlError> {
        Ok(self.warehouse.join(valid_name(schema)?).join(valid_name(table)?))
    }
}

/// Spark's `SessionCatalog.validateName`: schema and table names are letters, digits and
/// `_`, so that a name can never be a path of its own (`/etc`, `..`, `a/b`).
pub fn valid_name(name: &str) -> Result<&str, SqlError> {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(name)
    } else {
        Err(SqlError::new(
            "42602",
            format!(
                "`{name}` is not a valid name for tables/schemas. Valid names only contain alphabet characters, numbers and _."
            ),
        ))
    }
}

/// The share of `--memory-limit` that Parquet footers stay cached in (the scans' reads go
/// through it, `exec/parquet_reads.rs`); the queries share the rest.
fn footer_cache_bytes(limit: usize) -> usize {
    (limit / 32).clamp(1 << 20, 256 << 20).min(limit / 2)
}

/// A local directory tables live under, made if missing, as its canonical path (so that a
/// location below it is recognised however it is spelt).
fn local_root(dir: &Path) -> Result<PathBuf, SqlError> {
    std::fs::create_dir_all(dir)?;
    Ok(dir.canonicalize()?)
}

/// Takes the data directory's lock file, so that a second server on the same directory
/// stops before it touches anything (its start-up cleanup would delete the first one's
/// spill files and pending writes).
fn lock_data_dir(data_dir: &Path) -> Result<File, SqlError> {
    let path = data_dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let by = if holder.is_empty() { String::new() } else { format!(" (process {holder})") };
            return Err(SqlError::new(
                "55006",
                format!("data directory {} is in use by another bucketsql server{by}", data_dir.display()),
            ));
        }
        Err(TryLockError::Error(e)) => return Err(e.into()),
    }
    file.set_len(0)?;
    file.write_all(std::process::id().to_string().as_bytes())?;
    Ok(file)
}

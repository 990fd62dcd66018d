//! What all connections share: the data directory, the metastore, the file janitor and
//! DataFusion's runtime (memory pool, caches).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::num::NonZeroUsize;

use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

use crate::catalog::metastore::Metastore;
use crate::catalog::provider::MetastoreCatalog;
use crate::server::pg_catalog;
use crate::sql::error::SqlError;
use crate::sql::session::Session;
use crate::storage::janitor::FileJanitor;

pub const METASTORE_FILE: &str = "metastore.sqlite";
pub const WAREHOUSE_DIR: &str = "warehouse";

pub const SPILL_DIR: &str = "spill";

/// Server-wide settings from the command line.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Directories under which `CREATE TABLE … LOCATION` may place or find tables.
    pub allowed_locations: Vec<PathBuf>,
    /// Memory all running queries share, in bytes; operators that can spill (sorts, joins,
    /// aggregates) spill to `<data-dir>/spill` past it, others fail with SQLSTATE 53200.
    pub memory_limit: Option<usize>,
}

pub struct Engine {
    /// Memory a sort keeps back for merging its spilled runs; scaled down under a small
    /// `--memory-limit` so that sorts can still spill.
    pub sort_spill_reservation: Option<usize>,
    pub metastore: Arc<Metastore>,
    pub janitor: Arc<FileJanitor>,
    pub catalog: Arc<MetastoreCatalog>,
    pub runtime: Arc<RuntimeEnv>,
    warehouse: PathBuf,
    allowed_locations: Vec<PathBuf>,
}

impl Engine {
    /// Opens (creating if missing) a data directory, upgrades its metastore and removes what
    /// interrupted writes left behind.
    pub fn open(data_dir: &Path, options: EngineOptions) -> Result<Arc<Self>, SqlError> {
        std::fs::create_dir_all(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        let warehouse = data_dir.join(WAREHOUSE_DIR);
        std::fs::create_dir_all(&warehouse)?;
        let spill = data_dir.join(SPILL_DIR);
        if spill.exists() {
            std::fs::remove_dir_all(&spill)?;
        }
        std::fs::create_dir_all(&spill)?;
        let metastore = Arc::new(Metastore::open(&data_dir.join(METASTORE_FILE))?);
        let janitor = FileJanitor::new(Arc::clone(&metastore));
        janitor.recover()?;
        let mut runtime = RuntimeEnvBuilder::new().with_temp_file_path(spill);
        if let Some(limit) = options.memory_limit {
            let pool = TrackConsumersPool::new(FairSpillPool::new(limit), NonZeroUsize::new(5).expect("non-zero"));
            runtime = runtime.with_memory_pool(Arc::new(pool));
        }
        let allowed_locations = options
            .allowed_locations
            .iter()
            .map(|dir| {
                std::fs::create_dir_all(dir)?;
                dir.canonicalize()
            })
            .collect::<Result<_, _>>()?;
        Ok(Arc::new(Engine {
            sort_spill_reservation: options.memory_limit.map(|limit| (limit / 16).clamp(256 << 10, 10 << 20)),
            catalog: Arc::new(pg_catalog::with_system_schemas(MetastoreCatalog::new(Arc::clone(&metastore)), &metastore)),
            metastore,
            janitor,
            runtime: runtime.build_arc()?,
            warehouse,
            allowed_locations,
        }))
    }

    /// An external table's directory, if it lies under a root allowed at startup.
    pub fn external_location(&self, location: &str) -> Result<PathBuf, SqlError> {
        let path = PathBuf::from(location.strip_prefix("file://").or(location.strip_prefix("file:")).unwrap_or(location));
        if !path.is_absolute() {
            return Err(SqlError::invalid_parameter(format!("LOCATION must be an absolute path, not {location}")));
        }
        // Resolve `..` and links through the nearest existing ancestor, so that a path cannot
        // climb out of an allowed root.
        let mut existing = path.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            rest.push(existing.file_name().ok_or_else(|| SqlError::invalid_parameter("LOCATION has no existing ancestor"))?);
            existing = existing.parent().ok_or_else(|| SqlError::invalid_parameter("LOCATION has no existing ancestor"))?;
        }
        let mut resolved = existing.canonicalize()?;
        for part in rest.iter().rev() {
            if *part == ".." || *part == "." {
                return Err(SqlError::invalid_parameter(format!("LOCATION {location} is not a plain path")));
            }
            resolved.push(part);
        }
        if self.allowed_locations.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else {
            Err(SqlError::insufficient_privilege(format!(
                "LOCATION {location} is outside the directories this server allows (--allow-location)"
            )))
        }
    }

    /// Where a managed table's files live: `<data-dir>/warehouse/<schema>/<table>`.
    pub fn managed_location(&self, schema: &str, table: &str) -> PathBuf {
        self.warehouse.join(schema).join(table)
    }

    pub fn new_session(self: &Arc<Self>) -> Result<Session, SqlError> {
        Session::new(Arc::clone(self))
    }
}

//! What all connections share: the data directory, the metastore, the file janitor and
//! DataFusion's runtime (memory pool, caches).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

use crate::catalog::metastore::Metastore;
use crate::catalog::provider::MetastoreCatalog;
use crate::sql::error::SqlError;
use crate::sql::session::Session;
use crate::storage::janitor::FileJanitor;

pub const METASTORE_FILE: &str = "metastore.sqlite";
pub const WAREHOUSE_DIR: &str = "warehouse";

pub struct Engine {
    pub metastore: Arc<Metastore>,
    pub janitor: Arc<FileJanitor>,
    pub catalog: Arc<MetastoreCatalog>,
    pub runtime: Arc<RuntimeEnv>,
    warehouse: PathBuf,
}

impl Engine {
    /// Opens (creating if missing) a data directory, upgrades its metastore and removes what
    /// interrupted writes left behind.
    pub fn open(data_dir: &Path) -> Result<Arc<Self>, SqlError> {
        std::fs::create_dir_all(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        let warehouse = data_dir.join(WAREHOUSE_DIR);
        std::fs::create_dir_all(&warehouse)?;
        let metastore = Arc::new(Metastore::open(&data_dir.join(METASTORE_FILE))?);
        let janitor = FileJanitor::new(Arc::clone(&metastore));
        janitor.recover()?;
        let runtime = RuntimeEnvBuilder::new().build_arc()?;
        Ok(Arc::new(Engine {
            catalog: Arc::new(MetastoreCatalog::new(Arc::clone(&metastore))),
            metastore,
            janitor,
            runtime,
            warehouse,
        }))
    }

    /// Where a managed table's files live: `<data-dir>/warehouse/<schema>/<table>`.
    pub fn managed_location(&self, schema: &str, table: &str) -> PathBuf {
        self.warehouse.join(schema).join(table)
    }

    pub fn new_session(self: &Arc<Self>) -> Result<Session, SqlError> {
        Session::new(Arc::clone(self))
    }
}

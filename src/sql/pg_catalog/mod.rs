//! PostgreSQL's system catalogs, so that psql, JDBC tools and ORMs can look around.
//!
//! - [`tables`]: `pg_catalog` and `information_schema` as views over the metastore, built
//!   again at every scan so that a new table shows up at once.
//! - [`functions`]: the catalog and session functions those tools call (`version()`,
//!   `format_type`, `pg_table_is_visible`, `current_setting`, ...).
//! - [`rewrite`]: turns the idioms of their catalog queries that DataFusion cannot plan into
//!   equivalent SQL that it can.
//!
//! Only PostgreSQL's built-in type OIDs appear. A metastore table's OID is `16384 + its
//! metastore id`, so it stays the same for as long as the table exists. The metastore's
//! `default` schema has the OID PostgreSQL gives `public` (2200); there is no `public`
//! schema, because nothing could be found in it.

pub mod functions;
pub mod rewrite;
pub mod tables;
pub mod types;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use datafusion::catalog::SchemaProvider;

use crate::catalog::metastore::{DEFAULT_SCHEMA, Metastore, TableMeta};
use crate::error::SqlError;
use crate::planner::table_provider::{CATALOG_NAME, MetastoreCatalog, MetastoreHandle};

pub use functions::register_functions;

pub const PG_CATALOG: &str = "pg_catalog";
pub const INFORMATION_SCHEMA: &str = "information_schema";

/// The server's one database: the catalog every connection reads, whatever name it asked for.
pub const DATABASE_NAME: &str = CATALOG_NAME;
pub const DATABASE_OID: i32 = 1;
/// The server has no roles: every connection acts as this superuser, named like
/// PostgreSQL's bootstrap superuser, with its OID.
pub const SUPERUSER: &str = "postgres";
pub const SUPERUSER_OID: i32 = 10;

pub const PG_CATALOG_OID: i32 = 11;
pub const DEFAULT_SCHEMA_OID: i32 = 2200;
pub const INFORMATION_SCHEMA_OID: i32 = 13207;
/// The first OID PostgreSQL gives user objects.
pub const FIRST_USER_OID: i32 = 16384;
/// Tables are Parquet files: the table access method `\d+` reports.
pub const PARQUET_AM_OID: i32 = 2;
pub const PG_CLASS_OID: i32 = 1259;
pub const DEFAULT_TABLESPACE_OID: i32 = 1663;
pub const DEFAULT_COLLATION_OID: i32 = 100;
pub const UTF8_ENCODING: i32 = 6;

/// The connection's settings as `SET` left them; `SHOW`, `current_setting()`,
/// `set_config()` and `pg_settings` all read this one map.
#[derive(Debug, Clone, Default)]
pub struct Settings(pub Arc<Mutex<BTreeMap<String, String>>>);

impl Settings {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A setting's value: the session's own, else the server's or Spark's default.
    pub fn get(&self, name: &str) -> Option<String> {
        let name = name.to_lowercase();
        self.lock().get(&name).cloned().or_else(|| crate::config::default_setting(&name).map(str::to_string))
    }
}

/// The engine's catalog with `pg_catalog` and `information_schema` beside the metastore's
/// schemas.
pub fn with_system_schemas(catalog: MetastoreCatalog, metastore: &Arc<Metastore>) -> MetastoreCatalog {
    let handle = Arc::new(MetastoreHandle(Arc::clone(metastore)));
    catalog
        .with_system_schema(
            PG_CATALOG,
            tables::schema(tables::PG_CATALOG_VIEWS, Arc::clone(&handle)) as Arc<dyn SchemaProvider>,
        )
        .with_system_schema(INFORMATION_SCHEMA, tables::schema(tables::INFORMATION_SCHEMA_VIEWS, handle))
}

/// A metastore schema's namespace OID. The metastore keeps no number for a schema, so any
/// schema but `default` gets one from its name, stable and above every table OID in use.
pub fn schema_oid(name: &str) -> i32 {
    match name {
        DEFAULT_SCHEMA => DEFAULT_SCHEMA_OID,
        PG_CATALOG => PG_CATALOG_OID,
        INFORMATION_SCHEMA => INFORMATION_SCHEMA_OID,
        _ => name_oid(name),
    }
}

/// An OID in `[2^30, 2^31)` from a name (FNV-1a), for objects the metastore does not number.
pub fn name_oid(name: &str) -> i32 {
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    (0x4000_0000 | (hash & 0x3fff_ffff)) as i32
}

pub fn table_oid(meta: &TableMeta) -> i32 {
    FIRST_USER_OID + meta.id as i32
}

/// The metastore's schemas and tables as of one read.
pub struct Snapshot {
    pub schemas: Vec<String>,
    pub tables: Vec<TableMeta>,
}

impl Snapshot {
    pub fn load(metastore: &Metastore) -> Result<Self, SqlError> {
        let schemas = metastore.schema_names()?;
        let mut tables = Vec::new();
        for schema in &schemas {
            for name in metastore.table_names(schema)? {
                // A table dropped since the listing is simply not there.
                tables.extend(metastore.table(schema, &name)?);
            }
        }
        Ok(Snapshot { schemas, tables })
    }
}

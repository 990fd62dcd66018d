//! The OIDs and names PostgreSQL clients expect of the catalog. Only PostgreSQL's built-in
//! type OIDs appear. A metastore table's OID is `16384 + its metastore id`, so it stays the
//! same for as long as the table exists. The metastore's `default` schema has the OID
//! PostgreSQL gives `public` (2200); there is no `public` schema, because nothing could be
//! found in it.

use crate::catalog::metastore::DEFAULT_SCHEMA;

use crate::catalog::table::TableMeta;
use crate::planner::table_provider::CATALOG_NAME;

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

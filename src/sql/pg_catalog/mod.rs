//! PostgreSQL's system catalogs, so that psql, JDBC tools and ORMs can look around.
//!
//! - [`views`]: `pg_catalog` and `information_schema` as views over the metastore, the
//!   session and the server's connections, their rows built again at every scan
//!   ([`catalog_schema`]) so that a new table shows up at once.
//! - [`functions`]: the catalog and session functions those tools call (`version()`,
//!   `format_type`, `pg_table_is_visible`, `current_setting`, ...).
//! - [`rewrite`]: turns the idioms of their catalog queries that DataFusion cannot plan into
//!   equivalent SQL that it can.

mod catalog_schema;
pub mod functions;
mod information_schema;
pub mod oids;
mod pg_catalog_rows;
mod pg_stat;
pub mod rewrite;
mod scan;
mod settings;
mod snapshot;
pub mod types;
mod values;
mod view;
mod views;

pub use catalog_schema::system_schemas;
pub use functions::register_functions;
pub use oids::table_oid;
pub use settings::Settings;

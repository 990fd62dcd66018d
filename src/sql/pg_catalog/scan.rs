//! What one scan of a catalog relation reads: the metastore's schemas and tables and the
//! catalog's own views as relations, the session's settings and the server's connections,
//! each loaded when first asked for.

use std::cell::OnceCell;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::Session;
use datafusion::error::{DataFusionError, Result};

use super::oids::{DEFAULT_SCHEMA_OID, INFORMATION_SCHEMA, PG_CATALOG, PG_CATALOG_OID, schema_oid, table_oid};
use super::settings::Settings;
use super::snapshot::Snapshot;
use crate::catalog::metastore::Metastore;
use crate::catalog::table::TableMeta;
use crate::sql::activity::{Backend, Backends};
use crate::sql::statement_stats::StatementStats;

/// A relation as `pg_class`, `pg_attribute` and `information_schema` describe it.
pub struct Relation {
    pub oid: i32,
    pub namespace: i32,
    pub schema: String,
    pub name: String,
    /// `r` for a metastore table, `v` for a catalog view.
    pub kind: &'static str,
    pub columns: Vec<Column>,
    pub comment: Option<String>,
    /// The table's layout as `key=value` storage options: partitioning and bucket spec.
    pub options: Option<Vec<String>>,
    pub rows: Option<u64>,
    pub bytes: u64,
}

pub struct Column {
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    pub comment: Option<String>,
}

impl Relation {
    fn table(meta: &TableMeta) -> Result<Self> {
        let columns = meta
            .columns
            .iter()
            .map(|c| {
                let data_type = c.ty.to_arrow().map_err(|e| DataFusionError::External(Box::new(e)))?;
                Ok(Column { name: c.name.clone(), data_type, nullable: c.nullable, comment: c.comment.clone() })
            })
            .collect::<Result<_>>()?;
        let mut options = Vec::new();
        if !meta.partition_columns.is_empty() {
            options.push(format!("partitioned_by=({})", meta.partition_columns.join(",")));
        }
        if let Some(spec) = &meta.bucket_spec {
            options.push(format!("clustered_by=({})", spec.bucket_columns.join(",")));
            if !spec.sort_columns.is_empty() {
                options.push(format!("sorted_by=({})", spec.sort_columns.join(",")));
            }
            options.push(format!("num_buckets={}", spec.num_buckets));
        }
        Ok(Relation {
            oid: table_oid(meta),
            namespace: schema_oid(&meta.schema),
            schema: meta.schema.clone(),
            name: meta.name.clone(),
            kind: "r",
            columns,
            comment: meta.comment.clone(),
            options: (!options.is_empty()).then_some(options),
            rows: Some(meta.files.iter().map(|f| f.row_count).sum()),
            bytes: meta.files.iter().map(|f| f.byte_size).sum(),
        })
    }

    /// Whether an unqualified name finds it: the search path is `pg_catalog`, `default`.
    pub fn visible(&self) -> bool {
        self.namespace == PG_CATALOG_OID || self.namespace == DEFAULT_SCHEMA_OID
    }

    pub fn qualified_name(&self) -> String {
        if self.visible() { self.name.clone() } else { format!("{}.{}", self.schema, self.name) }
    }
}

/// What one scan of a catalog relation reads, each part loaded when first asked for.
pub struct Scan<'a> {
    metastore: &'a Metastore,
    /// The catalog's own relations, which it lists before the metastore's tables.
    catalog: fn() -> Vec<Relation>,
    pub(super) state: Option<&'a dyn Session>,
    relations: OnceCell<Vec<Relation>>,
    schemas: OnceCell<Vec<String>>,
}

impl<'a> Scan<'a> {
    pub fn new(metastore: &'a Metastore, state: Option<&'a dyn Session>, catalog: fn() -> Vec<Relation>) -> Self {
        Scan { metastore, catalog, state, relations: OnceCell::new(), schemas: OnceCell::new() }
    }

    fn load(&self) -> Result<()> {
        if self.relations.get().is_none() {
            let snapshot = Snapshot::load(self.metastore).map_err(|e| DataFusionError::External(Box::new(e)))?;
            let mut relations = (self.catalog)();
            for meta in &snapshot.tables {
                relations.push(Relation::table(meta)?);
            }
            let _ = self.schemas.set(snapshot.schemas);
            let _ = self.relations.set(relations);
        }
        Ok(())
    }

    /// Every relation: the catalog views, then the metastore's tables.
    pub fn relations(&self) -> Result<&[Relation]> {
        self.load()?;
        Ok(self.relations.get().expect("loaded"))
    }

    /// Every schema: `pg_catalog`, `information_schema`, then the metastore's.
    pub fn schemas(&self) -> Result<Vec<&str>> {
        self.load()?;
        let metastore = self.schemas.get().expect("loaded").iter().map(String::as_str);
        Ok([PG_CATALOG, INFORMATION_SCHEMA].into_iter().chain(metastore).collect())
    }

    pub fn relation(&self, oid: i32) -> Result<Option<&Relation>> {
        Ok(self.relations()?.iter().find(|r| r.oid == oid))
    }

    pub(super) fn settings(&self) -> Option<Arc<Settings>> {
        self.state.and_then(|s| s.config().get_extension::<Settings>())
    }

    /// `pg_stat_statements`' figures; none outside a session.
    pub(super) fn statement_stats(&self) -> Option<Arc<StatementStats>> {
        self.state.and_then(|s| s.config().get_extension::<StatementStats>())
    }

    /// The server's logged-in connections; none outside a session.
    pub(super) fn backends(&self) -> Vec<Arc<Backend>> {
        self.state.and_then(|s| s.config().get_extension::<Backends>()).map_or_else(Vec::new, |b| b.logged_in())
    }
}

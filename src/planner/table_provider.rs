//! The metastore seen through DataFusion's catalog traits: `spark_catalog.<schema>.<table>`.
//!
//! Each lookup reads the table as the session sees it ([`SessionCatalog`]): its committed
//! version (the latest, or the transaction block's snapshot) with the block's own changes
//! applied, so a concurrent write is seen whole or not at all. Each session has its own
//! catalog over one shared set of system schemas.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;

use super::file_source_strategy::{is_partition_filter, plan_scan};
use crate::catalog::metastore::Metastore;
use crate::catalog::table::TableMeta;
use crate::error::SqlError;
use crate::storage::transaction::SessionCatalog;

/// The catalog name Spark gives its session catalog; plans and DESCRIBE print it.
pub const CATALOG_NAME: &str = "spark_catalog";

/// Schemas answered from elsewhere than the metastore (e.g. `pg_catalog`), by name: built once
/// and shared by every session's catalog.
pub type SystemSchemas = Vec<(String, Arc<dyn SchemaProvider>)>;

#[derive(Debug)]
pub struct MetastoreCatalog {
    tables: Arc<SessionCatalog>,
    /// Looked up before the metastore.
    system_schemas: SystemSchemas,
}

/// `Metastore` holds a SQLite connection, which has no `Debug`.
pub struct MetastoreHandle(pub Arc<Metastore>);

impl std::fmt::Debug for MetastoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metastore")
    }
}

impl MetastoreCatalog {
    /// The catalog as `tables` sees it, with `system_schemas` beside the metastore's.
    pub fn new(tables: Arc<SessionCatalog>, system_schemas: SystemSchemas) -> Self {
        MetastoreCatalog { tables, system_schemas }
    }
}

impl CatalogProvider for MetastoreCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names = self.tables.schema_names().unwrap_or_default();
        names.extend(self.system_schemas.iter().map(|(n, _)| n.clone()));
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if let Some((_, schema)) = self.system_schemas.iter().find(|(n, _)| n == name) {
            return Some(Arc::clone(schema));
        }
        match self.tables.schema_exists(name) {
            Ok(true) => Some(Arc::new(MetastoreSchema { tables: Arc::clone(&self.tables), schema: name.to_string() })),
            _ => None,
        }
    }
}

#[derive(Debug)]
struct MetastoreSchema {
    tables: Arc<SessionCatalog>,
    schema: String,
}

#[async_trait]
impl SchemaProvider for MetastoreSchema {
    fn table_names(&self) -> Vec<String> {
        self.tables.table_names(&self.schema).unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let meta = self.tables.table(&self.schema, name).map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(meta.map(|m| Arc::new(ParquetTable::new(m)) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        matches!(self.tables.table(&self.schema, name), Ok(Some(_)))
    }
}

/// One committed version of a table, read from its listed Parquet files only.
#[derive(Debug)]
pub struct ParquetTable {
    meta: Arc<TableMeta>,
    schema: SchemaRef,
}

impl ParquetTable {
    pub fn new(meta: TableMeta) -> Self {
        let schema = table_schema(&meta).expect("metastore types were validated when stored");
        ParquetTable { meta: Arc::new(meta), schema }
    }

    pub fn meta(&self) -> &TableMeta {
        &self.meta
    }
}

/// The Arrow schema of a table's columns.
pub fn table_schema(meta: &TableMeta) -> Result<SchemaRef, SqlError> {
    let fields = meta
        .columns
        .iter()
        .map(|c| Ok(Field::new(&c.name, c.ty.to_arrow()?, c.nullable)))
        .collect::<Result<Vec<_>, SqlError>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

#[async_trait]
impl TableProvider for ParquetTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Partition filters are applied exactly, by skipping partition directories; the others
    /// also stay above the scan, as Spark's `Filter` does.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if is_partition_filter(f, &self.meta.partition_columns) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let scan = plan_scan(state, Arc::clone(&self.meta), Arc::clone(&self.schema), projection, filters).await?;
        Ok(Arc::new(scan))
    }
}

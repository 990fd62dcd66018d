//! `pg_catalog` and `information_schema` as DataFusion schemas beside the metastore's: each
//! relation a table whose rows are built again at every scan, so that a new table shows up
//! at once.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;

use super::oids::{INFORMATION_SCHEMA, PG_CATALOG};
use super::scan::Scan;
use super::values::batch;
use super::view::View;
use super::views::{INFORMATION_SCHEMA_VIEWS, PG_CATALOG_VIEWS, catalog_relations};
use crate::catalog::metastore::Metastore;
use crate::planner::table_provider::{MetastoreHandle, SystemSchemas};

/// `pg_catalog` or `information_schema`.
struct CatalogSchema {
    views: &'static [View],
    metastore: Arc<MetastoreHandle>,
}

impl std::fmt::Debug for CatalogSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.views.iter().map(|v| v.name).collect();
        write!(f, "CatalogSchema({names:?})")
    }
}

pub fn schema(views: &'static [View], metastore: Arc<MetastoreHandle>) -> Arc<dyn SchemaProvider> {
    Arc::new(CatalogSchema { views, metastore })
}

#[async_trait]
impl SchemaProvider for CatalogSchema {
    fn table_names(&self) -> Vec<String> {
        self.views.iter().map(|v| v.name.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.views.iter().find(|v| v.name == name).map(|view| {
            Arc::new(CatalogTable { view, schema: view.schema(), metastore: Arc::clone(&self.metastore) })
                as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.views.iter().any(|v| v.name == name)
    }
}

struct CatalogTable {
    view: &'static View,
    schema: SchemaRef,
    metastore: Arc<MetastoreHandle>,
}

impl std::fmt::Debug for CatalogTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CatalogTable({})", self.view.name)
    }
}

impl CatalogTable {
    fn rows(&self, state: &dyn Session) -> Result<RecordBatch> {
        let scan = Scan::new(&self.metastore.0, Some(state), catalog_relations);
        batch(&self.schema, self.view.rows(&scan)?)
    }
}

#[async_trait]
impl TableProvider for CatalogTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = self.rows(state)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&self.schema), projection.cloned())?)
    }
}

/// `pg_catalog` and `information_schema`, which every session's catalog has beside the
/// metastore's schemas.
pub fn system_schemas(metastore: &Arc<Metastore>) -> SystemSchemas {
    let handle = Arc::new(MetastoreHandle(Arc::clone(metastore)));
    vec![
        (PG_CATALOG.to_string(), schema(PG_CATALOG_VIEWS, Arc::clone(&handle))),
        (INFORMATION_SCHEMA.to_string(), schema(INFORMATION_SCHEMA_VIEWS, handle)),
    ]
}

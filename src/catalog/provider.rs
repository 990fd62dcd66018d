//! The metastore seen through DataFusion's catalog traits: `spark_catalog.<schema>.<table>`.
//!
//! Each lookup reads the table's latest committed version, so one statement plans against
//! one snapshot of every table it names: a concurrent write is seen whole or not at all.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;

use super::metastore::{Metastore, TableMeta};
use crate::sql::error::SqlError;
use crate::storage::partition_path::partition_values;

/// The catalog name Spark gives its session catalog; plans and DESCRIBE print it.
pub const CATALOG_NAME: &str = "spark_catalog";

#[derive(Debug)]
pub struct MetastoreCatalog {
    metastore: Arc<MetastoreHandle>,
}

/// `Metastore` holds a SQLite connection, which has no `Debug`.
pub struct MetastoreHandle(pub Arc<Metastore>);

impl std::fmt::Debug for MetastoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metastore")
    }
}

impl MetastoreCatalog {
    pub fn new(metastore: Arc<Metastore>) -> Self {
        MetastoreCatalog { metastore: Arc::new(MetastoreHandle(metastore)) }
    }
}

impl CatalogProvider for MetastoreCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.metastore.0.schema_names().unwrap_or_default()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        match self.metastore.0.schema_exists(name) {
            Ok(true) => Some(Arc::new(MetastoreSchema {
                metastore: Arc::clone(&self.metastore),
                schema: name.to_string(),
            })),
            _ => None,
        }
    }
}

#[derive(Debug)]
struct MetastoreSchema {
    metastore: Arc<MetastoreHandle>,
    schema: String,
}

#[async_trait]
impl SchemaProvider for MetastoreSchema {
    fn table_names(&self) -> Vec<String> {
        self.metastore.0.table_names(&self.schema).unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let meta = self
            .metastore
            .0
            .table(&self.schema, name)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(meta.map(|m| Arc::new(ParquetTable::new(m)) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        matches!(self.metastore.0.table(&self.schema, name), Ok(Some(_)))
    }
}

/// One committed version of a table, read from its listed Parquet files only.
#[derive(Debug)]
pub struct ParquetTable {
    meta: TableMeta,
    schema: SchemaRef,
}

impl ParquetTable {
    pub fn new(meta: TableMeta) -> Self {
        let schema = table_schema(&meta).expect("metastore types were validated when stored");
        ParquetTable { meta, schema }
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

    /// Files are spread over `target_partitions` groups by size, so a large table is read by
    /// every core. Filters are not taken here: DataFusion pushes its `FilterExec` predicates
    /// into the Parquet source, which prunes row groups by their statistics.
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.meta.files.is_empty() {
            let projected = match projection {
                Some(p) => Arc::new(self.schema.project(p)?),
                None => Arc::clone(&self.schema),
            };
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        let groups = state.config().target_partitions().max(1);
        let partition_types: Vec<(String, DataType)> = self
            .meta
            .partition_columns
            .iter()
            .map(|name| Ok((name.clone(), self.schema.field_with_name(name)?.data_type().clone())))
            .collect::<Result<_>>()?;
        let mut by_size: Vec<_> = self.meta.files.iter().collect();
        by_size.sort_by(|a, b| b.byte_size.cmp(&a.byte_size).then(a.path.cmp(&b.path)));
        let mut file_groups: Vec<(u64, Vec<PartitionedFile>)> = vec![(0, Vec::new()); groups.min(by_size.len())];
        for file in by_size {
            let lightest = file_groups.iter_mut().min_by_key(|(bytes, _)| *bytes).expect("at least one group");
            lightest.0 += file.byte_size;
            let path = self.meta.file_path(file);
            let values = partition_values(&file.partition, &partition_types).map_err(|e| DataFusionError::External(Box::new(e)))?;
            lightest.1.push(PartitionedFile::new(path.to_string_lossy().to_string(), file.byte_size).with_partition_values(values));
        }
        let file_groups = file_groups.into_iter().map(|(_, files)| FileGroup::new(files)).collect();

        let partition_fields: Vec<FieldRef> = partition_types
            .iter()
            .map(|(name, _)| Ok(Arc::new(self.schema.field_with_name(name)?.clone())))
            .collect::<Result<_>>()?;
        let file_fields: Vec<FieldRef> = self
            .schema
            .fields()
            .iter()
            .filter(|f| !self.meta.partition_columns.contains(f.name()))
            .cloned()
            .collect();
        let table_schema =
            TableSchema::builder(Arc::new(Schema::new(file_fields))).with_table_partition_cols(partition_fields).build();
        let source = Arc::new(ParquetSource::new(table_schema));
        let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), source)
            .with_file_groups(file_groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        ParquetFormat::default().create_physical_plan(state, config).await
    }
}

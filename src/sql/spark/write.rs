//! Writes on Spark: `INSERT INTO`, `INSERT OVERWRITE` and `CREATE TABLE … AS` whose query
//! runs on Spark. Spark writes the rows, bucketed and sorted its way, into a staging table of
//! its catalog whose location is the write's staging directory (`<table>/_temporary/<id>`),
//! registered with the target's columns, partitioning and buckets. The server then checks
//! what Spark wrote as REFRESH TABLE checks a directory (bucket ids in the file names, each
//! column's stored type) and hands the files to the session's transaction, which commits them
//! as it commits its own writes: all at once, or nothing. The staging registration is dropped
//! from Spark's catalog either way; dropping it leaves the files, as it is external.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{Ident, Insert, ObjectName, Statement, TableObject};

use super::parameters;
use super::routing::relations;
use super::run::{mark_on_spark, on_spark};
use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::location::Location;
use crate::catalog::table::{DataFile, TableMeta};
use crate::error::SqlError;
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::sql::table_ddl::{quote_identifier, registration_statement};
use crate::sql::write::insert_mode::write_mode;
use crate::sql::write::static_partitions::insert_target;
use crate::storage::commit::{StagedFiles, StagedWrite};
use crate::storage::existing_files::{ExpectedLayout, discover};
use crate::storage::parquet_writer::StagedFile;
use crate::storage::write_target::WriteTarget;

/// The namespace of Spark's catalog that holds the staging tables of writes under way.
const STAGING_NAMESPACE: &str = "bucketsql_staging";

/// `INSERT INTO | OVERWRITE t …` with its query run on Spark.
pub(crate) async fn insert(
    session: &Session,
    stmt: &Statement,
    insert: &Insert,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    let meta = insert_target(session, insert)?;
    let mode = write_mode(session, insert, &meta).await?;
    // Spark reads the source's tables; the target is only written, through the staging table.
    let source = match &insert.source {
        Some(query) => Statement::Query(query.clone()),
        None => stmt.clone(),
    };
    let staged = stage(session, &source, &meta, |staging| {
        // What the target's mode replaces is decided at commit; Spark only appends to its
        // empty staging table.
        let mut into_staging = insert.clone();
        into_staging.table = TableObject::TableName(staging);
        into_staging.overwrite = false;
        into_staging.into = true;
        into_staging.table_alias = None;
        parameters::bind(&Statement::Insert(into_staging).to_string(), &params)
    })
    .await?;
    let rows = staged.files.iter().map(|f| f.rows as usize).sum();
    let change = CatalogChange::Write { table: TableRef::of(&meta), mode, files: staged.described() };
    session.tables.write(change, Some(staged))?;
    Ok(Output::Command { tag: "INSERT", rows: Some(rows) })
}

/// The rows of `CREATE TABLE … AS query` for `table` (not yet created), written by Spark:
/// `columns` names the table's column each of the query's columns goes to, in the query's
/// order.
pub(crate) async fn create_table_as(
    session: &Session,
    query: &Statement,
    table: &TableMeta,
    columns: &[String],
) -> Result<StagedFiles, SqlError> {
    let list: Vec<String> = columns.iter().map(|c| quote_identifier(c)).collect();
    stage(session, query, table, |staging| Ok(format!("INSERT INTO {staging} ({}) {query}", list.join(", ")))).await
}

/// Has Spark run the statement `fill` makes for the staging table it is given, and stages
/// the files Spark wrote for `meta`. `source` is the statement whose tables Spark reads.
async fn stage(
    session: &Session,
    source: &Statement,
    meta: &TableMeta,
    fill: impl FnOnce(ObjectName) -> Result<String, SqlError>,
) -> Result<StagedFiles, SqlError> {
    let write = StagedWrite::local(meta.location.local_for("writing on Spark")?).for_table(meta);
    let staging_name = format!("w_{}", write.id.simple());
    let mut staging = meta.clone();
    staging.schema = STAGING_NAMESPACE.to_string();
    staging.name = staging_name.clone();
    let WriteTarget::Staging(staging_dir) = write.target() else { unreachable!("a local write stages") };
    staging.location = Location::Local(staging_dir.clone());
    staging.files.clear();
    staging.partitions.clear();
    let fill = fill(ObjectName::from(vec![Ident::new(STAGING_NAMESPACE), Ident::new(&staging_name)]))?;
    let staging_table = format!("{}.{}", quote_identifier(STAGING_NAMESPACE), quote_identifier(&staging_name));
    mark_on_spark(session);
    let relations = relations(session, source)?;
    on_spark(session, &relations, |spark, id| {
        let (ddl, fill, staging_table) = (registration_statement(&staging), fill.clone(), staging_table.clone());
        async move {
            spark.run(&id, format!("CREATE NAMESPACE IF NOT EXISTS {}", quote_identifier(STAGING_NAMESPACE))).await?;
            spark.run(&id, ddl).await?;
            let written = spark.run(&id, fill).await;
            let dropped = spark.run(&id, format!("DROP TABLE IF EXISTS {staging_table}")).await;
            written.and(dropped)
        }
    })
    .await?;
    let expected = ExpectedLayout::new(&meta.columns, &meta.partition_columns, meta.bucket_spec.as_ref());
    let found = discover(&staging.location, &expected, session.tables.stores()).await?;
    let files = found.into_iter().map(|file| staged_file(&staging.location, file)).collect();
    Ok(StagedFiles { write, files })
}

/// A file Spark wrote into the staging directory `staging`, as the write will publish it.
fn staged_file(staging: &Location, file: DataFile) -> StagedFile {
    StagedFile {
        staged: staging.join(&file.path),
        relative: file.path,
        partition: file.partition,
        bucket: file.bucket,
        rows: file.row_count,
        bytes: file.byte_size,
    }
}

//! `CREATE TABLE` (with and without `AS query`, or `LIKE` another table): the table's columns,
//! partitioning and bucketing checked as Spark checks them, its files written or found, and the
//! metastore entry.

use std::collections::{BTreeMap, HashSet};

use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder, cast, col};
use datafusion::sql::sqlparser::ast::{
    ColumnDef, ColumnOption, CreateTable, CreateTableLikeKind, CreateTableOptions, DataType as SqlDataType,
    Expr as SqlExpr, FileFormat, HiveDistributionStyle, HiveIOFormat, Statement, Value as SqlValue,
};

use super::table_properties::check_statistics_property;
use crate::catalog::change::{CatalogChange, new_table_meta};
use crate::catalog::location::Location;
use crate::catalog::table::{BucketSpec, ColumnMeta, NewTable, TableMeta};
use crate::catalog::types::SparkType;
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::dialect::property_pairs;
use crate::sql::engine::valid_name;
use crate::sql::names::{described_table, table_name};
use crate::sql::output::Output;
use crate::sql::pg_catalog;
use crate::sql::session::Session;
use crate::sql::spark::{self, routing};
use crate::sql::write::table_writer::{TableLayout, write_table};
use crate::storage::commit::StagedFiles;
use crate::storage::existing_files::{ExpectedLayout, first_file_schema};

/// The only table format: Spark's default data source, and what its bucketing writes.
const PARQUET: &str = "parquet";

pub async fn create_table(session: &Session, create: &CreateTable) -> Result<Output, SqlError> {
    let (schema, name) = table_name(&create.name)?;
    valid_name(&name)?;
    let engine = &session.engine;
    if !session.tables.schema_exists(&schema)? {
        return Err(SqlError::undefined_schema(format!("schema \"{schema}\" does not exist")));
    }
    check_provider(create)?;
    let location = create.location.as_ref().or(create.hive_formats.as_ref().and_then(|f| f.location.as_ref()));
    // A table with LOCATION is EXTERNAL, as in Spark: DROP TABLE leaves its files alone.
    let (location, external) = match location {
        Some(dir) => (engine.external_location(dir)?, true),
        None => (engine.managed_location(&schema, &name)?, false),
    };
    if session.tables.table(&schema, &name)?.is_some() {
        if create.if_not_exists {
            return Ok(Output::Command { tag: "CREATE TABLE", rows: None });
        }
        return Err(SqlError::duplicate_table(format!("relation \"{schema}.{name}\" already exists")));
    }

    let like = like_source(session, create)?;
    let declared = declared_columns(&create.columns)?;
    let query_plan = match &create.query {
        Some(query) => {
            // Spark's COLUMN_ALREADY_EXISTS, before the planner names repeated columns apart.
            if let Some(name) = pg_catalog::rewrite::repeated_name(query) {
                return Err(SqlError::duplicate_column(format!(
                    "The column `{name}` already exists. Choose another name or rename the existing column."
                )));
            }
            Some(session.plan(&Statement::Query(query.clone())).await?)
        }
        None => None,
    };
    let mut columns = match (&like, &query_plan, declared.is_empty()) {
        (Some(source), ..) => source.columns.clone(),
        (None, None, true) if external => columns_of_files(session, &location).await?,
        (None, None, true) => return Err(SqlError::syntax("CREATE TABLE needs a column list or AS query")),
        (None, Some(plan), true) => columns_of(session, plan)?,
        _ => declared.clone(),
    };
    // As Spark names the table in its errors.
    let qualified = format!("`{CATALOG_NAME}`.`{schema}`.`{name}`");
    let (partition_columns, bucket_spec) = match &like {
        Some(source) => (source.partition_columns.clone(), source.bucket_spec.clone()),
        None => {
            let partition_columns = partition_columns(create, &qualified, &mut columns)?;
            let max_buckets = session.spark_conf().max_buckets;
            let bucket_spec = bucket_spec(create, &qualified, &columns, &partition_columns, max_buckets)?;
            (partition_columns, bucket_spec)
        }
    };
    let table = NewTable {
        location,
        schema,
        name,
        provider: PARQUET.to_string(),
        external,
        comment: create.comment.as_ref().map(|c| comment_text(c).to_string()),
        columns,
        partition_columns,
        bucket_spec,
        properties: table_properties(create)?,
    };

    let expected = ExpectedLayout::new(&table.columns, &table.partition_columns, table.bucket_spec.as_ref());
    let existing = if external { session.tables.discover(&table.location, &expected).await? } else { Vec::new() };
    let Some(plan) = query_plan else {
        session.tables.write(CatalogChange::CreateTable { table, files: existing }, None)?;
        return Ok(Output::Command { tag: "CREATE TABLE", rows: None });
    };
    if !existing.is_empty() {
        return Err(SqlError::duplicate_table(format!(
            "cannot create table {}.{} AS SELECT: its location {} already holds data files",
            table.schema, table.name, table.location
        )));
    }
    let staged = match (&create.query, routing::route_write(session, create.query.as_deref())?) {
        (Some(query), route) if route.on_spark => {
            // The table's column each of the query's columns goes to: its namesake when the
            // table took its columns from the query, else the one in its place.
            let targets: Vec<String> = if declared.is_empty() {
                plan.schema().fields().iter().map(|f| f.name().clone()).collect()
            } else {
                table.columns.iter().map(|c| c.name.clone()).collect()
            };
            let query = Statement::Query(query.clone());
            spark::write::create_table_as(session, &query, &new_table_meta(&table), &targets).await?
        }
        _ => {
            // The query's columns, by name when the table took them from it, by position
            // otherwise; either way in the table's order (partition columns last).
            let plan =
                if declared.is_empty() { reorder_to(plan, &table.columns)? } else { conform_to(plan, &table.columns)? };
            let write = session.tables.new_write(&table.location)?.of_new_table();
            let layout = TableLayout::new(&table.columns, &table.partition_columns, table.bucket_spec.as_ref());
            let files = write_table(&session.ctx, plan, &layout, &write).await?;
            StagedFiles { write, files }
        }
    };
    let rows = staged.files.iter().map(|f| f.rows as usize).sum();
    session.tables.write(CatalogChange::CreateTable { table, files: staged.described() }, Some(staged))?;
    Ok(Output::Command { tag: "SELECT", rows: Some(rows) })
}

/// The table of `CREATE TABLE t LIKE source`, as Spark's `CreateTableLikeCommand` takes it:
/// its columns, partitioning and bucketing, none of its properties or files.
fn like_source(session: &Session, create: &CreateTable) -> Result<Option<TableMeta>, SqlError> {
    let Some(CreateTableLikeKind::Plain(like) | CreateTableLikeKind::Parenthesized(like)) = &create.like else {
        return Ok(None);
    };
    let (schema, name) = table_name(&like.name)?;
    described_table(session, &schema, &name).map(Some)
}

/// `PARTITIONED BY (a, b)` names existing columns (Spark's data source form);
/// `PARTITIONED BY (a INT)` adds columns (the Hive form). Either way partition columns move
/// to the end, in partition order, as Spark orders them.
fn partition_columns(
    create: &CreateTable,
    qualified: &str,
    columns: &mut Vec<ColumnMeta>,
) -> Result<Vec<String>, SqlError> {
    let HiveDistributionStyle::PARTITIONED { columns: specs } = &create.hive_distribution else {
        return Ok(Vec::new());
    };
    let mut names = Vec::with_capacity(specs.len());
    let mut moved = Vec::with_capacity(specs.len());
    for spec in specs {
        let name = spec.name.value.to_lowercase();
        if names.contains(&name) {
            return Err(SqlError::duplicate_column(format!("partition column \"{name}\" specified more than once")));
        }
        let column = if matches!(spec.data_type, SqlDataType::Unspecified) {
            let position = columns.iter().position(|c| c.name == name).ok_or_else(|| {
                SqlError::undefined_column(format!(
                    "partition column `{name}` is not defined in table {qualified}, defined table columns are: {}.",
                    quoted_list(columns.iter().map(|c| c.name.as_str()))
                ))
            })?;
            columns.remove(position)
        } else {
            if columns.iter().any(|c| c.name == name) {
                return Err(SqlError::duplicate_column(format!("column \"{name}\" specified more than once")));
            }
            ColumnMeta { name: name.clone(), ty: SparkType::from_sql(&spec.data_type)?, nullable: true, comment: None }
        };
        names.push(name);
        moved.push(column);
    }
    if let Some(complex) = moved.iter().find(|c| c.ty.is_complex()) {
        return Err(SqlError::feature_not_supported(format!(
            "[INVALID_PARTITION_COLUMN_DATA_TYPE] Cannot use \"{}\" for partition column.",
            complex.ty.ddl_name()
        )));
    }
    if columns.is_empty() {
        return Err(SqlError::new("42P16", "Cannot use all columns for partition columns."));
    }
    columns.extend(moved);
    Ok(names)
}

/// `CLUSTERED BY (cols) [SORTED BY (cols)] INTO n BUCKETS`, validated as Spark validates it
/// (at most `spark.sql.sources.bucketing.maxBuckets` buckets).
fn bucket_spec(
    create: &CreateTable,
    qualified: &str,
    columns: &[ColumnMeta],
    partitions: &[String],
    max_buckets: u32,
) -> Result<Option<BucketSpec>, SqlError> {
    let Some(clustered) = &create.clustered_by else {
        return Ok(None);
    };
    let num_buckets = match &clustered.num_buckets {
        SqlValue::Number(n, _) => n.parse::<i64>().ok(),
        _ => None,
    };
    let num_buckets = match num_buckets {
        Some(n) if n > 0 && n <= i64::from(max_buckets) => n as u32,
        other => {
            let got = other.map_or_else(|| clustered.num_buckets.to_string(), |n| n.to_string());
            return Err(SqlError::new(
                "22003",
                format!(
                    "Number of buckets should be greater than 0 but less than or equal to bucketing.maxBuckets (`{max_buckets}`). Got `{got}`."
                ),
            ));
        }
    };
    let known = |kind: &str, name: &str| -> Result<String, SqlError> {
        let name = name.to_lowercase();
        if columns.iter().any(|c| c.name == name) {
            Ok(name)
        } else {
            Err(SqlError::undefined_column(format!(
                "{kind} column `{name}` is not defined in table {qualified}, defined table columns are: {}.",
                quoted_list(columns.iter().map(|c| c.name.as_str()))
            )))
        }
    };
    let bucket_columns = clustered.columns.iter().map(|c| known("bucket", &c.value)).collect::<Result<Vec<_>, _>>()?;
    let mut sort_columns = Vec::new();
    for order in clustered.sorted_by.iter().flatten() {
        if order.options.asc == Some(false) {
            return Err(SqlError::syntax("Column ordering must be ASC, was 'DESC'"));
        }
        let SqlExpr::Identifier(ident) = &order.expr else {
            return Err(SqlError::syntax(format!("SORTED BY takes column names, not {}", order.expr)));
        };
        sort_columns.push(known("sort", &ident.value)?);
    }
    for (kind, names) in [("bucket", &bucket_columns), ("sort", &sort_columns)] {
        let mut seen = HashSet::new();
        if let Some(dup) = names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(SqlError::duplicate_column(format!(
                "Found duplicate column(s) in the {kind} definition: `{dup}`"
            )));
        }
    }
    let complex = bucket_columns.iter().chain(&sort_columns).find_map(|name| {
        columns.iter().find(|c| &c.name == name && c.ty.is_complex()).map(|c| (name, c.ty.ddl_name()))
    });
    if let Some((name, ty)) = complex {
        return Err(SqlError::feature_not_supported(format!(
            "bucketing or sorting by column `{name}` of type {ty} is not supported; bucket by columns of simple types"
        )));
    }
    let partition_list = || partitions.join(", ");
    if let Some(c) = bucket_columns.iter().find(|c| partitions.contains(c)) {
        return Err(SqlError::new(
            "42P16",
            format!("bucketing column '{c}' should not be part of partition columns '{}'", partition_list()),
        ));
    }
    if let Some(c) = sort_columns.iter().find(|c| partitions.contains(c)) {
        return Err(SqlError::new(
            "42P16",
            format!("bucket sorting column '{c}' should not be part of partition columns '{}'", partition_list()),
        ));
    }
    Ok(Some(BucketSpec { num_buckets, bucket_columns, sort_columns }))
}

fn quoted_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// `TBLPROPERTIES (k = v, …)` and `OPTIONS (…)`, values as written without quotes; statistics
/// the planner reads must be counts.
fn table_properties(create: &CreateTable) -> Result<BTreeMap<String, String>, SqlError> {
    let options = match &create.table_options {
        CreateTableOptions::TableProperties(o) | CreateTableOptions::Options(o) => o.as_slice(),
        CreateTableOptions::None => &[],
        other => return Err(SqlError::feature_not_supported(format!("table options {other} are not supported"))),
    };
    let pairs = property_pairs(options).map_err(SqlError::syntax)?;
    for (key, value) in &pairs {
        check_statistics_property(key, value)?;
    }
    Ok(pairs.into_iter().collect())
}

fn check_provider(create: &CreateTable) -> Result<(), SqlError> {
    let provider = match create.hive_formats.as_ref().and_then(|f| f.storage.as_ref()) {
        None => return Ok(()),
        Some(HiveIOFormat::Using { format }) => format.value.to_lowercase(),
        Some(HiveIOFormat::FileFormat { format: FileFormat::PARQUET }) => return Ok(()),
        Some(other) => format!("{other:?}"),
    };
    if provider == PARQUET {
        Ok(())
    } else {
        Err(SqlError::feature_not_supported(format!(
            "table provider {provider} is not supported: tables are stored as parquet"
        )))
    }
}

fn comment_text(comment: &datafusion::sql::sqlparser::ast::CommentDef) -> &str {
    use datafusion::sql::sqlparser::ast::CommentDef;
    match comment {
        CommentDef::WithEq(text) | CommentDef::WithoutEq(text) => text,
    }
}

/// Column names are stored lower-cased: Spark resolves them case-insensitively, and
/// DataFusion lower-cases unquoted identifiers in queries.
pub(crate) fn declared_columns(definitions: &[ColumnDef]) -> Result<Vec<ColumnMeta>, SqlError> {
    let columns = definitions
        .iter()
        .map(|c| {
            let mut nullable = true;
            let mut comment = None;
            for option in &c.options {
                match &option.option {
                    ColumnOption::NotNull => nullable = false,
                    ColumnOption::Null => nullable = true,
                    ColumnOption::Comment(text) => comment = Some(text.clone()),
                    other => {
                        return Err(SqlError::feature_not_supported(format!("column option {other} is not supported")));
                    }
                }
            }
            Ok(ColumnMeta {
                name: c.name.value.to_lowercase(),
                ty: SparkType::from_sql(&c.data_type)?,
                nullable,
                comment,
            })
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    check_unique(&columns)?;
    Ok(columns)
}

fn check_unique(columns: &[ColumnMeta]) -> Result<(), SqlError> {
    let mut seen = HashSet::new();
    for column in columns {
        if !seen.insert(column.name.as_str()) {
            return Err(SqlError::duplicate_column(format!("column \"{}\" specified more than once", column.name)));
        }
    }
    Ok(())
}

/// The columns a CTAS creates from its query's output, typed after DataFusion's analyzer
/// coerces it: before, a `CASE` of an INT and a BIGINT has its first branch's type, INT, and
/// BIGINT values would be written under an INT column.
fn columns_of(session: &Session, plan: &LogicalPlan) -> Result<Vec<ColumnMeta>, SqlError> {
    let state = session.ctx.state();
    let analyzed = state.analyzer().execute_and_check(plan.clone(), state.config_options(), |_, _| {})?;
    columns_from(analyzed.schema().fields())
}

fn columns_from(fields: &datafusion::arrow::datatypes::Fields) -> Result<Vec<ColumnMeta>, SqlError> {
    let columns = fields
        .iter()
        .map(|f| {
            Ok(ColumnMeta {
                name: f.name().to_lowercase(),
                ty: SparkType::from_arrow(f.data_type())?,
                nullable: true,
                comment: None,
            })
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    check_unique(&columns)?;
    Ok(columns)
}

/// The columns of a directory of Parquet files registered without a column list.
async fn columns_of_files(session: &Session, location: &Location) -> Result<Vec<ColumnMeta>, SqlError> {
    let schema = first_file_schema(location, &[], session.tables.stores()).await?.ok_or_else(|| {
        SqlError::syntax(format!("{location} holds no data files to take columns from: give a column list"))
    })?;
    columns_from(schema.fields())
}

/// Projects a query's output onto the table's columns by position, with the table's names
/// and types.
fn conform_to(plan: LogicalPlan, columns: &[ColumnMeta]) -> Result<LogicalPlan, SqlError> {
    let width = plan.schema().fields().len();
    if width != columns.len() {
        return Err(SqlError::syntax(format!("the query returns {width} columns but the table has {}", columns.len())));
    }
    let exprs = columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let source = col(datafusion::common::Column::from(plan.schema().qualified_field(i)));
            Ok(cast(source, column.ty.to_arrow()?).alias(&column.name))
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    Ok(LogicalPlanBuilder::from(plan).project(exprs)?.build()?)
}

/// Selects a query's columns by name in the table's order.
fn reorder_to(plan: LogicalPlan, columns: &[ColumnMeta]) -> Result<LogicalPlan, SqlError> {
    let schema = plan.schema().clone();
    let exprs = columns
        .iter()
        .map(|column| {
            let index = (0..schema.fields().len())
                .find(|i| schema.field(*i).name().to_lowercase() == column.name)
                .ok_or_else(|| SqlError::internal(format!("column {} vanished from the query", column.name)))?;
            Ok(col(datafusion::common::Column::from(schema.qualified_field(index))).alias(&column.name))
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    Ok(LogicalPlanBuilder::from(plan).project(exprs)?.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::parse_one;

    /// The type of the one column of `CREATE TABLE t (c <ddl_type>)`, as the metastore stores it.
    fn column_type(ddl_type: &str) -> Result<SparkType, SqlError> {
        let sql = format!("CREATE TABLE t (c {ddl_type})");
        let Statement::CreateTable(create) = parse_one(&sql) else {
            panic!("not a CREATE TABLE: {sql}");
        };
        declared_columns(&create.columns).map(|mut columns| columns.remove(0).ty)
    }

    #[test]
    fn spark_and_postgres_spellings_map_to_spark_types() {
        let cases = [
            ("STRING", "string"),
            ("TEXT", "string"),
            ("VARCHAR(20)", "string"),
            ("BIGINT", "bigint"),
            ("LONG", "bigint"),
            ("INT", "int"),
            ("INTEGER", "int"),
            ("SMALLINT", "smallint"),
            ("TINYINT", "tinyint"),
            ("DOUBLE", "double"),
            ("DOUBLE PRECISION", "double"),
            ("FLOAT", "float"),
            ("REAL", "float"),
            ("DECIMAL(10,2)", "decimal(10,2)"),
            ("NUMERIC(38,10)", "decimal(38,10)"),
            ("DECIMAL", "decimal(10,0)"),
            ("DATE", "date"),
            ("TIMESTAMP", "timestamp"),
            ("TIMESTAMP_NTZ", "timestamp_ntz"),
            ("TIMESTAMP WITHOUT TIME ZONE", "timestamp_ntz"),
            ("BOOLEAN", "boolean"),
            ("BINARY", "binary"),
            ("BYTEA", "binary"),
            ("ARRAY<INT>", "array<int>"),
            ("ARRAY<ARRAY<DECIMAL(10,2)>>", "array<array<decimal(10,2)>>"),
            ("MAP<STRING, BIGINT>", "map<string,bigint>"),
            ("MAP<INT, MAP<STRING, DECIMAL(5,1)>>", "map<int,map<string,decimal(5,1)>>"),
            ("STRUCT<a: INT, b: STRING>", "struct<a:int,b:string>"),
            ("STRUCT<`a b`: ARRAY<DATE>, c: STRUCT<d: TIMESTAMP>>", "struct<`a b`:array<date>,c:struct<d:timestamp>>"),
        ];
        for (ddl, expected) in cases {
            let ty = column_type(ddl).unwrap_or_else(|e| panic!("{ddl}: {e}"));
            assert_eq!(ty.as_str(), expected, "{ddl}");
            assert_eq!(SparkType::parse(ty.as_str()).unwrap(), ty);
            let arrow = ty.to_arrow().unwrap();
            assert_eq!(SparkType::from_arrow(&arrow).unwrap(), ty, "{ddl} round trip");
        }
    }

    #[test]
    fn invalid_decimals_and_unknown_types_are_refused() {
        assert_eq!(column_type("DECIMAL(39,2)").unwrap_err().code, "22023");
        assert_eq!(column_type("DECIMAL(5,6)").unwrap_err().code, "22023");
        assert_eq!(column_type("WIDGET").unwrap_err().code, "42704");
        assert_eq!(column_type("ARRAY<WIDGET>").unwrap_err().code, "42704");
    }

    #[test]
    fn complex_types_print_as_spark_ddl() {
        let ddl = "MAP<STRING, ARRAY<STRUCT<`a b`: INT, c: DECIMAL(10,2)>>>";
        assert_eq!(column_type(ddl).unwrap().ddl_name(), ddl);
    }
}

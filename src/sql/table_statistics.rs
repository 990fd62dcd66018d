//! What the metastore knows about a table's contents: our `SHOW BUCKETS`, Spark's `ANALYZE
//! TABLE .. COMPUTE STATISTICS [FOR COLUMNS ..]`, `DESCRIBE EXTENDED t column`, and `ALTER
//! TABLE .. SET|UNSET TBLPROPERTIES`, through which statistics can also be declared for
//! what-if planning (the planner uses `spark.sql.statistics.totalSize` as Spark uses
//! catalog statistics).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::physical_plan::collect;
use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName, SqlOption};

use super::dialect::{AnalyzedColumns, property_pairs};
use super::dml::existing_table;
use super::output::{Output, rows_output};
use super::session::Session;
use super::statement::table_name;
use super::static_partitions::{check_partition_column, partition_segments};
use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::metastore::{
    ColumnMeta, STATISTICS_PREFIX, STATISTICS_ROWS, STATISTICS_SIZE, TableMeta, column_statistic_key,
};
use crate::error::SqlError;
use crate::planner::statistics::default_size;
use crate::planner::table_provider::CATALOG_NAME;
use crate::storage::footer::{Bounds, column_range};

pub fn show_buckets_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("bucket", DataType::Int32, false),
        Field::new("files", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("min", DataType::Utf8, true),
        Field::new("max", DataType::Utf8, true),
        Field::new("sorted", DataType::Boolean, false),
    ]))
}

/// `SHOW BUCKETS t [PARTITION (..)]`: per bucket, the committed files' count, rows and bytes
/// (from the metastore), the range of the first bucket column and whether every file declares
/// its rows sorted by the SORTED BY columns (from the files' Parquet footers, not their rows;
/// an empty bucket of a table with SORTED BY counts as sorted, having nothing out of order).
pub async fn show_buckets(
    session: &Session,
    table: &ObjectName,
    partition_spec: &[(Ident, Expr)],
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let Some(spec) = meta.bucket_spec.clone() else {
        return Err(SqlError::new(
            "42809",
            format!("SHOW BUCKETS is not allowed on a table that is not bucketed: `{}`.`{}`", meta.schema, meta.name),
        ));
    };
    let segments = partition_segments(session, &meta, &partition_columns(&meta, partition_spec)?).await?;
    let files: Vec<_> = meta
        .files
        .iter()
        .filter(|f| segments.iter().all(|s| f.partition.split('/').any(|part| part == s)))
        .cloned()
        .collect();
    let summary = BucketSummary::of(spec.num_buckets, &files);
    let first_column = spec.bucket_columns[0].clone();
    let paths: Vec<_> = files.iter().map(|f| (f.bucket, meta.file_path(f))).collect();
    let sort_columns = spec.sort_columns.clone();
    let ranges = tokio::task::spawn_blocking(move || {
        paths
            .into_iter()
            .map(|(bucket, path)| Ok((bucket, column_range(&path, &first_column, &sort_columns)?)))
            .collect::<Result<Vec<_>, SqlError>>()
    })
    .await
    .map_err(|e| SqlError::internal(format!("reading footers failed: {e}")))??;

    let buckets = spec.num_buckets as usize;
    let mut bounds = vec![Bounds::Empty; buckets];
    let mut sorted = vec![!spec.sort_columns.is_empty(); buckets];
    for (bucket, range) in ranges {
        let Some(b) = bucket.map(|b| b as usize).filter(|b| *b < buckets) else { continue };
        sorted[b] &= range.sorted;
        bounds[b] = std::mem::replace(&mut bounds[b], Bounds::Empty).widen(range.bounds);
    }
    let text = |bound: fn(&Bounds) -> Option<&ScalarValue>| -> ArrayRef {
        Arc::new(StringArray::from_iter(bounds.iter().map(|b| bound(b).map(ScalarValue::to_string))))
    };
    let counts =
        |values: &[u64]| -> ArrayRef { Arc::new(Int64Array::from_iter_values(values.iter().map(|v| *v as i64))) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(0..buckets as i32)),
        counts(&summary.files),
        counts(&summary.rows),
        counts(&summary.bytes),
        text(Bounds::min),
        text(Bounds::max),
        Arc::new(BooleanArray::from(sorted)),
    ];
    let batch = RecordBatch::try_new(show_buckets_schema(), columns)?;
    Ok(rows_output(show_buckets_schema(), vec![batch]))
}

/// A statement's partition spec as (partition column, value), checked against the table.
fn partition_columns(meta: &TableMeta, spec: &[(Ident, Expr)]) -> Result<Vec<(String, Expr)>, SqlError> {
    let mut columns: Vec<(String, Expr)> = Vec::new();
    for (column, value) in spec {
        let name = column.value.to_lowercase();
        check_partition_column(meta, &name)?;
        if columns.iter().any(|(seen, _)| *seen == name) {
            return Err(SqlError::duplicate_column(format!("partition column {name} specified more than once")));
        }
        columns.push((name, value.clone()));
    }
    Ok(columns)
}

/// `ANALYZE TABLE t COMPUTE STATISTICS [NOSCAN | FOR COLUMNS .. | FOR ALL COLUMNS]`: the
/// table's size and row count from the committed file list, and with columns, each column's
/// statistics computed over its rows, stored under Spark's keys. The distinct count is exact
/// where Spark's is a HyperLogLog++ estimate.
pub async fn analyze_table(
    session: &Session,
    table: &ObjectName,
    partition_spec: &[(Ident, Expr)],
    columns: &AnalyzedColumns,
) -> Result<Output, SqlError> {
    if !partition_spec.is_empty() {
        return Err(SqlError::feature_not_supported("ANALYZE TABLE with a PARTITION spec"));
    }
    let meta = named_table(session, table)?;
    let bytes: u64 = meta.files.iter().map(|f| f.byte_size).sum();
    let rows: u64 = meta.files.iter().map(|f| f.row_count).sum();
    let mut properties = vec![(STATISTICS_SIZE.to_string(), bytes.to_string())];
    if *columns != AnalyzedColumns::NoScan {
        properties.push((STATISTICS_ROWS.to_string(), rows.to_string()));
    }
    let analyzed: Vec<&ColumnMeta> = match columns {
        AnalyzedColumns::Table | AnalyzedColumns::NoScan => Vec::new(),
        AnalyzedColumns::All => meta.columns.iter().collect(),
        AnalyzedColumns::Listed(names) => {
            names.iter().map(|ident| find_column(&meta, ident)).collect::<Result<_, _>>()?
        }
    };
    if !analyzed.is_empty() {
        properties.extend(column_statistics(session, &meta, &analyzed).await?);
    }
    let properties: Vec<(&str, String)> = properties.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    session.engine.metastore.set_statistics(meta.id, meta.version, &properties)?;
    Ok(Output::Command { tag: "ANALYZE", rows: None })
}

/// Spark's `ColumnStat.statExprs` as one aggregate over the table: distinct and null counts
/// for every column; min and max for numbers, booleans, dates and timestamps; average and
/// largest length (Spark's `avgLen`, `maxLen`: the type's default size for fixed-width types).
async fn column_statistics(
    session: &Session,
    meta: &TableMeta,
    columns: &[&ColumnMeta],
) -> Result<Vec<(String, String)>, SqlError> {
    let mut aggregates = Vec::new();
    for column in columns {
        let quoted = format!("\"{}\"", column.name.replace('"', "\"\""));
        aggregates.push(format!("count(DISTINCT {quoted})"));
        aggregates.push(format!("count(*) - count({quoted})"));
        if is_variable_width(column) {
            let length = if column.ty.as_str() == "binary" { "octet_length" } else { "character_length" };
            aggregates.push(format!("CAST(ceil(avg({length}({quoted}))) AS BIGINT)"));
            aggregates.push(format!("CAST(max({length}({quoted})) AS BIGINT)"));
        } else {
            aggregates.push(format!("min({quoted})"));
            aggregates.push(format!("max({quoted})"));
        }
    }
    let sql = format!(
        "SELECT {} FROM \"{}\".\"{}\"",
        aggregates.join(", "),
        meta.schema.replace('"', "\"\""),
        meta.name.replace('"', "\"\"")
    );
    let plan = session.plan_query(&sql).await?;
    let batches = collect(plan, session.ctx.task_ctx()).await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| SqlError::internal("no statistics row"))?;
    let value = |i: usize| ScalarValue::try_from_array(batch.column(i), 0);
    let mut statistics = Vec::new();
    for (n, column) in columns.iter().enumerate() {
        let key = |statistic: &str| column_statistic_key(&column.name, statistic);
        let ty = column.ty.to_arrow()?;
        statistics.push((key("version"), "2".to_string()));
        statistics.push((key("distinctCount"), value(4 * n)?.to_string()));
        statistics.push((key("nullCount"), value(4 * n + 1)?.to_string()));
        let (first, second) = (value(4 * n + 2)?, value(4 * n + 3)?);
        if is_variable_width(column) {
            let default = default_size(&ty).to_string();
            let length = |v: ScalarValue| if v.is_null() { default.clone() } else { v.to_string() };
            statistics.push((key("avgLen"), length(first)));
            statistics.push((key("maxLen"), length(second)));
        } else {
            for (name, bound) in [("min", first), ("max", second)] {
                if !bound.is_null() {
                    statistics.push((key(name), external_string(&bound)));
                }
            }
            statistics.push((key("avgLen"), default_size(&ty).to_string()));
            statistics.push((key("maxLen"), default_size(&ty).to_string()));
        }
    }
    Ok(statistics)
}

/// The table `table` names, as the metastore holds it.
fn named_table(session: &Session, table: &ObjectName) -> Result<TableMeta, SqlError> {
    let (schema, name) = table_name(table)?;
    existing_table(session, &schema, &name)
}

fn find_column<'a>(meta: &'a TableMeta, column: &Ident) -> Result<&'a ColumnMeta, SqlError> {
    meta.columns.iter().find(|c| c.name.eq_ignore_ascii_case(&column.value)).ok_or_else(|| {
        SqlError::undefined_column(format!(
            "column `{}` does not exist in table `{}`.`{}`",
            column.value, meta.schema, meta.name
        ))
    })
}

fn is_variable_width(column: &ColumnMeta) -> bool {
    matches!(column.ty.as_str(), "string" | "binary")
}

/// A bound as Spark's `CatalogColumnStat.toExternalString` writes it: timestamps as
/// `yyyy-MM-dd HH:mm:ss.SSSSSS` in UTC, everything else as its plain text.
fn external_string(value: &ScalarValue) -> String {
    match value {
        ScalarValue::TimestampMicrosecond(Some(micros), _) => chrono::DateTime::from_timestamp_micros(*micros)
            .map_or_else(|| value.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()),
        other => other.to_string(),
    }
}

pub fn describe_column_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("info_name", DataType::Utf8, false),
        Field::new("info_value", DataType::Utf8, false),
    ]))
}

/// `DESCRIBE [EXTENDED] t column`, Spark's `DescribeColumnCommand`: name, type and comment;
/// with EXTENDED, the column statistics `ANALYZE TABLE` stored (`NULL` where there are none).
pub fn describe_column(
    session: &Session,
    table: &ObjectName,
    column: &Ident,
    extended: bool,
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let described = find_column(&meta, column)?;
    let mut rows = vec![
        ("col_name", described.name.clone()),
        ("data_type", described.ty.as_str().to_string()),
        ("comment", described.comment.clone().unwrap_or_else(|| "NULL".into())),
    ];
    if extended {
        let statistic = |key: &str| {
            meta.properties.get(&column_statistic_key(&described.name, key)).cloned().unwrap_or_else(|| "NULL".into())
        };
        rows.extend([
            ("min", statistic("min")),
            ("max", statistic("max")),
            ("num_nulls", statistic("nullCount")),
            ("distinct_count", statistic("distinctCount")),
            ("avg_col_len", statistic("avgLen")),
            ("max_col_len", statistic("maxLen")),
            ("histogram", "NULL".into()),
        ]);
    }
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|(k, _)| *k)));
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, v)| v.as_str())));
    let batch = RecordBatch::try_new(describe_column_schema(), vec![names, values])?;
    Ok(rows_output(describe_column_schema(), vec![batch]))
}

/// `ALTER TABLE t SET TBLPROPERTIES (..)`. The statistics keys must hold sizes (whole
/// numbers of bytes and rows): the planner reads `spark.sql.statistics.totalSize` in place of
/// the files' size, so a user can plan as if the table held that much.
pub fn set_table_properties(
    session: &Session,
    table: &ObjectName,
    properties: &[SqlOption],
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let pairs = property_pairs(properties).map_err(SqlError::syntax)?;
    for (key, value) in &pairs {
        check_statistics_property(key, value)?;
    }
    let pairs: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    session.engine.metastore.set_properties(meta.id, &pairs)?;
    Ok(Output::command("ALTER TABLE"))
}

/// A statistics property the planner reads must hold a count: whole bytes or rows.
pub fn check_statistics_property(key: &str, value: &str) -> Result<(), SqlError> {
    let is_count = key == STATISTICS_SIZE
        || key == STATISTICS_ROWS
        || (key.starts_with(STATISTICS_PREFIX) && key.ends_with("Count"));
    if is_count && value.parse::<u64>().is_err() {
        return Err(SqlError::invalid_parameter(format!(
            "table property {key} must be a whole number of {}, not '{value}'",
            if key == STATISTICS_SIZE { "bytes" } else { "rows" }
        )));
    }
    Ok(())
}

/// `ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] (..)`. Without `IF EXISTS`, a key the
/// table does not have fails the statement, as Spark's `UNSET_NONEXISTENT_PROPERTIES`.
pub fn unset_table_properties(
    session: &Session,
    table: &ObjectName,
    keys: &[String],
    if_exists: bool,
) -> Result<Output, SqlError> {
    let meta = named_table(session, table)?;
    let missing: Vec<String> =
        keys.iter().filter(|k| !meta.properties.contains_key(*k)).map(|k| format!("`{k}`")).collect();
    if !if_exists && !missing.is_empty() {
        return Err(SqlError::new(
            "42704",
            format!(
                "Attempted to unset non-existent properties [{}] in table `{CATALOG_NAME}`.`{}`.`{}`.",
                missing.join(", "),
                meta.schema,
                meta.name
            ),
        ));
    }
    session.engine.metastore.unset_properties(meta.id, keys)?;
    Ok(Output::command("ALTER TABLE"))
}

//! Spark's `ANALYZE TABLE .. COMPUTE STATISTICS [NOSCAN | FOR COLUMNS .. | FOR ALL COLUMNS]`:
//! the statistics the planner reads as Spark reads catalog statistics, stored under Spark's
//! keys in the table's properties.

use datafusion::common::ScalarValue;
use datafusion::physical_plan::collect;
use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::table::{ColumnMeta, STATISTICS_ROWS, STATISTICS_SIZE, TableMeta, column_statistic_key};
use crate::error::SqlError;
use crate::planner::statistics::default_size;
use crate::sql::dialect::AnalyzedColumns;
use crate::sql::names::{find_column, named_table};
use crate::sql::output::Output;
use crate::sql::session::Session;

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
    session.tables.write(CatalogChange::SetStatistics { table: TableRef::of(&meta), statistics: properties }, None)?;
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

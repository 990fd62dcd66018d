//! `DESCRIBE [EXTENDED | FORMATTED] t`, printed as Spark prints it (rows and order from
//! `DescribeTableCommand` and `CatalogTable.toLinkedHashMap`).

use chrono::DateTime;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::table::{STATISTICS_ROWS, STATISTICS_SIZE};
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::names::described_table;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;

pub fn describe_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("col_name", DataType::Utf8, false),
        Field::new("data_type", DataType::Utf8, false),
        Field::new("comment", DataType::Utf8, true),
    ]))
}

fn backticked(names: &[String]) -> String {
    format!("[{}]", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
}

pub fn describe(session: &Session, schema: &str, name: &str, extended: bool) -> Result<Output, SqlError> {
    let meta = described_table(session, schema, name)?;
    let mut rows: Vec<(String, String, Option<String>)> =
        meta.columns.iter().map(|c| (c.name.clone(), c.ty.as_str().to_string(), c.comment.clone())).collect();
    if !meta.partition_columns.is_empty() {
        rows.push(("# Partition Information".into(), String::new(), Some(String::new())));
        rows.push(("# col_name".into(), "data_type".into(), Some("comment".into())));
        for column in meta.columns.iter().filter(|c| meta.partition_columns.contains(&c.name)) {
            rows.push((column.name.clone(), column.ty.as_str().to_string(), column.comment.clone()));
        }
    }
    if extended {
        let detail = |key: &str, value: String| (key.to_string(), value, Some(String::new()));
        rows.push((String::new(), String::new(), Some(String::new())));
        rows.push(("# Detailed Table Information".into(), String::new(), Some(String::new())));
        rows.push(detail("Catalog", CATALOG_NAME.into()));
        rows.push(detail("Database", meta.schema.clone()));
        rows.push(detail("Table", meta.name.clone()));
        let created = DateTime::from_timestamp(meta.created_at, 0).unwrap_or_default();
        rows.push(detail("Created Time", created.format("%a %b %d %H:%M:%S UTC %Y").to_string()));
        rows.push(detail("Last Access", "UNKNOWN".into()));
        rows.push(detail("Created By", format!("bucketsql {}", env!("CARGO_PKG_VERSION"))));
        rows.push(detail("Type", if meta.external { "EXTERNAL" } else { "MANAGED" }.into()));
        rows.push(detail("Provider", meta.provider.clone()));
        if let Some(spec) = &meta.bucket_spec {
            rows.push(detail("Num Buckets", spec.num_buckets.to_string()));
            rows.push(detail("Bucket Columns", backticked(&spec.bucket_columns)));
            rows.push(detail("Sort Columns", backticked(&spec.sort_columns)));
            // Ours, not Spark's: how evenly the committed files spread the rows.
            let summary = BucketSummary::of(spec.num_buckets, &meta.files);
            if let (Some(skew), Some(mean)) = (summary.skew(), summary.mean_file_bytes()) {
                rows.push(detail("Bucket Skew", format!("{skew:.2} (largest bucket / mean bucket, by rows)")));
                rows.push(detail("Empty Buckets", summary.empty_buckets().to_string()));
                rows.push(detail("Mean Bucket File Size", format!("{mean} bytes")));
            }
        }
        if let Some(comment) = &meta.comment {
            rows.push(detail("Comment", comment.clone()));
        }
        let properties: Vec<String> = meta
            .properties
            .iter()
            .filter(|(k, _)| !k.starts_with("spark.sql.statistics."))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !properties.is_empty() {
            rows.push(detail("Table Properties", format!("[{}]", properties.join(", "))));
        }
        if let Some(bytes) = meta.properties.get(STATISTICS_SIZE) {
            let rows_text = meta.properties.get(STATISTICS_ROWS).map(|r| format!(", {r} rows")).unwrap_or_default();
            rows.push(detail("Statistics", format!("{bytes} bytes{rows_text}")));
        }
        rows.push(detail("Location", meta.location.uri()));
        if !meta.partition_columns.is_empty() {
            rows.push(detail("Partition Provider", "Catalog".into()));
        }
    }
    let column = |values: Vec<Option<String>>| -> ArrayRef { Arc::new(StringArray::from(values)) };
    let batch = RecordBatch::try_new(
        describe_schema(),
        vec![
            column(rows.iter().map(|r| Some(r.0.clone())).collect()),
            column(rows.iter().map(|r| Some(r.1.clone())).collect()),
            column(rows.iter().map(|r| r.2.clone()).collect()),
        ],
    )?;
    Ok(rows_output(describe_schema(), vec![batch]))
}

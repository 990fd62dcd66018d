//! Our `SHOW BUCKETS t [PARTITION (..)]`: what each bucket of a table holds, from the
//! metastore and the files' footers.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName};

use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::table::TableMeta;
use crate::error::SqlError;
use crate::sql::names::named_table;
use crate::sql::output::{Output, rows_output};
use crate::sql::session::Session;
use crate::sql::write::static_partitions::{check_partition_column, partition_segments};
use crate::storage::footer::{Bounds, column_ranges};

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
    let paths = files.iter().map(|f| (f.path.clone(), f.byte_size)).collect();
    let ranges =
        column_ranges(&meta.location, paths, &first_column, &spec.sort_columns, session.tables.stores()).await?;
    let ranges = files.iter().map(|f| f.bucket).zip(ranges);

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

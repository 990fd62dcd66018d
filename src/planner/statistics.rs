//! Spark's size estimates without cost-based optimisation
//! (`SizeInBytesOnlyStatsPlanVisitor`), which decide broadcast joins.
//!
//! A file relation is as large as its files; a node that changes the row width scales its
//! child's size by `rowSize(output) / rowSize(input)` with `rowSize = 8 + Σ defaultSize`;
//! a filter keeps the size; a join is the product of its sides (semi and anti joins keep the
//! left side). Unary nodes above an empty relation report 1 byte, as Spark clamps them.
//! Sizes saturate rather than overflow (Spark's are `BigInt`s), and a leaf of unknown size
//! is `spark.sql.defaultSizeInBytes`, never small enough to broadcast.

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::JoinType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::union::UnionExec;

use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::range::range_splits;

/// Spark's `DataType.defaultSize`.
pub fn default_size(data_type: &DataType) -> u128 {
    match data_type {
        DataType::Boolean | DataType::Int8 | DataType::UInt8 => 1,
        DataType::Int16 | DataType::UInt16 => 2,
        DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Date32 => 4,
        DataType::Int64 | DataType::UInt64 | DataType::Float64 | DataType::Date64 | DataType::Timestamp(_, _) => 8,
        DataType::Decimal128(p, _) if *p <= 18 => 8,
        DataType::Decimal32(..) | DataType::Decimal64(..) => 8,
        DataType::Decimal128(..) | DataType::Decimal256(..) => 16,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 20,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => 100,
        DataType::Null => 1,
        DataType::Dictionary(_, value) => default_size(value),
        _ => 8,
    }
}

/// `EstimationUtils.getSizePerRow` without column statistics.
pub fn row_size(schema: &Schema) -> u128 {
    8 + schema.fields().iter().map(|f| default_size(f.data_type())).sum::<u128>()
}

/// Estimated bytes a plan produces.
pub fn size_in_bytes(plan: &dyn ExecutionPlan) -> u128 {
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        let table_width = row_size(scan.table_schema());
        return u128::from(scan.size_in_bytes()) * row_size(&plan.schema()) / table_width;
    }
    let children = plan.children();
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        let left = size_in_bytes(join.left().as_ref());
        return match join.spec().join_type {
            JoinType::LeftSemi | JoinType::LeftAnti => left,
            _ => left.saturating_mul(size_in_bytes(join.right().as_ref())),
        };
    }
    if plan.downcast_ref::<UnionExec>().is_some() {
        return children.iter().fold(0u128, |total, c| total.saturating_add(size_in_bytes(c.as_ref())));
    }
    if let Some(limit) = plan.downcast_ref::<GlobalLimitExec>()
        && let Some(fetch) = limit.fetch()
    {
        return (fetch as u128).saturating_mul(row_size(&plan.schema())).max(1);
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>()
        && aggregate.group_expr().is_empty()
    {
        return row_size(&plan.schema());
    }
    match children.as_slice() {
        [] => leaf_size(plan),
        [child] => {
            let input = size_in_bytes(child.as_ref());
            if plan.downcast_ref::<FilterExec>().is_some() {
                return input.max(1);
            }
            (input.saturating_mul(row_size(&plan.schema())) / row_size(&child.schema()).max(1)).max(1)
        }
        many => many.iter().map(|c| size_in_bytes(c.as_ref())).fold(1u128, |a, b| a.saturating_mul(b)),
    }
}

/// Spark's `spark.sql.defaultSizeInBytes`: the size of a relation nothing is known about, so
/// large that it is never broadcast.
pub const DEFAULT_SIZE_IN_BYTES: u128 = i64::MAX as u128;

/// Leaves other than table scans: `VALUES` and other in-memory rows are `rowSize × rows`
/// (Spark's `LocalRelation`), `range()` is 8 bytes a row (Spark's `Range`), `SELECT` without
/// `FROM` is one byte (`OneRowRelation`); anything else is [`DEFAULT_SIZE_IN_BYTES`].
fn leaf_size(plan: &dyn ExecutionPlan) -> u128 {
    if plan.is::<PlaceholderRowExec>() {
        return 1;
    }
    if let Some(range) = range_splits(plan) {
        return range.rows.saturating_mul(8);
    }
    if plan.is::<EmptyExec>() {
        return 0;
    }
    let memory =
        plan.downcast_ref::<DataSourceExec>().and_then(|s| s.data_source().downcast_ref::<MemorySourceConfig>());
    match memory {
        Some(memory) => {
            let rows: usize = memory.partitions().iter().flatten().map(|b| b.num_rows()).sum();
            (rows as u128).saturating_mul(row_size(&plan.schema()))
        }
        None => DEFAULT_SIZE_IN_BYTES,
    }
}

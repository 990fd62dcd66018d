//! EXPLAIN COST's `Statistics(sizeInBytes=...)`, estimated as Spark does without CBO
//! (`SizeInBytesOnlyStatsPlanVisitor`): file sizes at the scans, scaled by row width through
//! unary operators, multiplied through joins.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::JoinType;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateOutputMode};
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};

use crate::catalog::provider::table_schema;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;

/// The optimized logical plan with statistics on the lines we can estimate: the root (the
/// whole query) and each table scan.
pub(super) fn annotate(logical: &str, plan: &Arc<dyn ExecutionPlan>) -> String {
    let mut scans = Vec::new();
    collect_scans(plan, &mut scans);
    let mut lines = Vec::new();
    for (i, line) in logical.trim_end().lines().enumerate() {
        let size = if i == 0 { size_in_bytes(plan) } else { scan_line_size(line, &scans) };
        lines.push(match size {
            Some(size) => format!("{line}, Statistics(sizeInBytes={})", bytes_to_string(size)),
            None => line.to_string(),
        });
    }
    lines.join("\n")
}

/// The size of the scan a DataFusion `TableScan: name ...` line stands for.
fn scan_line_size(line: &str, scans: &[&FileSourceScanExec]) -> Option<u128> {
    let (_, rest) = line.split_once("TableScan: ")?;
    let reference = rest.split([' ', ',']).next()?;
    let table = reference.rsplit('.').next()?.trim_matches('"');
    scans.iter().find(|s| s.table().name.eq_ignore_ascii_case(table)).map(|s| scan_size(s))
}

fn collect_scans<'a>(plan: &'a Arc<dyn ExecutionPlan>, scans: &mut Vec<&'a FileSourceScanExec>) {
    match plan.downcast_ref::<FileSourceScanExec>() {
        Some(scan) => scans.push(scan),
        None => plan.children().into_iter().for_each(|c| collect_scans(c, scans)),
    }
}

fn scan_size(scan: &FileSourceScanExec) -> u128 {
    let output = row_size(&scan.schema());
    let table = table_schema(scan.table()).map_or(output, |s| row_size(&s));
    scaled(u128::from(scan.size_in_bytes()), output, table)
}

fn size_in_bytes(plan: &Arc<dyn ExecutionPlan>) -> Option<u128> {
    let width = row_size(&plan.schema());
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        return Some(scan_size(scan));
    }
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        let (left, right) = (size_in_bytes(join.left())?, size_in_bytes(join.right())?);
        return Some(match join.spec().join_type {
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => left,
            JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => right,
            _ => left.saturating_mul(right),
        });
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>()
        && aggregate.group_expr().is_empty()
        && aggregate.mode().output_mode() == AggregateOutputMode::Final
    {
        return Some(width);
    }
    let limit = plan
        .downcast_ref::<GlobalLimitExec>()
        .and_then(GlobalLimitExec::fetch)
        .or_else(|| plan.downcast_ref::<LocalLimitExec>().map(LocalLimitExec::fetch));
    if let Some(limit) = limit {
        return Some(limit as u128 * width);
    }
    match plan.children().as_slice() {
        [] => plan.partition_statistics(None).ok()?.total_byte_size.get_value().map(|s| *s as u128),
        [child] => Some(scaled(size_in_bytes(child)?, width, row_size(&child.schema()))),
        children => children.iter().map(|c| size_in_bytes(c)).sum(),
    }
}

/// Spark's `visitUnaryNode`: the child's size times the ratio of row widths, at least 1.
fn scaled(size: u128, output_width: u128, input_width: u128) -> u128 {
    (size * output_width / input_width.max(1)).max(1)
}

/// Spark's `EstimationUtils.getSizePerRow`: 8 bytes of row overhead plus each type's default size.
fn row_size(schema: &Schema) -> u128 {
    8 + schema.fields().iter().map(|f| default_size(f.data_type())).sum::<u128>()
}

fn default_size(data_type: &DataType) -> u128 {
    match data_type {
        DataType::Null | DataType::Boolean | DataType::Int8 | DataType::UInt8 => 1,
        DataType::Int16 | DataType::UInt16 => 2,
        DataType::Int32 | DataType::UInt32 | DataType::Float16 | DataType::Float32 | DataType::Date32 => 4,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 20,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => 100,
        DataType::Decimal128(p, _) | DataType::Decimal256(p, _) if *p > 18 => 16,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => default_size(f.data_type()),
        DataType::Struct(fields) => fields.iter().map(|f| default_size(f.data_type())).sum(),
        DataType::Map(entries, _) => default_size(entries.data_type()),
        _ => 8,
    }
}

/// Spark's `Utils.bytesToString`: one decimal in the largest binary unit that is at least 2.
fn bytes_to_string(size: u128) -> String {
    const UNITS: [&str; 6] = ["EiB", "PiB", "TiB", "GiB", "MiB", "KiB"];
    for (i, unit) in UNITS.iter().enumerate() {
        let scale = 1u128 << (10 * (6 - i));
        if size >= 2 * scale {
            return format!("{:.1} {unit}", size as f64 / scale as f64);
        }
    }
    format!("{:.1} B", size as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_like_spark() {
        assert_eq!(bytes_to_string(100), "100.0 B");
        assert_eq!(bytes_to_string(2048), "2.0 KiB");
        assert_eq!(bytes_to_string(3 * 1024 * 1024 + 512 * 1024), "3.5 MiB");
        assert_eq!(scaled(1000, 16, 32), 500);
        assert_eq!(scaled(0, 16, 32), 1);
    }
}

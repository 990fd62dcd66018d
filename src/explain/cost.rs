//! EXPLAIN COST's `Statistics(sizeInBytes=...)`, the size estimates the planner decides
//! broadcast joins by.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;

use crate::exec::file_source_scan::FileSourceScanExec;
use crate::planner::statistics::size_in_bytes;

/// The optimized logical plan with statistics on the lines we can estimate: the root (the
/// whole query) and each table scan.
pub(super) fn annotate(logical: &str, plan: &Arc<dyn ExecutionPlan>) -> String {
    let mut scans = Vec::new();
    collect_scans(plan, &mut scans);
    let mut lines = Vec::new();
    for (i, line) in logical.trim_end().lines().enumerate() {
        let size = if i == 0 { Some(size_in_bytes(plan.as_ref())) } else { scan_line_size(line, &scans) };
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
    scans.iter().find(|s| s.table().name.eq_ignore_ascii_case(table)).map(|s| size_in_bytes(*s))
}

fn collect_scans<'a>(plan: &'a Arc<dyn ExecutionPlan>, scans: &mut Vec<&'a FileSourceScanExec>) {
    match plan.downcast_ref::<FileSourceScanExec>() {
        Some(scan) => scans.push(scan),
        None => plan.children().into_iter().for_each(|c| collect_scans(c, scans)),
    }
}

/// Spark's `Statistics.simpleString`: `Statistics(sizeInBytes=4.6 MiB, rowCount=2.00E+5)`.
pub(super) fn statistics(bytes: u128, rows: Option<u64>) -> String {
    let rows = rows.map_or_else(String::new, |r| format!(", rowCount={}", row_count_to_string(r)));
    format!("Statistics(sizeInBytes={}{rows})", bytes_to_string(bytes))
}

/// A row count as Spark prints it: a `BigDecimal` rounded half up to three significant digits,
/// in scientific notation once digits were dropped (`201`, `2.00E+5`).
fn row_count_to_string(rows: u64) -> String {
    let digits = rows.to_string();
    if digits.len() <= 3 {
        return digits;
    }
    let mut exponent = digits.len() - 1;
    let leading: u64 = digits[..3].parse().unwrap_or(0);
    let round_up = digits.as_bytes()[3] >= b'5';
    let mut mantissa = leading + u64::from(round_up);
    if mantissa == 1000 {
        mantissa = 100;
        exponent += 1;
    }
    format!("{}.{:02}E+{exponent}", mantissa / 100, mantissa % 100)
}

/// Spark's `Utils.bytesToString`: one decimal in the largest binary unit that is at least 2.
pub(super) fn bytes_to_string(size: u128) -> String {
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
    }

    #[test]
    fn row_counts_print_like_spark() {
        for (rows, text) in [
            (1, "1"),
            (201, "201"),
            (2000, "2.00E+3"),
            (5000, "5.00E+3"),
            (10000, "1.00E+4"),
            (200000, "2.00E+5"),
            (1235, "1.24E+3"),
            (9995, "1.00E+4"),
        ] {
            assert_eq!(row_count_to_string(rows), text);
        }
        assert_eq!(statistics(24, Some(1)), "Statistics(sizeInBytes=24.0 B, rowCount=1)");
    }
}

//! Which string columns a scan reads as views, to filter them before they are copied out
//! (`exec::file_source_scan::ViewPrefilter`).
//!
//! The scan takes the leading conjuncts of the filter above it that Spark would push to its
//! reader (a column against literals: comparisons, `IN`, `IS [NOT] NULL`, `LIKE 'abc%'`),
//! where one of them reads a string column. Only leading ones: they cannot fail, and a later
//! conjunct that can (an ANSI cast, a division) must still see every row the ones before it
//! let through, as Spark evaluates them in order. Q19 of TPC-H keeps 2 % of `lineitem` by
//! `l_shipinstruct` and `l_shipmode`; read as `Utf8`, copying those strings out of their
//! pages and comparing them was half of the query's time.

use std::collections::HashSet;

use arrow::datatypes::{DataType, Schema};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::conjunction;

use super::short_circuit_evaluation::lazy_side;
use crate::exec::file_source_scan::ViewPrefilter;

/// The prefilter of a scan of `schema`'s columns `projection` under `data_filters` (in the
/// filter's order), if one `is_pushed` (`file_source_strategy::source_filter`) reads a string
/// column and the first is pushed.
pub fn view_prefilter(
    state: &dyn Session,
    schema: &Schema,
    projection: &[usize],
    (data_filters, is_pushed): (&[&Expr], impl Fn(&Expr) -> bool),
    partition_columns: &[String],
) -> Result<Option<ViewPrefilter>> {
    let leading: Vec<&Expr> = data_filters.iter().copied().take_while(|e| is_pushed(e)).collect();
    let pushed: Vec<&Expr> = data_filters.iter().copied().filter(|e| is_pushed(e)).collect();
    let read: HashSet<String> = pushed.iter().flat_map(|e| e.column_refs()).map(|c| c.name.clone()).collect();
    let strings: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| read.contains(schema.field(i).name()) && schema.field(i).data_type() == &DataType::Utf8)
        .collect();
    let all_read = read.iter().all(|name| projection.iter().any(|&i| schema.field(i).name() == name));
    // A partition column's values are not read from the files, and stay `Utf8`.
    let partitioned = strings.iter().any(|&i| partition_columns.contains(schema.field(i).name()));
    if strings.is_empty() || !all_read || partitioned {
        return Ok(None);
    }
    let viewed = ViewPrefilter::with_views(schema, &strings);
    let physical = |exprs: Vec<&Expr>, schema: &Schema| -> Result<_> {
        let Some(condition) = conjunction(exprs.into_iter().cloned()) else { return Ok(None) };
        Ok(Some(state.create_physical_expr(as_views(condition)?, &DFSchema::try_from(schema.clone())?)?))
    };
    let output = viewed.project(projection)?;
    let Some(condition) = physical(leading, &output)? else { return Ok(None) };
    // As the filter above evaluates it: a date range before a string `IN`, which then sees only
    // the rows in range.
    let condition = lazy_side(&condition, &output)?;
    Ok(Some(ViewPrefilter { columns: strings, condition, pruning: physical(pushed, &viewed)? }))
}

/// `expr` with its string literals as views: in a pushed filter, every one is compared with
/// a string column, which the scan reads as views.
fn as_views(expr: Expr) -> Result<Expr> {
    expr.transform(|e| match e {
        Expr::Literal(ScalarValue::Utf8(value), metadata) => {
            Ok(Transformed::yes(Expr::Literal(ScalarValue::Utf8View(value), metadata)))
        }
        e => Ok(Transformed::no(e)),
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::Field;
    use datafusion::logical_expr::{cast, col, lit};
    use datafusion::prelude::SessionContext;

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("mode", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
        ])
    }

    fn chosen(filters: &[Expr], partition_columns: &[&str]) -> Option<ViewPrefilter> {
        let state = SessionContext::new().state();
        let partition_columns: Vec<String> = partition_columns.iter().map(|c| c.to_string()).collect();
        let filters: Vec<&Expr> = filters.iter().collect();
        // As Spark pushes them: a column against literals, not a cast of one.
        let is_pushed = |e: &Expr| !matches!(e, Expr::BinaryExpr(b) if matches!(*b.left, Expr::Cast(_)));
        view_prefilter(&state, &schema(), &[0, 1, 2, 3], (&filters, is_pushed), &partition_columns).unwrap()
    }

    #[test]
    fn strings_of_pushed_conjuncts_are_views_filtered_by_the_leading_ones() {
        let prefilter = chosen(
            &[
                col("mode").in_list(vec![lit("AIR"), lit("RAIL")], false),
                col("id").gt(lit(3i64)),
                cast(col("id"), DataType::Int32).gt(lit(1i32)),
                col("name").eq(lit("x")),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(prefilter.columns, vec![1, 2]);
        let condition = prefilter.condition.to_string();
        assert!(condition.contains("mode") && condition.contains("id@0 > 3"), "{condition}");
        assert!(!condition.contains("name") && !condition.contains("CAST"), "{condition}");
        assert!(prefilter.pruning.unwrap().to_string().contains("name"));
    }

    #[test]
    fn no_prefilter_behind_a_conjunct_that_may_fail_or_over_partition_values() {
        let may_fail = cast(col("name"), DataType::Int32).gt(lit(1i32));
        assert!(chosen(&[may_fail, col("mode").eq(lit("AIR"))], &[]).is_none());
        assert!(chosen(&[col("id").gt(lit(3i64))], &[]).is_none());
        assert!(chosen(&[col("mode").eq(lit("AIR")), col("day").eq(lit("2024-01-01"))], &["day"]).is_none());
    }
}

//! Which string columns a scan reads as views, to filter them before they are copied out
//! (`exec::file_source_scan::ViewPrefilter`).
//!
//! The scan takes the conjuncts of the filter above it that come before the first one that can
//! fail (an ANSI cast, a division), where one of the filters Spark would push to its reader (a
//! column against literals: comparisons, `IN`, `IS [NOT] NULL`, `LIKE 'abc%'`) reads a string
//! column. Only those: a conjunct that can fail must still see every row the ones before it let
//! through, as Spark evaluates them in order; the ones before it cannot fail, so dropping a row
//! by any of them early changes nothing. Q19 of TPC-H keeps 2 % of `lineitem` by
//! `l_shipinstruct` and `l_shipmode`; read as `Utf8`, copying those strings out of their pages
//! and comparing them was half of the query's time. Q12 compares two dates of each row after
//! its `l_shipmode IN (...)`: with them in the scan too, the filter above sees 0.5 % of the rows
//! rather than 29 %, and no longer compares each one's `l_shipmode` again as `Utf8`.

use std::collections::HashSet;

use arrow::datatypes::{DataType, Schema};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::conjunction;

use super::short_circuit_evaluation::lazy_side;
use crate::exec::file_source_scan::ViewPrefilter;
use crate::exec::short_circuit::can_fail;

/// The prefilter of a scan of `schema`'s columns `projection` under `data_filters` (in the
/// filter's order), if one `is_pushed` (`file_source_strategy::source_filter`) reads a string
/// column and the first cannot fail.
pub fn view_prefilter(
    state: &dyn Session,
    schema: &Schema,
    projection: &[usize],
    (data_filters, is_pushed): (&[&Expr], impl Fn(&Expr) -> bool),
    partition_columns: &[String],
) -> Result<Option<ViewPrefilter>> {
    let pushed: Vec<&Expr> = data_filters.iter().copied().filter(|e| is_pushed(e)).collect();
    let read: HashSet<String> = pushed.iter().flat_map(|e| e.column_refs()).map(|c| c.name.clone()).collect();
    let strings: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| read.contains(schema.field(i).name()) && schema.field(i).data_type() == &DataType::Utf8)
        .collect();
    // A partition column's values are not read from the files, and stay `Utf8`.
    let partitioned = strings.iter().any(|&i| partition_columns.contains(schema.field(i).name()));
    if strings.is_empty() || partitioned {
        return Ok(None);
    }
    let table = DFSchema::try_from(schema.clone())?;
    let mut leading = Vec::new();
    for &conjunct in data_filters {
        if can_fail(&state.create_physical_expr(conjunct.clone(), &table)?) {
            break;
        }
        leading.push(conjunct);
    }
    let projected: HashSet<&str> = projection.iter().map(|&i| schema.field(i).name().as_str()).collect();
    let viewed_names: HashSet<&str> = strings.iter().map(|&i| schema.field(i).name().as_str()).collect();
    // A conjunct of another form reads its columns as `Utf8`: only one over none of the views.
    let prefiltered: Vec<Expr> = leading
        .into_iter()
        .filter(|e| e.column_refs().iter().all(|c| projected.contains(c.name.as_str())))
        .filter_map(|e| match is_pushed(e) {
            true => Some(as_views(e.clone())),
            false => e.column_refs().iter().all(|c| !viewed_names.contains(c.name.as_str())).then(|| Ok(e.clone())),
        })
        .collect::<Result<_>>()?;
    let viewed = ViewPrefilter::with_views(schema, &strings);
    let physical = |exprs: Vec<Expr>, schema: &Schema| -> Result<_> {
        let Some(condition) = conjunction(exprs) else { return Ok(None) };
        Ok(Some(state.create_physical_expr(condition, &DFSchema::try_from(schema.clone())?)?))
    };
    let output = viewed.project(projection)?;
    let Some(condition) = physical(prefiltered, &output)? else { return Ok(None) };
    // As the filter above evaluates it: a date range before a string `IN`, which then sees only
    // the rows in range.
    let condition = lazy_side(&condition, &output)?;
    let pruning = pushed.into_iter().map(|e| as_views(e.clone())).collect::<Result<_>>()?;
    Ok(Some(ViewPrefilter { columns: strings, condition, pruning: physical(pruning, &viewed)? }))
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
    fn conjuncts_of_other_forms_that_cannot_fail_join_unless_they_read_a_view() {
        let state = SessionContext::new().state();
        let is_pushed = |e: &Expr| matches!(e, Expr::BinaryExpr(b) if matches!(*b.left, Expr::Column(_)) && matches!(*b.right, Expr::Literal(..)));
        let filters = [
            col("mode").eq(lit("AIR")),
            col("day").lt(col("name")),
            col("mode").lt(col("day")),
            cast(col("name"), DataType::Int32).gt(lit(1i32)),
            col("id").gt(lit(3i64)),
        ];
        let filters: Vec<&Expr> = filters.iter().collect();
        let prefilter = view_prefilter(&state, &schema(), &[0, 1, 2, 3], (&filters, is_pushed), &[]).unwrap().unwrap();
        assert_eq!(prefilter.columns, vec![2]);
        let condition = prefilter.condition.to_string();
        assert!(condition.contains("mode@2 = AIR") && condition.contains("day@3 < name@1"), "{condition}");
        assert!(!condition.contains("mode@2 < day@3") && !condition.contains("id@0"), "{condition}");
    }

    #[test]
    fn no_prefilter_behind_a_conjunct_that_may_fail_or_over_partition_values() {
        let may_fail = cast(col("name"), DataType::Int32).gt(lit(1i32));
        assert!(chosen(&[may_fail, col("mode").eq(lit("AIR"))], &[]).is_none());
        assert!(chosen(&[col("id").gt(lit(3i64))], &[]).is_none());
        assert!(chosen(&[col("mode").eq(lit("AIR")), col("day").eq(lit("2024-01-01"))], &["day"]).is_none());
    }
}

//! Spark's `RewriteExceptAll` and `RewriteIntersectAll`: `l EXCEPT ALL r` and `l INTERSECT ALL r`
//! count a row's copies on each side. Both sides, each row tagged with its side, become one union
//! grouped by every column (so NULL matches NULL, as in any set operation); a group keeps
//! `sum(tag)` copies for EXCEPT ALL (tag 1 on the left, -1 on the right), and for INTERSECT ALL
//! the smaller of its two sides' counts; Spark's `ReplicateRows` generator makes that many rows.
//!
//! DataFusion plans both as a semi or anti join on null-safe keys, which ignores the copies
//! (`{1, 1, 2} EXCEPT ALL {1}` was `{2}`). Its optimizer turns a user's `LEFT ANTI JOIN … ON
//! l.a <=> r.a` into the very same join, so this runs last among the analyzer's rules, where the
//! two still differ: ahead of every optimizer rule, as Spark's run first in its optimizer (the
//! `Replace Operators` batch, before `ReplaceDistinctWithAggregate`). Where we differ:
//! `ReplicateRows` is `unnest(array_repeat(column, n))` of each column. The result has both sides'
//! common types, as [`super::widen_set_operation_types`] gives the other set operations.

use std::sync::Arc;

use datafusion::common::UnnestOptions;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::expr_fn::{count, sum};
use datafusion::functions_nested::expr_fn::array_repeat;
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, lit, when};
use datafusion::optimizer::AnalyzerRule;

use super::widen_set_operation_types::is_set_operation;

#[derive(Debug, Default)]
pub struct RewriteExceptIntersectAll;

impl AnalyzerRule for RewriteExceptIntersectAll {
    fn name(&self) -> &str {
        "rewrite_except_intersect_all"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        // The rewrite may make columns nullable that were not: the operators above take that in.
        let mut rewritten = false;
        plan.transform_up_with_subqueries(|plan| match plan {
            LogicalPlan::Join(join) if is_set_operation_all(&join) => {
                rewritten = true;
                rewrite(join).map(Transformed::yes)
            }
            plan if rewritten => plan.recompute_schema().map(Transformed::yes),
            plan => Ok(Transformed::no(plan)),
        })
        .map(|transformed| transformed.data)
    }
}

/// The join DataFusion's SQL planner makes of an EXCEPT ALL (anti) or INTERSECT ALL (semi): a
/// set operation's, without the distinct on its left that an EXCEPT or INTERSECT without ALL has.
fn is_set_operation_all(join: &Join) -> bool {
    is_set_operation(join) && !matches!(join.left.as_ref(), LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_))
}

fn rewrite(join: Join) -> Result<LogicalPlan> {
    let output = Arc::clone(join.left.schema());
    // A union's columns have no qualifier: each is named after the left's, made unique.
    let mut names = Names::default();
    let columns: Vec<String> = output.fields().iter().map(|f| names.fresh(f.name())).collect();
    let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) = join.on.into_iter().unzip();
    // Each side's keys are its columns in the type both sides share.
    let side = |plan: Arc<LogicalPlan>, keys: Vec<Expr>, tags: Vec<(Expr, &String)>| {
        let keys = keys.into_iter().zip(&columns).map(|(key, name)| key.alias(name));
        LogicalPlanBuilder::from(plan).project(tags.into_iter().map(|(tag, name)| tag.alias(name)).chain(keys))
    };
    let group_by: Vec<Expr> = columns.iter().map(|name| column(name)).collect();
    let (counted, copies) = if join.join_type == JoinType::LeftAnti {
        let (vcol, total) = (names.fresh("vcol"), names.fresh("sum"));
        let union = side(join.left, left_keys, vec![(lit(1i64), &vcol)])?
            .union(side(join.right, right_keys, vec![(lit(-1i64), &vcol)])?.build()?)?;
        let counted =
            union.aggregate(group_by, [sum(column(&vcol)).alias(&total)])?.filter(column(&total).gt(lit(0i64)))?;
        (counted, column(&total))
    } else {
        let (vcol1, vcol2) = (names.fresh("vcol1"), names.fresh("vcol2"));
        let (count1, count2) = (names.fresh("vcol1_count"), names.fresh("vcol2_count"));
        let null = lit(ScalarValue::Boolean(None));
        let union = side(join.left, left_keys, vec![(lit(true), &vcol1), (null.clone(), &vcol2)])?
            .union(side(join.right, right_keys, vec![(null, &vcol1), (lit(true), &vcol2)])?.build()?)?;
        let counted = union
            .aggregate(group_by, [count(column(&vcol1)).alias(&count1), count(column(&vcol2)).alias(&count2)])?
            .filter(column(&count1).gt_eq(lit(1i64)).and(column(&count2).gt_eq(lit(1i64))))?;
        let smaller = when(column(&count1).gt(column(&count2)), column(&count2)).otherwise(column(&count1))?;
        (counted, smaller)
    };
    // Spark's `ReplicateRows(n, columns…)`: each row `n` times, as a list of `n` copies of each
    // column, unnested. Unnesting a list beside the grouped columns would keep them claimed unique
    // (DataFusion's `Unnest` keeps its input's functional dependencies), and a DISTINCT above
    // would be dropped.
    let repeated = columns.iter().map(|name| array_repeat(column(name), copies.clone()).alias(name));
    let unnested = columns.iter().map(Column::from_name).collect();
    // The left's names, in the types both sides share (`WidenSetOperationTypes`).
    let restored = columns
        .iter()
        .zip(output.iter())
        .map(|(name, (qualifier, field))| column(name).alias_qualified(qualifier.cloned(), field.name()));
    counted
        .project(repeated)?
        .unnest_columns_with_options(unnested, UnnestOptions::default())?
        .project(restored)?
        .build()
}

fn column(name: &str) -> Expr {
    Expr::Column(Column::from_name(name))
}

/// Names of the rewrite's columns, each unlike the others.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    /// `base`, or `base` with underscores after it where it is taken.
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        while self.0.contains(&name) {
            name.push('_');
        }
        self.0.push(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::execution::session_state::SessionStateBuilder;
    use datafusion::optimizer::Analyzer;

    use super::*;
    use crate::planner::widen_set_operation_types::WidenSetOperationTypes;

    /// The analyzed plan of `sql`, with DataFusion's analyzer rules and the set operations'
    /// after them.
    async fn analyzed(sql: &str) -> LogicalPlan {
        let mut rules = Analyzer::new().rules;
        rules.push(Arc::new(WidenSetOperationTypes));
        rules.push(Arc::new(RewriteExceptIntersectAll));
        let state = SessionStateBuilder::new().with_default_features().with_analyzer_rules(rules).build();
        let plan = state.create_logical_plan(sql).await.unwrap();
        state.analyzer().execute_and_check(plan, state.config_options(), |_, _| {}).unwrap()
    }

    /// Only DataFusion's plan of EXCEPT ALL and INTERSECT ALL is rewritten, never a user's
    /// null-safe join or the DISTINCT forms; a set operation's result has both sides' common
    /// type, a join's the left side's.
    #[tokio::test]
    async fn only_the_all_forms_are_rewritten() {
        const T: &str = "(VALUES (CAST(1 AS INT), 'x')) AS t(a, b)";
        const U: &str = "(VALUES (CAST(1 AS BIGINT), 'x')) AS u(a, b)";
        let cases = [
            (format!("SELECT a, b FROM {T} EXCEPT ALL SELECT a, b FROM {U}"), true),
            (format!("SELECT a, b FROM {T} INTERSECT ALL SELECT a, b FROM {U}"), true),
            (format!("SELECT a, b FROM {T} EXCEPT SELECT a, b FROM {U}"), false),
            (format!("SELECT a, b FROM {T} INTERSECT SELECT a, b FROM {U}"), false),
            (format!("SELECT t.a FROM {T} LEFT ANTI JOIN {U} ON t.a IS NOT DISTINCT FROM u.a"), false),
            (format!("SELECT t.a, t.b FROM {T} LEFT SEMI JOIN {U} USING (a, b)"), false),
        ];
        for (sql, rewritten) in cases {
            let plan = analyzed(&sql).await;
            let text = plan.display_indent().to_string();
            assert_eq!(text.contains("Unnest"), rewritten, "{sql}\n{text}");
            assert_eq!(text.contains("Join"), !rewritten, "{sql}\n{text}");
            let types: Vec<DataType> = plan.schema().fields().iter().map(|f| f.data_type().clone()).collect();
            let common = if sql.contains("JOIN") { DataType::Int32 } else { DataType::Int64 };
            assert_eq!(types[0], common, "{sql}\n{text}");
        }
    }
}

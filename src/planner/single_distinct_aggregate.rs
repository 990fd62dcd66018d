//! Spark plans an aggregate with one distinct argument (`count(DISTINCT b), sum(c)`) in two
//! levels: first grouped by the keys and `b` with the other aggregates partial, then by the keys
//! alone (`AggUtils.planAggregateWithOneDistinct`). DataFusion's `SingleDistinctToGroupBy`
//! rewrites the logical plan into the same two levels, summing the inner sums in the outer
//! aggregate; but a `sum` over `DECIMAL(p, s)` widens to `DECIMAL(p + 10, s)`, so the outer sum
//! comes out ten digits wider than the aggregate it replaces, while the plan above (a HAVING
//! comparison, a union) was typed for the original. We run the rewrite and cast every output
//! whose type changed back to the type Spark gives it. DataFusion's rewrite takes only `sum`,
//! `min` and `max` beside the distinct aggregate; with a `count` among them
//! (`count(DISTINCT b), count(*)`) we build the two levels ourselves (`with_counts`): the inner
//! counts merged in the outer aggregate, as Spark's `merge_count` merges them: summed, and 0
//! where no row came (no keys, no rows).
//!
//! Spark keeps the inner level in two aggregates (partial, then merge) even where its input
//! is already distributed by the keys and the distinct argument (a table bucketed by them), so
//! `split_inner_aggregates` undoes DataFusion's combining of that pair into one. Where the inner
//! level computes nothing but its keys (`count(DISTINCT b)` alone), Spark's plans show it as one
//! aggregate over such an input, and it stays one.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use datafusion::arrow::compute::sum;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, Aggregate, AggregateUDF, AggregateUDFImpl, EmitTo, Expr, ExprSchemable, GroupsAccumulator,
    LogicalPlan, Projection, Signature, Volatility, cast, col,
};
use datafusion::optimizer::single_distinct_to_groupby::SingleDistinctToGroupBy;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};

use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `SingleDistinctToGroupBy`, with counts and Spark's result types.
pub type SingleDistinctAggregate = Overridden<SingleDistinctToGroupBy, SparkResultTypes>;

#[derive(Debug, Default)]
pub struct SparkResultTypes;

impl Rewrite for SparkResultTypes {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        let before = plan.schema().clone();
        let rewritten = match &plan {
            LogicalPlan::Aggregate(aggregate) => match with_counts(aggregate)? {
                Some(two_levels) => Transformed::yes(two_levels),
                None => rule.rewrite(plan, config)?,
            },
            _ => rule.rewrite(plan, config)?,
        };
        let LogicalPlan::Projection(projection) = &rewritten.data else { return Ok(rewritten) };
        if !rewritten.transformed || projection.schema.fields().len() != before.fields().len() {
            return Ok(rewritten);
        }
        let input_schema = projection.input.schema();
        let mut changed = false;
        let mut exprs = Vec::with_capacity(projection.expr.len());
        for (expr, field) in projection.expr.iter().zip(before.fields()) {
            if expr.get_type(input_schema)? == *field.data_type() {
                exprs.push(expr.clone());
                continue;
            }
            changed = true;
            let (qualifier, name) = expr.qualified_name();
            let unaliased = match expr {
                Expr::Alias(alias) => alias.expr.as_ref().clone(),
                other => other.clone(),
            };
            exprs.push(cast(unaliased, field.data_type().clone()).alias_qualified(qualifier, name));
        }
        if !changed {
            return Ok(rewritten);
        }
        let projection = Projection::try_new(exprs, projection.input.clone())?;
        Ok(Transformed::yes(LogicalPlan::Projection(projection)))
    }
}

/// The name DataFusion's rewrite gives the distinct argument among the inner level's keys.
pub const SINGLE_DISTINCT_ALIAS: &str = "alias1";

/// The inner level of a rewritten single-distinct aggregate that runs as one aggregate
/// (partial and final combined) as Spark's partial and merge aggregates.
pub fn split_inner_aggregates(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(single) = node.downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let final_mode = match single.mode() {
            AggregateMode::Single => AggregateMode::Final,
            AggregateMode::SinglePartitioned => AggregateMode::FinalPartitioned,
            _ => return Ok(Transformed::no(node)),
        };
        let distinct_keys = single.group_expr().expr().iter().any(|(_, name)| name == SINGLE_DISTINCT_ALIAS);
        if !distinct_keys || single.aggr_expr().is_empty() {
            return Ok(Transformed::no(node));
        }
        let partial = Arc::new(AggregateExec::try_new(
            AggregateMode::Partial,
            single.group_expr().clone(),
            single.aggr_expr().to_vec(),
            single.filter_expr().to_vec(),
            Arc::clone(single.input()),
            single.input_schema(),
        )?);
        let merged = AggregateExec::try_new(
            final_mode,
            partial.group_expr().as_final(),
            partial.aggr_expr().to_vec(),
            single.filter_expr().to_vec(),
            partial,
            single.input_schema(),
        )?;
        Ok(Transformed::yes(Arc::new(merged) as Arc<dyn ExecutionPlan>))
    })
    .map(|t| t.data)
}

/// `aggregate`, one distinct argument among non-distinct `count`, `sum`, `min` and `max` of
/// which one at least is a `count`, in two levels: grouped by the keys and the distinct
/// argument (`alias1`, the other aggregates as `alias2`, …), then by the keys alone.
fn with_counts(aggregate: &Aggregate) -> Result<Option<LogicalPlan>> {
    if aggregate.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
        return Ok(None);
    }
    let mut functions = Vec::with_capacity(aggregate.aggr_expr.len());
    for expr in &aggregate.aggr_expr {
        let inner = match expr {
            Expr::Alias(alias) => alias.expr.as_ref(),
            other => other,
        };
        match inner {
            Expr::AggregateFunction(f) if f.params.filter.is_none() && f.params.order_by.is_empty() => {
                functions.push(f.clone())
            }
            _ => return Ok(None),
        }
    }
    let distinct: Vec<&AggregateFunction> = functions.iter().filter(|f| f.params.distinct).collect();
    let Some(argument) = distinct.first().and_then(|f| f.params.args.first()) else { return Ok(None) };
    let merges =
        |f: &AggregateFunction| ["count", "sum", "min", "max"].contains(&f.func.name().to_lowercase().as_str());
    let is_count = |f: &AggregateFunction| f.func.name().eq_ignore_ascii_case("count");
    if distinct.iter().any(|f| f.params.args.len() != 1 || f.params.args[0] != *argument)
        || functions.iter().any(|f| !f.params.distinct && !merges(f))
        || !functions.iter().any(|f| !f.params.distinct && is_count(f))
    {
        return Ok(None);
    }
    let keys = aggregate.group_expr.len();
    let mut inner_group: Vec<Expr> =
        aggregate.group_expr.iter().enumerate().map(|(i, e)| e.clone().alias(format!("group_alias_{i}"))).collect();
    inner_group.push(argument.clone().alias(SINGLE_DISTINCT_ALIAS));
    let (mut inner_aggr, mut outer_aggr) = (Vec::new(), Vec::new());
    for f in &functions {
        let (merge, input) = if f.params.distinct {
            (Arc::clone(&f.func), SINGLE_DISTINCT_ALIAS.to_string())
        } else {
            let name = format!("alias{}", inner_aggr.len() + 2);
            let plain =
                AggregateFunction::new_udf(Arc::clone(&f.func), f.params.args.clone(), false, None, vec![], None);
            inner_aggr.push(Expr::AggregateFunction(plain).alias(&name));
            if is_count(f) { (merge_count(), name) } else { (Arc::clone(&f.func), name) }
        };
        outer_aggr.push(Expr::AggregateFunction(AggregateFunction::new_udf(
            merge,
            vec![col(input)],
            false,
            None,
            vec![],
            None,
        )));
    }
    let inner = Aggregate::try_new(Arc::clone(&aggregate.input), inner_group, inner_aggr)?;
    let outer_group: Vec<Expr> = (0..keys).map(|i| col(format!("group_alias_{i}"))).collect();
    let outer =
        LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(LogicalPlan::Aggregate(inner)), outer_group, outer_aggr)?);
    let results = outer.schema().columns();
    let exprs = aggregate
        .schema
        .iter()
        .zip(results)
        .map(|((qualifier, field), result)| Expr::Column(result).alias_qualified(qualifier.cloned(), field.name()))
        .collect();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(outer))?)))
}

/// Spark's `merge_count`, as an aggregate function.
pub fn merge_count() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(MergeCount::default()))
}

/// Spark's `merge_count`: the sum of the partial counts, 0 over none (with no keys, no rows give
/// the inner level no group, and the count is 0, not NULL). Never NULL, as the count it replaces:
/// a `sum` in its place made a union above it nullable where the logical plan was not.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MergeCount {
    signature: Signature,
}

impl Default for MergeCount {
    fn default() -> Self {
        MergeCount { signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable) }
    }
}

impl AggregateUDFImpl for MergeCount {
    fn name(&self) -> &str {
        "merge_count"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CountsMerged(0)))
    }

    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(CountsMergedByGroup::default()))
    }
}

/// The counts of the rows `opt_filter` lets through, 0 for the others and for NULLs.
fn passing(values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Int64Array {
    let counts = values[0].as_primitive::<Int64Type>();
    (0..counts.len())
        .map(|row| {
            let passes = opt_filter.is_none_or(|filter| filter.is_valid(row) && filter.value(row));
            if passes && counts.is_valid(row) { counts.value(row) } else { 0 }
        })
        .collect()
}

/// `merge_count` by group: each group's total starts at 0, so a group whose rows a `FILTER`
/// left out (or that had none in a partition) still counts 0, never NULL.
#[derive(Debug, Default)]
struct CountsMergedByGroup {
    totals: Vec<i64>,
}

impl GroupsAccumulator for CountsMergedByGroup {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.totals.resize(total_num_groups, 0);
        let counts = passing(values, opt_filter);
        for (group, count) in group_indices.iter().zip(counts.values()) {
            self.totals[*group] += count;
        }
        Ok(())
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.update_batch(values, group_indices, None, total_num_groups)
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        Ok(vec![Arc::new(passing(values, opt_filter))])
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from(emit_to.take_needed(&mut self.totals))))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.evaluate(emit_to)?])
    }

    fn size(&self) -> usize {
        self.totals.capacity() * size_of::<i64>()
    }
}

#[derive(Debug)]
struct CountsMerged(i64);

impl Accumulator for CountsMerged {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0 += values.iter().filter_map(|counts| sum(counts.as_primitive::<Int64Type>())).sum::<i64>();
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Int64(Some(self.0))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(self.0)))
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }
}

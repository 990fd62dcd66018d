//! Which conversion a DataFusion operator takes, by its type; Spark's `Union`, whose inputs
//! DataFusion renames in projections of their own; and operators Spark has no name for,
//! shown under DataFusion's.

use std::sync::Arc;

use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};
use datafusion::physical_plan::{ExecutionPlan, displayable};

use super::project::named_by_projection;
use super::relation::{local_rows, range_arguments};
use super::window::window_parts;
use super::{Converter, Position, address};
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::empty_relation::EmptyRelationExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::plumbing::plumbing_input;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::exec::sort::SortExec;
use crate::explain::analyze::figures;
use crate::explain::plan::{Codegen, Node, field};
use crate::planner::adaptive::AdaptiveSparkPlanExec;

impl Converter {
    pub fn convert(&mut self, plan: &Arc<dyn ExecutionPlan>, at: Position) -> Node {
        if let Some(inner) = plumbing_input(plan) {
            return self.convert(inner, at);
        }
        let mut node = self.operator(plan, at);
        node.metrics = figures(plan.as_ref());
        node
    }

    fn operator(&mut self, plan: &Arc<dyn ExecutionPlan>, at: Position) -> Node {
        if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
            let origin = address(scan);
            if let Some(converted) = self.scans.get(&origin) {
                return converted.clone();
            }
            let mut converted = self.scan(scan);
            converted.origin = Some(origin);
            self.scans.insert(origin, converted.clone());
            converted
        } else if let Some(adaptive) = plan.downcast_ref::<AdaptiveSparkPlanExec>() {
            self.adaptive(adaptive, at)
        } else if let Some(stage) = plan.downcast_ref::<ShuffleQueryStageExec>() {
            self.shuffle_stage(stage, at)
        } else if let Some(stage) = plan.downcast_ref::<BroadcastQueryStageExec>() {
            self.broadcast_stage(stage, at)
        } else if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
            self.shuffle_read(read, at)
        } else if let Some(exchange) = plan.downcast_ref::<ShuffleExchangeExec>() {
            self.shuffle(exchange, at)
        } else if let Some(reused) = plan.downcast_ref::<ReusedExchangeExec>() {
            self.reused_exchange(reused)
        } else if let Some(broadcast) = plan.downcast_ref::<BroadcastExchangeExec>() {
            self.broadcast(broadcast)
        } else if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
            self.join(join)
        } else if let Some(empty) = plan.downcast_ref::<EmptyRelationExec>() {
            self.empty_relation(&empty.schema(), empty.logical())
        } else if let Some(filter) = plan.downcast_ref::<FilterExec>() {
            self.filter(filter)
        } else if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
            self.projection(projection, at)
        } else if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
            self.aggregate(aggregate, &[])
        } else if let Some(sort) = plan.downcast_ref::<SortExec>() {
            self.sort(sort, at)
        } else if let Some(merge) = plan.downcast_ref::<SortPreservingMergeExec>() {
            self.sort_preserving_merge(merge)
        } else if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
            self.coalesce(coalesce, at)
        } else if let Some(limit) = plan.downcast_ref::<GlobalLimitExec>() {
            self.global_limit(limit, at)
        } else if let Some(limit) = plan.downcast_ref::<LocalLimitExec>() {
            self.local_limit(limit)
        } else if let Some(window) = window_parts(plan) {
            self.window(window, &plan.schema(), &[])
        } else if plan.is::<UnionExec>() || plan.is::<InterleaveExec>() {
            // Spark's union takes its columns' names from the first child; DataFusion renames
            // the others' in a projection of their own, which Spark does not have.
            let children: Vec<Node> = plan
                .children()
                .into_iter()
                .enumerate()
                .map(|(i, c)| match renamed_input(c) {
                    Some(input) if i > 0 && !named_by_projection(input) => input,
                    _ => c,
                })
                .map(|c| self.convert(c, Position::default()))
                .collect();
            let output = children.first().map(|c| c.output.clone()).unwrap_or_default();
            let codegen = if plan.is::<UnionExec>() && fuses_union(&children) { Codegen::Yes } else { Codegen::No };
            Node::new("Union", "Union", output, children).codegen(codegen)
        } else if let Some(range) = range_arguments(plan.as_ref()) {
            self.range(&plan.schema(), range)
        } else if let Some(rows) = local_rows(plan) {
            self.local_table(&plan.schema(), rows)
        } else if plan.is::<PlaceholderRowExec>() {
            self.one_row(&plan.schema())
        } else {
            self.unknown(plan)
        }
    }

    /// An operator Spark has no name for, shown under DataFusion's.
    fn unknown(&mut self, plan: &Arc<dyn ExecutionPlan>) -> Node {
        let children: Vec<Node> = plan.children().into_iter().map(|c| self.convert(c, Position::default())).collect();
        let schema = plan.schema();
        let output = match children.as_slice() {
            [child]
                if child.output.len() == schema.fields().len()
                    && child.output.iter().zip(schema.fields()).all(|(a, f)| a.name == *f.name()) =>
            {
                child.output.clone()
            }
            _ => self.fresh_schema(&schema),
        };
        let line = displayable(plan.as_ref()).one_line().to_string();
        let line = line.trim();
        let arguments = line.split_once(": ").map(|(_, a)| a.to_string());
        let mut details = match children.as_slice() {
            [] => vec![field("Output", &output)],
            [child] => vec![field("Input", &child.output)],
            _ => Vec::new(),
        };
        details.extend(arguments.map(|a| format!("Arguments: {a}")));
        Node::new(plan.name(), line, output, children).details(details)
    }
}

/// The input of a projection that only renames its input's columns, in order.
fn renamed_input(plan: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    let projection = plan.downcast_ref::<ProjectionExec>()?;
    let exprs = projection.expr();
    let renames = exprs.len() == projection.input().schema().fields().len()
        && exprs.iter().enumerate().all(|(i, p)| p.expr.downcast_ref::<Column>().is_some_and(|c| c.index() == i));
    renames.then(|| projection.input())
}

/// Spark 4's `UnionExec.supportCodegen` for a union that concatenates its children (one whose
/// children share a partitioning keeps it and runs apart): fused into its parent's stage
/// unless a child holds another union or a sort-merge or shuffled hash join anywhere below, or
/// there are more than `spark.sql.codegen.wholeStage.union.maxChildren` (64) children. A
/// union of columnar children runs columnar instead (see `columnar_to_row`).
fn fuses_union(children: &[Node]) -> bool {
    const MAX_CHILDREN: usize = 64;
    fn holds(node: &Node, names: &[&str]) -> bool {
        names.contains(&node.name.as_str()) || node.children.iter().any(|c| holds(c, names))
    }
    children.len() <= MAX_CHILDREN
        && !children.iter().any(|c| holds(c, &["Union", "SortMergeJoin", "ShuffledHashJoin"]))
}

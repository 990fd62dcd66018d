//! Spark's adaptive plan: `AdaptiveSparkPlan` before it runs (the plan as planned) and after
//! (`== Final Plan ==` with its `ShuffleQueryStage`, `BroadcastQueryStage`, `AQEShuffleRead`
//! and `ResultQueryStage`, then `== Initial Plan ==`).

use super::{Converter, Position};
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::explain::cost::statistics;
use crate::explain::plan::{Node, Role, field};
use crate::planner::adaptive::AdaptiveSparkPlanExec;

impl Converter {
    pub(super) fn adaptive(&mut self, adaptive: &AdaptiveSparkPlanExec, at: Position) -> Node {
        let Some(done) = adaptive.final_plan() else {
            return self.convert(adaptive.initial(), at).adaptive();
        };
        let final_plan = self.convert(&done.plan, at);
        let result = Node::query_stage("ResultQueryStage", done.result_stage_id, final_plan, None);
        let initial = self.convert(adaptive.initial(), at);
        Node::adaptive_final(result, initial)
    }

    pub(super) fn shuffle_stage(&mut self, stage: &ShuffleQueryStageExec, at: Position) -> Node {
        let exchange = self.convert(stage.plan(), at);
        let figures = stage.statistics();
        let statistics = statistics(u128::from(figures.data_size()), Some(figures.total_rows()));
        Node::query_stage("ShuffleQueryStage", stage.id(), exchange, Some(statistics))
    }

    pub(super) fn broadcast_stage(&mut self, stage: &BroadcastQueryStageExec, at: Position) -> Node {
        let exchange = self.convert(stage.plan(), at);
        let statistics = statistics(u128::from(stage.bytes()), Some(stage.rows()));
        Node::query_stage("BroadcastQueryStage", stage.id(), exchange, Some(statistics))
    }

    pub(super) fn shuffle_read(&mut self, read: &AqeShuffleReadExec, at: Position) -> Node {
        let stage = self.convert(read.input(), at);
        let kind = read.kind();
        let mut details = vec![field("Input", &stage.output)];
        let annotation = if kind.is_empty() {
            String::new()
        } else {
            details.push(format!("Arguments: {kind}"));
            format!(", {kind}")
        };
        let role = Role::ShuffleRead { kind: kind.to_string(), partitions: read.specs().len() };
        let mut node = Node::new(
            "AQEShuffleRead",
            format!("AQEShuffleRead{}", annotation.replacen(',', "", 1)),
            stage.output.clone(),
            vec![stage],
        )
        .details(details)
        .role(role);
        node.annotation = annotation;
        node
    }
}

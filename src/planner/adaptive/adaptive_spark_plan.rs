//! Spark's `AdaptiveSparkPlanExec`: the root of a query that runs stage by stage.
//!
//! Each round runs, all at once, every exchange whose input holds no exchange that has not
//! run — after choosing how that input reads the stages below it (coalesced, local) — and
//! then re-plans what is left with the stages' statistics. When every exchange has run, the
//! last stage gets its reads chosen the same way and runs. Its partitions come out as one
//! (the number of partitions changes as the plan adapts), in order only where the plan ends
//! in a single partition. Uncorrelated scalar subqueries run beside all that, each adaptively,
//! and a stage that reads their values waits for them (`plan_adaptive_subqueries`).
//! An exchange the same as another of its round runs as a stage over a `ReusedExchange` of it,
//! reading the other's output (Spark's stage cache). An exchange whose rows a runtime filter
//! drops by the keys of the other side of its join (`inject_runtime_filter`) waits for the
//! stage that gathers them.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
    replace_children_if_necessary,
};
use futures::TryStreamExt;
use futures::future::BoxFuture;

use super::aqe_propagate_empty_relation::propagate_empty_relation;
use super::coalesce_shuffle_partitions::coalesce_shuffle_partitions;
use super::dynamic_join_selection::reselect_joins;
use super::inject_runtime_filter::{inject_runtime_filters, stop_waiting, waits_for_keys};
use super::join_shuffle_partitions_apart::join_shuffle_partitions_apart;
use super::optimize_shuffle_with_local_read::optimize_shuffle_with_local_read;
use super::optimize_skewed_join::optimize_skewed_join;
use super::plan_adaptive_subqueries::Subqueries;
use super::read_twin_exchanges::twins_in_round;
use super::{is_query_stage, replace_nodes};
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::downcast_plan::downcast_plan;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::bucketing::disable_unnecessary_bucketed_scan::disable_unnecessary_bucketed_scan;
use crate::planner::hints::QueryHints;
use crate::planner::reuse_exchange::ExchangesSeen;

/// The plan a run ended with.
#[derive(Debug, Clone)]
pub struct FinalPlan {
    pub plan: Arc<dyn ExecutionPlan>,
    /// Spark's id of the `ResultQueryStage`: one more than the last query stage's.
    pub result_stage_id: usize,
}

#[derive(Debug)]
pub struct AdaptiveSparkPlanExec {
    initial: Arc<dyn ExecutionPlan>,
    conf: SparkConf,
    hints: QueryHints,
    /// Set once the run has planned its last stage.
    final_plan: Arc<OnceLock<FinalPlan>>,
    /// While it runs: the plan of the round running, its exchanges the ones that run.
    running: Arc<Mutex<Option<Arc<dyn ExecutionPlan>>>>,
    properties: Arc<PlanProperties>,
}

impl AdaptiveSparkPlanExec {
    pub fn new(initial: Arc<dyn ExecutionPlan>, conf: SparkConf, hints: QueryHints) -> Self {
        // Adapting never splits a single partition (single-partition shuffles are neither
        // coalesced nor read locally), so only then does the initial plan's order hold.
        let equivalences = if initial.output_partitioning().partition_count() == 1 {
            initial.equivalence_properties().clone()
        } else {
            EquivalenceProperties::new(initial.schema())
        };
        let properties = PlanProperties::new(
            equivalences,
            Partitioning::UnknownPartitioning(1),
            initial.pipeline_behavior(),
            initial.boundedness(),
        );
        AdaptiveSparkPlanExec {
            initial,
            conf,
            hints,
            final_plan: Arc::default(),
            running: Arc::default(),
            properties: Arc::new(properties),
        }
    }

    /// The plan as planned before anything ran.
    pub fn initial(&self) -> &Arc<dyn ExecutionPlan> {
        &self.initial
    }

    /// The plan the run ended with, once it has run.
    pub fn final_plan(&self) -> Option<&FinalPlan> {
        self.final_plan.get()
    }

    /// The plan of the round running now, while the run has not planned its last stage: the
    /// stages run so far and the exchanges running, for watching a query's progress.
    pub fn running(&self) -> Option<Arc<dyn ExecutionPlan>> {
        if self.final_plan.get().is_some() {
            return None;
        }
        self.running.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl DisplayAs for AdaptiveSparkPlanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AdaptiveSparkPlanExec: isFinalPlan={}", self.final_plan.get().is_some())
    }
}

impl ExecutionPlan for AdaptiveSparkPlanExec {
    fn name(&self) -> &str {
        "AdaptiveSparkPlanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    /// The plan that runs: the initial one until the run has planned its last stage.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        match self.final_plan.get() {
            Some(done) => vec![&done.plan],
            None => vec![&self.initial],
        }
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), self.final_plan.get()) {
            (Some(child), None) if children.is_empty() => {
                Ok(Arc::new(AdaptiveSparkPlanExec::new(child, self.conf.clone(), self.hints.clone())))
            }
            _ => Err(DataFusionError::Internal("an adaptive plan takes one child, and only before it runs".into())),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 || self.final_plan.get().is_some() {
            return Err(DataFusionError::Internal("an adaptive plan runs once, as one partition".into()));
        }
        let mut stages = StagePlanner {
            conf: self.conf.clone(),
            hints: self.hints.clone(),
            context,
            next_stage_id: 0,
            running: Arc::clone(&self.running),
        };
        let (initial, done) = (Arc::clone(&self.initial), Arc::clone(&self.final_plan));
        let stream = futures::stream::once(async move {
            let plan = stages.run(initial).await?;
            let _ = done.set(FinalPlan { plan: Arc::clone(&plan), result_stage_id: stages.next_stage_id });
            stages.show_running(None);
            let gathered: Arc<dyn ExecutionPlan> = if plan.output_partitioning().partition_count() == 1 {
                plan
            } else {
                Arc::new(CoalescePartitionsExec::new(plan))
            };
            gathered.execute(0, stages.context)
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }
}

/// One run's stages and the settings its rules read.
struct StagePlanner {
    conf: SparkConf,
    hints: QueryHints,
    context: Arc<TaskContext>,
    next_stage_id: usize,
    /// The plan [`AdaptiveSparkPlanExec::running`] shows.
    running: Arc<Mutex<Option<Arc<dyn ExecutionPlan>>>>,
}

impl StagePlanner {
    /// Runs every exchange of `plan` as a stage, re-planning after each round, and returns the
    /// last stage's plan, ready to run.
    async fn run(&mut self, plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
        let (conf, hints) = (&self.conf, &self.hints);
        let adaptive = |subquery| Arc::new(AdaptiveSparkPlanExec::new(subquery, conf.clone(), hints.clone())) as _;
        let (plan, subqueries) = Subqueries::start(plan, adaptive, &self.context)?;
        let mut plan = inject_runtime_filters(plan, &self.conf)?;
        loop {
            let mut ready = Vec::new();
            plan = self.prepare_ready_exchanges(&plan, &mut ready)?.0;
            if ready.is_empty() && stop_waiting(&plan) {
                continue;
            }
            if ready.is_empty() {
                // Nothing is above the root: the client reads its rows as they come, and
                // the subqueries' values, if nothing below has read them.
                subqueries.done().await?;
                return self.optimize_stage(plan, false);
            }
            self.show_running(Some(Arc::clone(&plan)));
            let reused = reused_in_round(&ready, self.conf.exchange_reuse)?;
            let twins = match self.conf.exchange_reuse {
                true => twins_in_round(&ready, &reused).await?,
                false => ready.iter().map(|_| None).collect(),
            };
            let first_stage_id = self.next_stage_id;
            let runs: Vec<BoxFuture<'static, Result<Arc<dyn ExecutionPlan>>>> = ready
                .iter()
                .zip(reused.into_iter().zip(twins))
                .map(|(exchange, (reused, twin))| {
                    // The round's stages take their ids in order, the twin's among them.
                    let twin = twin.map(|twin| (first_stage_id + twin.index, twin.reused));
                    subqueries.before(exchange, self.materialize(exchange, reused, twin)?)
                })
                .collect::<Result<_>>()?;
            let stages = futures::future::try_join_all(runs).await?;
            plan = replace_nodes(plan, &ready, &stages)?;
            plan = propagate_empty_relation(plan)?;
            plan = reselect_joins(plan, &self.conf, &self.hints)?;
            plan = disable_unnecessary_bucketed_scan(plan, &self.conf)?;
            plan = optimize_skewed_join(plan, &self.conf)?;
        }
    }

    fn show_running(&self, plan: Option<Arc<dyn ExecutionPlan>>) {
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = plan;
    }

    /// Finds the exchanges that can run now — no exchange that has not run below them — and
    /// chooses how their inputs read the stages below. Returns the plan with those inputs and
    /// whether any exchange that has not run is at or below its root.
    fn prepare_ready_exchanges(
        &self,
        plan: &Arc<dyn ExecutionPlan>,
        ready: &mut Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
        if is_query_stage(plan) {
            return Ok((Arc::clone(plan), false));
        }
        let mut pending_below = false;
        let mut children = Vec::new();
        for child in plan.children() {
            let (child, pending) = self.prepare_ready_exchanges(child, ready)?;
            pending_below |= pending;
            children.push(child);
        }
        let mut plan = replace_children_if_necessary(Arc::clone(plan), children)?;
        let is_exchange = plan.is::<ShuffleExchangeExec>() || plan.is::<BroadcastExchangeExec>();
        // An exchange filtered by the keys of another stage waits for that stage.
        if is_exchange && !pending_below && !waits_for_keys(&plan) {
            let input = plan.children().into_iter().next().map(Arc::clone);
            if let Some(input) = input {
                let order_needed = plan.maintains_input_order().first().copied().unwrap_or(false);
                let optimized = self.optimize_stage(Arc::clone(&input), order_needed)?;
                if !Arc::ptr_eq(&optimized, &input) {
                    plan = replace_children_if_necessary(Arc::clone(&plan), vec![optimized])?;
                }
            }
            ready.push(Arc::clone(&plan));
        }
        Ok((plan, pending_below || is_exchange))
    }

    /// Spark's `optimizeQueryStage`: how the plan of a stage about to run reads the stages
    /// below. `order_needed`: whether what consumes the stage relies on its order.
    fn optimize_stage(&self, plan: Arc<dyn ExecutionPlan>, order_needed: bool) -> Result<Arc<dyn ExecutionPlan>> {
        let parallelism = self.context.session_config().target_partitions();
        let plan = coalesce_shuffle_partitions(plan, &self.conf, parallelism)?;
        let plan = optimize_shuffle_with_local_read(plan, &self.conf)?;
        join_shuffle_partitions_apart(plan, order_needed)
    }

    /// Runs `exchange` as the next query stage, or reads the exchange it is the same as, or its
    /// twin's output (stage `twin.0`'s).
    fn materialize(
        &mut self,
        exchange: &Arc<dyn ExecutionPlan>,
        reused: Option<Arc<ReusedExchangeExec>>,
        twin: Option<(usize, Arc<ReusedExchangeExec>)>,
    ) -> Result<BoxFuture<'static, Result<Arc<dyn ExecutionPlan>>>> {
        let id = self.next_stage_id;
        self.next_stage_id += 1;
        let context = Arc::clone(&self.context);
        if let (Some(twin), Some(own)) = (twin, downcast_plan::<ShuffleExchangeExec>(exchange)) {
            return Ok(Box::pin(async move {
                Ok(Arc::new(ShuffleQueryStageExec::read_twin(id, own, twin, context).await?) as Arc<dyn ExecutionPlan>)
            }));
        }
        match reused {
            Some(reused) if reused.shuffle().is_some() => {
                return Ok(Box::pin(async move {
                    Ok(Arc::new(ShuffleQueryStageExec::reuse(id, reused, context).await?) as Arc<dyn ExecutionPlan>)
                }));
            }
            // A broadcast stage gathers what the reused exchange gathered once.
            Some(reused) => {
                return Ok(Box::pin(async move {
                    let stage = BroadcastQueryStageExec::materialize(id, reused, context).await?;
                    Ok(Arc::new(stage) as Arc<dyn ExecutionPlan>)
                }));
            }
            None => {}
        }
        if let Some(shuffle) = downcast_plan::<ShuffleExchangeExec>(exchange) {
            return Ok(Box::pin(async move {
                let stage = ShuffleQueryStageExec::materialize(id, shuffle, context).await?;
                Ok(Arc::new(stage) as Arc<dyn ExecutionPlan>)
            }));
        }
        let exchange = Arc::clone(exchange);
        Ok(Box::pin(async move {
            let stage = BroadcastQueryStageExec::materialize(id, exchange, context).await?;
            Ok(Arc::new(stage) as Arc<dyn ExecutionPlan>)
        }))
    }
}

/// Spark's stage cache within one round (`spark.sql.exchange.reuse`): for each exchange about
/// to run, the `ReusedExchange` of an earlier one in the round that is the same, if any.
fn reused_in_round(ready: &[Arc<dyn ExecutionPlan>], enabled: bool) -> Result<Vec<Option<Arc<ReusedExchangeExec>>>> {
    if !enabled {
        return Ok(vec![None; ready.len()]);
    }
    let mut seen = ExchangesSeen::default();
    ready.iter().map(|exchange| Ok(seen.reuse(exchange)?.map(Arc::new))).collect()
}

//! The plan as a tree of Spark operators with what each measured and why each exchange is
//! there: what a picture of the plan is drawn from (the web UI's graph and its JSON API), as
//! Spark's SQL tab draws its plans from `SparkPlanGraph`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use serde::Serialize;

use super::analyze::Figure;
use super::bucketing::notes;
use super::plan::{Node, Role, Stage, parse_formatted};
use super::{ExplainContext, formatted, spark_formatted_sections, spark_plan};
use crate::catalog::table::TableMeta;
use crate::config::SparkConf;
use crate::exec::file_source_scan::BucketedStatus;
use crate::planner::adaptive::AdaptiveSparkPlanExec;

/// A plan as the web UI shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanGraph {
    pub adaptive: Adaptive,
    /// The plan that runs: with adaptive execution, the stages so far while it runs and the
    /// final plan once it has run.
    pub root: GraphNode,
    /// The plan as first planned, where adaptive execution has changed it since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial: Option<GraphNode>,
    /// `EXPLAIN FORMATTED` of the plan, with its Extended Information and Advice sections.
    pub formatted: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Adaptive {
    /// Not an adaptive plan: it runs as planned.
    No,
    /// Adaptive, and not run (yet): `isFinalPlan=false`.
    Planned,
    /// Adaptive and running: the stages that have run, and the exchanges running now.
    Running,
    /// Adaptive and run: `isFinalPlan=true`.
    Final,
}

/// One operator.
#[derive(Debug, Clone, Serialize)]
pub struct GraphNode {
    /// Its operator id in EXPLAIN FORMATTED.
    pub id: usize,
    /// Spark's name, as the FORMATTED outline shows it (`SortMergeJoin Inner`).
    pub name: String,
    pub kind: NodeKind,
    /// Spark's one-line form of it, with its arguments.
    pub summary: String,
    /// Its whole-stage codegen stage, `*(n)` in Spark's plans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codegen_stage: Option<u32>,
    pub metrics: Vec<Figure>,
    /// The lines of `== Extended Information (Bucketing) ==` about this operator.
    pub notes: Vec<String>,
    pub children: Vec<GraphNode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Moves rows between partitions by hash or range, or gathers them into one.
    ShuffleExchange,
    /// Sends all of its input to every task of the join above.
    BroadcastExchange,
    /// Reads a table by bucket: its partitions are the buckets.
    BucketedScan,
    Scan,
    /// A query stage of an adaptive run.
    QueryStage,
    /// How adaptive execution read a stage's partitions.
    ShuffleRead,
    Operator,
}

impl PlanGraph {
    /// The graph of `plan` as it stands: planned, running or run.
    pub fn of(plan: &Arc<dyn ExecutionPlan>, ctx: &ExplainContext) -> PlanGraph {
        if let Some(running) = plan.downcast_ref::<AdaptiveSparkPlanExec>().and_then(AdaptiveSparkPlanExec::running) {
            let mut graph = PlanGraph::of(&running, ctx);
            graph.adaptive = Adaptive::Running;
            graph.initial = None;
            return graph;
        }
        let root = spark_plan(plan);
        // Converted once, for the text and the graph alike.
        let formatted = formatted(plan, &root, ctx);
        PlanGraph::drawn(&root, formatted, &ctx.conf)
    }

    /// The graph of Spark's own plan of a statement that runs on Spark, from its EXPLAIN
    /// FORMATTED `text`; the statement reads `tables`. `None` where the text cannot be read.
    pub fn of_spark(text: &str, tables: &[TableMeta], conf: &SparkConf) -> Option<PlanGraph> {
        let root = parse_formatted(text, tables)?;
        Some(PlanGraph::drawn(&root, spark_formatted_sections(text, &root, tables, conf), conf))
    }

    fn drawn(root: &Node, formatted: String, conf: &SparkConf) -> PlanGraph {
        let mut notes_by_id: HashMap<usize, Vec<String>> = HashMap::new();
        for note in notes(root, conf.v2_bucketing_enabled) {
            if let Some(id) = note.id {
                notes_by_id.entry(id).or_default().push(note.text);
            }
        }
        let node = |n: &Node| GraphNode::of(n, &notes_by_id);
        match (&root.role, root.children.as_slice()) {
            (Role::AdaptiveRoot { is_final: true }, [final_plan, initial]) => {
                PlanGraph { adaptive: Adaptive::Final, root: node(final_plan), initial: Some(node(initial)), formatted }
            }
            (Role::AdaptiveRoot { is_final: false }, [planned]) => {
                PlanGraph { adaptive: Adaptive::Planned, root: node(planned), initial: None, formatted }
            }
            _ => PlanGraph { adaptive: Adaptive::No, root: node(root), initial: None, formatted },
        }
    }
}

impl GraphNode {
    fn of(node: &Node, notes: &HashMap<usize, Vec<String>>) -> GraphNode {
        let kind = match &node.role {
            Role::Shuffle { .. } => NodeKind::ShuffleExchange,
            Role::Broadcast => NodeKind::BroadcastExchange,
            Role::Scan { status: BucketedStatus::Bucketed, .. } => NodeKind::BucketedScan,
            Role::Scan { .. } => NodeKind::Scan,
            Role::QueryStage { .. } => NodeKind::QueryStage,
            Role::ShuffleRead { .. } => NodeKind::ShuffleRead,
            _ => NodeKind::Operator,
        };
        GraphNode {
            id: node.id,
            name: format!("{}{}", node.outline, node.annotation),
            kind,
            summary: node.simple.clone(),
            codegen_stage: match node.stage {
                Stage::Id(id) => Some(id),
                _ => None,
            },
            metrics: node.metrics.clone(),
            notes: notes.get(&node.id).cloned().unwrap_or_default(),
            children: node.children.iter().map(|c| GraphNode::of(c, notes)).collect(),
        }
    }

    /// This node and those below it, parents first.
    pub fn pre_order(&self) -> Vec<&GraphNode> {
        let mut nodes = vec![self];
        nodes.extend(self.children.iter().flat_map(GraphNode::pre_order));
        nodes
    }

    /// A figure it measured, by name.
    pub fn figure(&self, name: &str) -> Option<u64> {
        self.metrics.iter().find(|f| f.name == name).map(|f| f.value)
    }
}

//! Spark 4.x's EXPLAIN text for our physical plans: simple, EXTENDED, FORMATTED, COST and
//! CODEGEN, with Spark's operator names, expression ids, codegen stages and the
//! `AdaptiveSparkPlan` wrapper an unexecuted adaptive query prints.
//!
//! The plan is first seen as Spark's ([`plan`]). An adaptive plan that has not run shows the
//! plan as planned: the preparation rules that run per query stage (columnar transitions,
//! codegen stages) have not run yet. One that has run shows its final plan with them, built
//! query stage by query stage, and the plan it started from. Other plans get `ColumnarToRow`
//! and their codegen stages as Spark's `QueryExecution.preparations` would add them.

mod advice;
pub mod analyze;
mod bucketing;
mod codegen;
mod codegen_ids;
mod cost;
mod expressions;
pub mod graph;
mod mode;
mod plan;
mod tree;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::table::TableMeta;
use crate::config::SparkConf;

use expressions::{join, spark_type};
pub use mode::ExplainMode;
use plan::{Codegen, Converter, Node, Position, Role};

/// What the rendering depends on besides the physical plan.
#[derive(Debug, Clone, Default)]
pub struct ExplainContext {
    /// The session's settings: `spark.sql.sources.v2.bucketing.enabled`, which users often
    /// expect to affect bucketed tables, and those the advice weighs.
    pub conf: SparkConf,
    /// The logical plans EXTENDED and COST print.
    pub logical: Option<LogicalStages>,
}

/// The logical plan after each of the stages Spark's EXTENDED prints, under Spark's section
/// names but in DataFusion's plan text (`LogicalPlan::display_indent`): the stages are
/// DataFusion's, and Spark's tree syntax would have to be invented for plans Spark never made.
#[derive(Debug, Clone, Default)]
pub struct LogicalStages {
    /// As DataFusion's SQL planner built it, names resolved but types not yet coerced
    /// (Spark's "Parsed Logical Plan").
    pub parsed: String,
    /// After DataFusion's analyzer rules: implicit casts added, wildcards and subqueries
    /// expanded (Spark's "Analyzed Logical Plan").
    pub analyzed: String,
    /// After DataFusion's optimizer, the plan the physical plan is made from: filters and
    /// projections pushed into the scans, expressions simplified (EXTENDED and COST).
    pub optimized: String,
}

/// The text of `EXPLAIN [mode]` for `plan`. `Analyze` prints the simple plan: running the
/// query and reporting its metrics is up to the caller.
pub fn render(plan: &Arc<dyn ExecutionPlan>, mode: ExplainMode, ctx: &ExplainContext) -> String {
    let root = spark_plan(plan);
    let physical = tree::simple(&root);
    match mode {
        ExplainMode::Simple | ExplainMode::Analyze => format!("== Physical Plan ==\n{physical}\n"),
        ExplainMode::Formatted => formatted(plan, &root, ctx),
        ExplainMode::Extended => {
            let Some(logical) = &ctx.logical else {
                return format!("== Physical Plan ==\n{physical}");
            };
            // Spark writes the analyzed plan's output columns under its header.
            let schema = plan.schema();
            let columns =
                join(schema.fields().iter().map(|f| format!("{}: {}", f.name(), spark_type(f.data_type()))), ", ");
            let columns = if columns.is_empty() { columns } else { columns + "\n" };
            format!(
                "== Parsed Logical Plan ==\n{}\n\n== Analyzed Logical Plan ==\n{columns}{}\n\n\
                 == Optimized Logical Plan ==\n{}\n\n== Physical Plan ==\n{physical}",
                logical.parsed.trim_end(),
                logical.analyzed.trim_end(),
                logical.optimized.trim_end()
            )
        }
        ExplainMode::Cost => match &ctx.logical {
            Some(logical) => format!(
                "== Optimized Logical Plan ==\n{}\n\n== Physical Plan ==\n{}",
                cost::annotate(&logical.optimized, plan),
                physical.trim_end()
            ),
            None => format!("== Physical Plan ==\n{}", physical.trim_end()),
        },
        ExplainMode::Codegen => codegen::codegen(&root),
    }
}

/// EXPLAIN FORMATTED of `plan`, whose Spark view is `root`: the outline and detail blocks, then
/// the bucketing notes and the advice.
fn formatted(plan: &Arc<dyn ExecutionPlan>, root: &Node, ctx: &ExplainContext) -> String {
    let mut text = format!("== Physical Plan ==\n{}\n", tree::formatted(root));
    text.extend(bucketing::section(root, ctx.conf.v2_bucketing_enabled));
    text.extend(advice::section(plan, root, &ctx.conf));
    text
}

/// Spark's own EXPLAIN FORMATTED `text` of a statement that runs on Spark and reads `tables`,
/// followed by the bucketing section and the advice computed from that plan as from ours;
/// Spark's text alone where it is not a plan this reads.
pub fn spark_formatted(text: &str, tables: &[TableMeta], conf: &SparkConf) -> String {
    match plan::parse_formatted(text, tables) {
        Some(root) => spark_formatted_sections(text, &root, tables, conf),
        None => text.to_string(),
    }
}

/// `text`, Spark's plan `root`, with its sections.
fn spark_formatted_sections(text: &str, root: &Node, tables: &[TableMeta], conf: &SparkConf) -> String {
    let mut text = format!("{}\n", text.trim_end());
    text.extend(bucketing::section(root, conf.v2_bucketing_enabled));
    text.extend(advice::spark_section(root, tables, conf));
    text
}

/// The plan as Spark prints it, operator ids assigned.
fn spark_plan(plan: &Arc<dyn ExecutionPlan>) -> Node {
    let mut root = Converter::default().convert(plan, Position { root: true, join_child: false });
    match (&root.role, root.children.as_mut_slice()) {
        (Role::AdaptiveRoot { is_final: false }, _) => {}
        (Role::AdaptiveRoot { is_final: true }, [final_plan, _initial]) => {
            *final_plan = columnar_to_row(std::mem::replace(final_plan, Node::new("", "", Vec::new(), Vec::new())));
            codegen::collapse_query_stages(final_plan);
        }
        _ => {
            root = columnar_to_row(root);
            codegen::collapse_stages(&mut root);
        }
    }
    tree::number(&mut root, &mut 0);
    tree::name_reused(&mut root);
    root
}

/// Spark's `ApplyColumnarRulesAndInsertTransitions`: the Parquet scan produces column
/// batches, as does a union of columnar children (`UnionExec.supportsColumnar`, which then
/// generates no code); the operators above consume rows.
fn columnar_to_row(mut node: Node) -> Node {
    if is_columnar(&node) {
        if node.name == "Union" {
            node.codegen = Codegen::No;
        }
        return node.columnar_to_row();
    }
    node.children = std::mem::take(&mut node.children).into_iter().map(columnar_to_row).collect();
    node
}

fn is_columnar(node: &Node) -> bool {
    matches!(node.role, Role::Scan { .. })
        || node.name == "Union" && !node.children.is_empty() && node.children.iter().all(is_columnar)
}

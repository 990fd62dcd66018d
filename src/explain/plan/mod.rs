//! Our physical plan as Spark would print it: the tree of Spark operators EXPLAIN is rendered
//! from, with Spark's names and arguments, attributes with expression ids, each operator's
//! part in whole-stage codegen and what the AQE wrapper and the bucketing section need to
//! know. [`convert`] builds it from a DataFusion plan.

mod convert;
mod parse;

use super::analyze::Figure;
use super::expressions::{Attr, list};
use crate::exec::file_source_scan::BucketedStatus;
pub(super) use convert::{Converter, Position, address};
pub(super) use parse::{column_name, detail, list_items, parse_formatted, scanned_table};

/// How an operator takes part in whole-stage code generation (`CollapseCodegenStages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codegen {
    No,
    Yes,
    /// Generates code inside a stage but never starts one (`LocalTableScan`).
    NotRoot,
    /// Generates code, but each child is its own stage (sort-merge and shuffled hash joins).
    Isolating,
}

/// What the AQE wrapper and the bucketing section need to know about an operator.
#[derive(Debug, Clone)]
pub(super) enum Role {
    Scan {
        status: BucketedStatus,
        bucket_columns: Vec<String>,
        /// The table's catalog size the planner used, where it is not its files' size:
        /// (declared bytes, bytes of the files read).
        declared_size: Option<(u64, u64)>,
    },
    Shuffle {
        partitioning: String,
        partitions: usize,
        reason: Option<String>,
    },
    Broadcast,
    /// Requires a child distribution other than Spark's `UnspecifiedDistribution`.
    NeedsDistribution,
    /// `AdaptiveSparkPlan`; once run, its children are the final and the initial plan.
    AdaptiveRoot {
        is_final: bool,
    },
    /// A query stage of an adaptive plan that has run (`ResultQueryStage` too): a whole-stage
    /// codegen boundary, its stages built when the query stage was.
    QueryStage {
        id: usize,
    },
    /// `AQEShuffleRead`: how a stage's partitions were read, in `partitions` tasks.
    ShuffleRead {
        kind: String,
        partitions: usize,
    },
    /// An operator of the logical plan an `EmptyRelation` eliminated: no id (`(unknown)`), no
    /// detail block.
    Logical,
    Other,
}

/// The whole-stage codegen stage an operator belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    None,
    /// Collected into the stage being built, whose id is taken once its children are done.
    Pending,
    Id(u32),
}

#[derive(Debug, Clone)]
pub(super) struct Node {
    /// Spark's `nodeName`, the header of the detail block.
    pub name: String,
    /// The node in the FORMATTED outline (joins add their type and build side).
    pub outline: String,
    /// The node in simple EXPLAIN.
    pub simple: String,
    /// The lines of the FORMATTED detail block after its header.
    pub details: Vec<String>,
    pub output: Vec<Attr>,
    pub children: Vec<Node>,
    pub codegen: Codegen,
    pub role: Role,
    /// After the operator id in the FORMATTED outline (a stage's statistics, a read's kind).
    pub annotation: String,
    /// Operator id of EXPLAIN FORMATTED, assigned once the tree is final.
    pub id: usize,
    pub stage: Stage,
    /// The table scan this node is, by address: a scan shown in both the final and the
    /// initial plan of an adaptive query is one operator with one id.
    pub origin: Option<usize>,
    /// Shown already, under the same id (its details are not repeated).
    pub repeated: bool,
    /// The exchange this node is, by address, for a `ReusedExchange` to name.
    pub exchange: Option<usize>,
    /// For a `ReusedExchange`: the exchange it reads, by address.
    pub reuses: Option<usize>,
    /// What the operator measured, once it has run (or so far, while it runs).
    pub metrics: Vec<Figure>,
}

impl Node {
    pub fn new(name: impl Into<String>, simple: impl Into<String>, output: Vec<Attr>, children: Vec<Node>) -> Node {
        let name = name.into();
        Node {
            outline: name.clone(),
            name,
            simple: simple.into(),
            details: Vec::new(),
            output,
            children,
            codegen: Codegen::No,
            role: Role::Other,
            annotation: String::new(),
            id: 0,
            stage: Stage::None,
            origin: None,
            repeated: false,
            exchange: None,
            reuses: None,
            metrics: Vec::new(),
        }
    }

    fn details(mut self, details: Vec<String>) -> Node {
        self.details = details;
        self
    }

    fn codegen(mut self, codegen: Codegen) -> Node {
        self.codegen = codegen;
        self
    }

    fn role(mut self, role: Role) -> Node {
        self.role = role;
        self
    }

    /// Spark's `ColumnarToRow`, which turns the Parquet reader's column batches into rows.
    pub fn columnar_to_row(self) -> Node {
        let details = vec![field("Input", &self.output)];
        Node::new("ColumnarToRow", "ColumnarToRow", self.output.clone(), vec![self])
            .details(details)
            .codegen(Codegen::Yes)
    }

    /// Spark's root of an adaptive plan that has not run yet.
    pub fn adaptive(self) -> Node {
        let output = field("Output", &self.output);
        Node::new("AdaptiveSparkPlan", "AdaptiveSparkPlan isFinalPlan=false", self.output.clone(), vec![self])
            .details(vec![output, "Arguments: isFinalPlan=false".into()])
            .role(Role::AdaptiveRoot { is_final: false })
    }

    /// Spark's root of an adaptive plan that has run: the final plan (a `ResultQueryStage`)
    /// and the plan it started from.
    pub fn adaptive_final(final_plan: Node, initial: Node) -> Node {
        let output = final_plan.output.clone();
        let details = vec![field("Output", &output), "Arguments: isFinalPlan=true".into()];
        Node::new("AdaptiveSparkPlan", "AdaptiveSparkPlan isFinalPlan=true", output, vec![final_plan, initial])
            .details(details)
            .role(Role::AdaptiveRoot { is_final: true })
    }

    /// A query stage of an adaptive plan that has run, with what its run produced.
    pub fn query_stage(name: &str, id: usize, child: Node, statistics: Option<String>) -> Node {
        let output = child.output.clone();
        let details = vec![field("Output", &output), format!("Arguments: {id}")];
        let annotation = statistics.map_or_else(String::new, |s| format!(", {s}"));
        let mut node = Node::new(name, format!("{name} {id}{annotation}"), output, vec![child])
            .details(details)
            .role(Role::QueryStage { id });
        node.annotation = annotation;
        node
    }
}

/// Spark's `ExplainUtils.generateFieldString` for a list.
pub(super) fn field(name: &str, values: &[impl ToString]) -> String {
    match values.len() {
        0 => format!("{name}: []"),
        n => format!("{name} [{n}]: {}", list(values.iter().map(|v| v.to_string()))),
    }
}

/// A unary operator whose detail block is Spark's default: `Input` and `Arguments`.
fn unary(name: &str, arguments: String, child: Node, codegen: Codegen) -> Node {
    let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
    let output = child.output.clone();
    Node::new(name, format!("{name} {arguments}"), output, vec![child]).details(details).codegen(codegen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        assert_eq!(field("Keys", &[] as &[&str]), "Keys: []");
        assert_eq!(field("Keys", &["a", "b"]), "Keys [2]: [a, b]");
    }
}

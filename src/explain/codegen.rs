//! Spark's `CollapseCodegenStages`: which operators are fused into one whole-stage codegen
//! stage, and the stage ids (`*(n)`, `[codegen id : n]`).
//!
//! A stage starts at an operator that generates code and takes in every descendant that
//! does too, stopping at the others (exchanges, scans), which start their own stages below.
//! The children of sort-merge and shuffled hash joins always are stages of their own. A
//! stage's id is taken after its children's stages are built, so ids grow bottom-up, left
//! subtree first.

use std::collections::HashMap;

use super::plan::{Codegen, Node, Role, Stage};
use super::tree::simple;

pub(super) fn collapse_stages(root: &mut Node) {
    insert_stage(root, &mut Counter::default());
}

/// Stage ids taken so far, and how many each exchange's subtree took: Spark collapses stages
/// before it reuses exchanges, so a `ReusedExchange` leaves a gap of its exchange's stages.
#[derive(Default)]
struct Counter {
    taken: u32,
    by_exchange: HashMap<usize, u32>,
}

/// The final plan of an adaptive query: each query stage's codegen stages were built when it
/// was planned, so in the order of the query stages' ids, the result stage last.
pub(super) fn collapse_query_stages(root: &mut Node) {
    let mut ids = Vec::new();
    query_stage_ids(root, &mut ids);
    ids.sort_unstable();
    let mut counter = Counter::default();
    for id in ids {
        if let Some(stage) = query_stage(root, id) {
            stage.children.iter_mut().for_each(|c| insert_stage(c, &mut counter));
        }
    }
}

fn query_stage_ids(node: &Node, ids: &mut Vec<usize>) {
    if let Role::QueryStage { id } = node.role {
        ids.push(id);
    }
    node.children.iter().for_each(|c| query_stage_ids(c, ids));
}

fn query_stage(node: &mut Node, id: usize) -> Option<&mut Node> {
    if matches!(node.role, Role::QueryStage { id: found } if found == id) {
        return Some(node);
    }
    node.children.iter_mut().find_map(|c| query_stage(c, id))
}

fn insert_stage(node: &mut Node, counter: &mut Counter) {
    // A query stage's codegen stages are its own.
    if matches!(node.role, Role::QueryStage { .. }) {
        return;
    }
    if let Some(taken) = node.reuses.and_then(|exchange| counter.by_exchange.get(&exchange)) {
        counter.taken += taken;
        return;
    }
    let before = counter.taken;
    if matches!(node.codegen, Codegen::Yes | Codegen::Isolating) {
        collect(node, counter);
        counter.taken += 1;
        assign(node, counter.taken);
    } else {
        node.children.iter_mut().for_each(|c| insert_stage(c, counter));
    }
    if let Some(exchange) = node.exchange {
        counter.by_exchange.insert(exchange, counter.taken - before);
    }
}

/// Marks `node` and the descendants that join its stage as pending; builds the stages below.
fn collect(node: &mut Node, counter: &mut Counter) {
    match node.codegen {
        Codegen::No => insert_stage(node, counter),
        Codegen::Isolating => {
            node.stage = Stage::Pending;
            node.children.iter_mut().for_each(|c| insert_stage(c, counter));
        }
        Codegen::Yes | Codegen::NotRoot => {
            node.stage = Stage::Pending;
            node.children.iter_mut().for_each(|c| collect(c, counter));
        }
    }
}

fn assign(node: &mut Node, id: u32) {
    if node.stage == Stage::Pending {
        node.stage = Stage::Id(id);
        node.children.iter_mut().for_each(|c| assign(c, id));
    }
}

/// EXPLAIN CODEGEN: each stage as a subtree in stage id order. The operators run on
/// DataFusion, so there is no generated Java source to show.
pub(super) fn codegen(root: &Node) -> String {
    let mut roots = Vec::new();
    stage_roots(root, Stage::None, &mut roots);
    roots.sort_by_key(|(id, _)| *id);
    let mut out = format!("Found {} WholeStageCodegen subtrees.\n", roots.len());
    for (i, (_, node)) in roots.iter().enumerate() {
        out += &format!("== Subtree {} / {} ==\n{}\nGenerated code:\n{NO_SOURCE}\n", i + 1, roots.len(), simple(node));
    }
    out
}

const NO_SOURCE: &str = "None: bucketsql runs the operators of this stage on DataFusion and generates no Java source.";

fn stage_roots<'a>(node: &'a Node, parent: Stage, roots: &mut Vec<(u32, &'a Node)>) {
    if let Stage::Id(id) = node.stage
        && node.stage != parent
    {
        roots.push((id, node));
    }
    node.children.iter().for_each(|c| stage_roots(c, node.stage, roots));
}

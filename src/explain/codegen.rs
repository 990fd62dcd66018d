//! Spark's `CollapseCodegenStages`: which operators are fused into one whole-stage codegen
//! stage, and the stage ids (`*(n)`, `[codegen id : n]`).
//!
//! A stage starts at an operator that generates code and takes in every descendant that
//! does too, stopping at the others (exchanges, scans), which start their own stages below.
//! The children of sort-merge and shuffled hash joins always are stages of their own. A
//! stage's id is taken after its children's stages are built, so ids grow bottom-up, left
//! subtree first.

use super::plan::{Codegen, Node, Stage};

pub(super) fn collapse_stages(root: &mut Node) {
    let mut counter = 0;
    insert_stage(root, &mut counter);
}

fn insert_stage(node: &mut Node, counter: &mut u32) {
    if matches!(node.codegen, Codegen::Yes | Codegen::Isolating) {
        collect(node, counter);
        *counter += 1;
        assign(node, *counter);
    } else {
        node.children.iter_mut().for_each(|c| insert_stage(c, counter));
    }
}

/// Marks `node` and the descendants that join its stage as pending; builds the stages below.
fn collect(node: &mut Node, counter: &mut u32) {
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

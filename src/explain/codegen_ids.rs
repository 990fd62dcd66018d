//! Spark's `ExplainUtils.generateWholeStageCodegenIds`: which operators FORMATTED labels with
//! their codegen stage id. Apart from the stages (`codegen`), which draw EXPLAIN CODEGEN's
//! subtrees in the simple layout, because FORMATTED's layout (`tree`) needs these labels.

use std::collections::HashSet;

use super::plan::{Node, Stage};

/// The operators whose codegen stage FORMATTED names (`[codegen id : n]`), by operator id, as
/// Spark's `ExplainUtils.generateWholeStageCodegenIds` finds them: walking the plan in pre-order,
/// a stage's root sets the current id and each operator outside a stage under an operator in
/// one (an `InputAdapter` in Spark's plan) clears it, without restoring it for the siblings
/// that follow. So in a stage with two inputs (a union fused into one stage, a broadcast join
/// built on the left) the operators of the later inputs print no id.
pub(super) fn labelled_operators(root: &Node) -> HashSet<usize> {
    fn walk(node: &Node, parent: Stage, current: &mut Option<u32>, out: &mut HashSet<usize>) {
        if node.stage != parent {
            if matches!(parent, Stage::Id(_)) {
                *current = None;
            }
            if let Stage::Id(id) = node.stage {
                *current = Some(id);
            }
        }
        if matches!(node.stage, Stage::Id(_)) && current.is_some() {
            out.insert(node.id);
        }
        node.children.iter().for_each(|c| walk(c, node.stage, current, out));
    }
    let mut out = HashSet::new();
    walk(root, Stage::None, &mut None, &mut out);
    out
}

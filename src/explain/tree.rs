//! The two physical plan layouts: simple (one line per operator) and FORMATTED (an outline
//! with operator ids, then one detail block per operator).

use super::plan::{Node, Stage};

/// Gives operators Spark's FORMATTED ids: post-order, children left to right.
pub(super) fn number(node: &mut Node, next: &mut usize) {
    node.children.iter_mut().for_each(|c| number(c, next));
    *next += 1;
    node.id = *next;
}

/// Every node, in operator id order.
pub(super) fn post_order(node: &Node) -> Vec<&Node> {
    let mut nodes: Vec<&Node> = node.children.iter().flat_map(post_order).collect();
    nodes.push(node);
    nodes
}

/// Spark's `TreeNode.generateTreeString` connectors (`:- `, `+- `, `:  `), one line per node.
pub(super) fn draw(root: &Node, line: &dyn Fn(&Node) -> String) -> String {
    fn walk(node: &Node, line: &dyn Fn(&Node) -> String, lasts: &mut Vec<bool>, out: &mut String) {
        if let Some((last, ancestors)) = lasts.split_last() {
            ancestors.iter().for_each(|a| out.push_str(if *a { "   " } else { ":  " }));
            out.push_str(if *last { "+- " } else { ":- " });
        }
        out.push_str(&line(node));
        out.push('\n');
        for (i, child) in node.children.iter().enumerate() {
            lasts.push(i + 1 == node.children.len());
            walk(child, line, lasts, out);
            lasts.pop();
        }
    }
    let mut out = String::new();
    walk(root, line, &mut Vec::new(), &mut out);
    out
}

/// The simple layout: `*(n) ` before operators in codegen stage `n`.
pub(super) fn simple(root: &Node) -> String {
    draw(root, &|node| match node.stage {
        Stage::Id(id) => format!("*({id}) {}", node.simple),
        _ => node.simple.clone(),
    })
}

/// The FORMATTED layout (`ExplainUtils.processPlan`).
pub(super) fn formatted(root: &Node) -> String {
    let mut out = draw(root, &|node| {
        let star = if matches!(node.stage, Stage::Id(_)) { "* " } else { "" };
        format!("{star}{} ({})", node.outline, node.id)
    });
    out.push('\n');
    for node in post_order(root) {
        let codegen = match node.stage {
            Stage::Id(id) => format!(" [codegen id : {id}]"),
            _ => String::new(),
        };
        out += &format!("\n({}) {}{codegen}\n", node.id, node.name);
        node.details.iter().for_each(|d| out += &format!("{d}\n"));
    }
    out
}

//! The two physical plan layouts: simple (one line per operator) and FORMATTED (an outline
//! with operator ids, then one detail block per operator).

use std::collections::HashMap;

use super::codegen_ids::labelled_operators;
use super::plan::{Node, Role, Stage};

/// Gives operators Spark's FORMATTED ids: post-order, children left to right. An adaptive plan
/// that has run numbers its final plan, then its initial plan, whose scans are the final
/// plan's and keep their ids.
pub(super) fn number(node: &mut Node, next: &mut usize) {
    if let (Role::AdaptiveRoot { is_final: true }, [final_plan, initial]) = (&node.role, node.children.as_mut_slice()) {
        number(final_plan, next);
        let mut scans = HashMap::new();
        collect_origins(final_plan, &mut scans);
        number_reusing(initial, next, &scans);
    } else if matches!(node.role, Role::Logical) {
        return;
    } else {
        node.children.iter_mut().for_each(|c| number(c, next));
    }
    *next += 1;
    node.id = *next;
}

fn collect_origins(node: &Node, ids: &mut HashMap<usize, usize>) {
    if let Some(origin) = node.origin {
        ids.insert(origin, node.id);
    }
    node.children.iter().for_each(|c| collect_origins(c, ids));
}

fn number_reusing(node: &mut Node, next: &mut usize, ids: &HashMap<usize, usize>) {
    node.children.iter_mut().for_each(|c| number_reusing(c, next, ids));
    match node.origin.and_then(|origin| ids.get(&origin)) {
        Some(id) => {
            node.id = *id;
            node.repeated = true;
        }
        None => {
            *next += 1;
            node.id = *next;
        }
    }
}

/// Names the exchange each `ReusedExchange` reads by its operator id, as Spark's header does
/// (`ReusedExchange [Reuses operator id: 4]`).
pub(super) fn name_reused(root: &mut Node) {
    fn ids(node: &Node, out: &mut HashMap<usize, usize>) {
        if let Some(exchange) = node.exchange {
            out.insert(exchange, node.id);
        }
        node.children.iter().for_each(|c| ids(c, out));
    }
    fn rename(node: &mut Node, ids: &HashMap<usize, usize>) {
        if let Some(id) = node.reuses.and_then(|e| ids.get(&e)) {
            node.name = format!("ReusedExchange [Reuses operator id: {id}]");
        }
        node.children.iter_mut().for_each(|c| rename(c, ids));
    }
    let mut exchanges = HashMap::new();
    ids(root, &mut exchanges);
    rename(root, &exchanges);
}

/// Every node, in operator id order.
pub(super) fn post_order(node: &Node) -> Vec<&Node> {
    let mut nodes: Vec<&Node> = node.children.iter().flat_map(post_order).collect();
    nodes.push(node);
    nodes
}

/// Spark's `TreeNode.generateTreeString` connectors (`:- `, `+- `, `:  `), one line per node;
/// an adaptive plan that has run shows its final and its initial plan under headers.
pub(super) fn draw(root: &Node, line: &dyn Fn(&Node) -> String) -> String {
    let (Role::AdaptiveRoot { is_final: true }, [final_plan, initial]) = (&root.role, root.children.as_slice()) else {
        return draw_tree(root, line);
    };
    let mut out = format!("{}\n", line(root));
    for (header, section) in [("Final Plan", final_plan), ("Initial Plan", initial)] {
        out += &format!("+- == {header} ==\n");
        for text in draw_tree(section, line).lines() {
            out += &format!("   {text}\n");
        }
    }
    out
}

fn draw_tree(root: &Node, line: &dyn Fn(&Node) -> String) -> String {
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
        match node.role {
            Role::Logical => format!("{} (unknown)", node.outline),
            _ => format!("{star}{} ({}){}", node.outline, node.id, node.annotation),
        }
    });
    out.push('\n');
    let labelled = labelled_operators(root);
    for node in post_order(root).into_iter().filter(|n| !n.repeated && !matches!(n.role, Role::Logical)) {
        let codegen = match node.stage {
            Stage::Id(id) if labelled.contains(&node.id) => format!(" [codegen id : {id}]"),
            _ => String::new(),
        };
        out += &format!("\n({}) {}{codegen}\n", node.id, node.name);
        node.details.iter().for_each(|d| out += &format!("{d}\n"));
    }
    out
}

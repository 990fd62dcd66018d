//! A plan drawn as an SVG graph, laid out here: operators as boxes with their figures, the
//! scans at the top and the result at the bottom, as Spark's SQL tab draws data flowing down.
//! Shuffle and broadcast exchanges, and the edges out of them, are drawn so they cannot be
//! missed; a bucketed scan says so; each operator's Extended Information notes sit in a box
//! beside it.

use std::fmt::Write;

use super::html::{bytes, count, escape};
use crate::explain::analyze::{Figure, Unit};
use crate::explain::graph::{GraphNode, NodeKind};

const BOX_WIDTH: f64 = 300.0;
const NOTE_WIDTH: f64 = 280.0;
const LINE: f64 = 16.0;
const PAD: f64 = 8.0;
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 44.0;
/// Characters of the 12px monospace font that fit a box's and a note's width.
const BOX_CHARS: usize = 38;
const NOTE_CHARS: usize = 36;

/// `root` as an `<svg>` element; `name` tells the graphs of one page apart.
pub fn render(root: &GraphNode, name: &str) -> String {
    let mut cells = Vec::new();
    let measured = measure(root, &mut cells);
    let depth = cells.iter().map(|c| c.depth).max().unwrap_or(0);
    let mut row_heights = vec![0.0f64; depth + 1];
    for cell in &cells {
        row_heights[cell.depth] = row_heights[cell.depth].max(cell.height);
    }
    // The deepest operators (the scans) at the top, the root at the bottom.
    let mut row_tops = vec![0.0; depth + 1];
    let mut y = PAD;
    for d in (0..=depth).rev() {
        row_tops[d] = y;
        y += row_heights[d] + GAP_Y;
    }
    let height = y - GAP_Y + PAD;
    let width = measured.width + 2.0 * PAD;
    place(&measured, &mut cells, PAD);

    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plan-graph\" data-graph=\"{name}\" width=\"{width:.0}\" \
         height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"ui-monospace, monospace\" \
         font-size=\"12\"><defs>"
    );
    for (kind, color) in [("plain", "#888"), ("shuffle", "#c62828"), ("broadcast", "#ef6c00")] {
        let _ = write!(
            svg,
            "<marker id=\"{name}-arrow-{kind}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"10\" \
             markerHeight=\"10\" markerUnits=\"userSpaceOnUse\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{color}\"/></marker>"
        );
    }
    svg.push_str("</defs>");
    for cell in &cells {
        let Some(parent) = cell.parent else { continue };
        let parent = &cells[parent];
        let (x1, y1) = (cell.x + BOX_WIDTH / 2.0, row_tops[cell.depth] + cell.box_height);
        let (x2, y2) = (parent.x + BOX_WIDTH / 2.0, row_tops[parent.depth]);
        let (class, stroke, dash, thickness) = match cell.node.kind {
            NodeKind::ShuffleExchange => ("shuffle", "#c62828", "8 4", 4),
            NodeKind::BroadcastExchange => ("broadcast", "#ef6c00", "3 3", 4),
            _ => ("plain", "#888", "", 1),
        };
        let middle = (y1 + y2) / 2.0;
        let _ = write!(
            svg,
            "<path class=\"edge {class}\" d=\"M{x1:.1},{y1:.1} C{x1:.1},{middle:.1} {x2:.1},{middle:.1} {x2:.1},{y2:.1}\" \
             fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{thickness}\" stroke-dasharray=\"{dash}\" \
             marker-end=\"url(#{name}-arrow-{class})\"/>"
        );
    }
    for cell in &cells {
        draw_cell(&mut svg, cell, row_tops[cell.depth]);
    }
    svg.push_str("</svg>");
    svg
}

/// One operator's box and notes, before and after they are placed.
struct Cell<'a> {
    node: &'a GraphNode,
    depth: usize,
    parent: Option<usize>,
    lines: Vec<(String, &'static str)>,
    notes: Vec<String>,
    box_height: f64,
    /// Of the box or its notes, whichever is taller.
    height: f64,
    x: f64,
}

/// A subtree's width, and the cells of its root and children.
struct Measured {
    cell: usize,
    width: f64,
    children: Vec<Measured>,
}

fn measure<'a>(node: &'a GraphNode, cells: &mut Vec<Cell<'a>>) -> Measured {
    measure_at(node, 0, None, cells)
}

fn measure_at<'a>(node: &'a GraphNode, depth: usize, parent: Option<usize>, cells: &mut Vec<Cell<'a>>) -> Measured {
    let lines = box_lines(node);
    let notes: Vec<String> = node.notes.iter().flat_map(|n| wrap(n, NOTE_CHARS)).collect();
    let box_height = lines.len() as f64 * LINE + 2.0 * PAD;
    let note_height = if notes.is_empty() { 0.0 } else { notes.len() as f64 * LINE + 2.0 * PAD };
    let cell_width = if notes.is_empty() { BOX_WIDTH } else { BOX_WIDTH + GAP_X + NOTE_WIDTH };
    let index = cells.len();
    cells.push(Cell { node, depth, parent, lines, notes, box_height, height: box_height.max(note_height), x: 0.0 });
    let children: Vec<Measured> =
        node.children.iter().map(|child| measure_at(child, depth + 1, Some(index), cells)).collect();
    let below = children.iter().map(|c| c.width).sum::<f64>() + GAP_X * children.len().saturating_sub(1) as f64;
    Measured { cell: index, width: cell_width.max(below), children }
}

/// Centers each cell over its subtree, children left to right.
fn place(measured: &Measured, cells: &mut [Cell], left: f64) {
    let cell = &mut cells[measured.cell];
    let cell_width = if cell.notes.is_empty() { BOX_WIDTH } else { BOX_WIDTH + GAP_X + NOTE_WIDTH };
    cell.x = left + (measured.width - cell_width) / 2.0;
    let below = measured.children.iter().map(|c| c.width).sum::<f64>()
        + GAP_X * measured.children.len().saturating_sub(1) as f64;
    let mut x = left + (measured.width - below) / 2.0;
    for child in &measured.children {
        place(child, cells, x);
        x += child.width + GAP_X;
    }
}

fn box_lines(node: &GraphNode) -> Vec<(String, &'static str)> {
    let mut lines: Vec<(String, &'static str)> =
        wrap(&format!("({}) {}", node.id, node.name), BOX_CHARS).into_iter().map(|l| (l, "name")).collect();
    let badge = match node.kind {
        NodeKind::ShuffleExchange => Some("SHUFFLE: rows move between partitions"),
        NodeKind::BroadcastExchange => Some("BROADCAST: every task gets all rows"),
        NodeKind::BucketedScan => Some("bucketed scan: reads by bucket"),
        NodeKind::Scan => Some("scan (not bucketed)"),
        _ => None,
    };
    lines.extend(badge.map(|b| (b.to_string(), "badge")));
    // How an exchange moves rows: `hashpartitioning(k#1L, 8)`, `SinglePartition`.
    if let (NodeKind::ShuffleExchange | NodeKind::BroadcastExchange, Some(how)) =
        (node.kind, node.summary.split_once(' ').map(|(_, how)| how))
    {
        lines.extend(wrap(how, BOX_CHARS).into_iter().map(|l| (l, "partitioning")));
    }
    if let Some(stage) = node.codegen_stage {
        lines.push((format!("codegen stage {stage}"), "stage"));
    }
    // No spill is the rule; only a spill is worth a line.
    let spilled = |f: &&Figure| matches!(f.name.as_str(), "spills" | "spilled bytes") && f.value == 0;
    for figure in node.metrics.iter().filter(|f| !spilled(f)) {
        lines.extend(wrap(&figure_text(figure), BOX_CHARS).into_iter().map(|l| (l, "metric")));
    }
    lines
}

fn figure_text(figure: &Figure) -> String {
    let value = match figure.unit {
        Unit::Count => count(figure.value),
        Unit::Bytes => bytes(figure.value),
        Unit::Nanos => format!("{:.1} ms", figure.value as f64 / 1e6),
    };
    match &figure.detail {
        Some(detail) => format!("{}: {value} {detail}", figure.name),
        None => format!("{}: {value}", figure.name),
    }
}

fn draw_cell(svg: &mut String, cell: &Cell, top: f64) {
    let node = cell.node;
    let (fill, stroke, thickness, dash) = match node.kind {
        NodeKind::ShuffleExchange => ("#ffebee", "#c62828", 4, ""),
        NodeKind::BroadcastExchange => ("#fff3e0", "#ef6c00", 4, ""),
        NodeKind::BucketedScan => ("#e8f5e9", "#2e7d32", 3, ""),
        NodeKind::Scan => ("#e3f2fd", "#1565c0", 1, ""),
        NodeKind::QueryStage => ("#fafafa", "#555", 2, "6 3"),
        NodeKind::ShuffleRead => ("#f3e5f5", "#6a1b9a", 2, ""),
        NodeKind::Operator => ("#f7f7f7", "#777", 1, ""),
    };
    let kind = serde_json::to_value(node.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let rows = node.figure("output rows").map_or_else(String::new, |r| format!(" data-output-rows=\"{r}\""));
    let _ = write!(
        svg,
        "<g class=\"node {kind}\" data-kind=\"{kind}\" data-id=\"{}\" data-name=\"{}\"{rows}><title>{}</title>\
         <rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{BOX_WIDTH}\" height=\"{:.1}\" rx=\"4\" fill=\"{fill}\" \
         stroke=\"{stroke}\" stroke-width=\"{thickness}\" stroke-dasharray=\"{dash}\"/>",
        node.id,
        escape(&node.name),
        escape(&node.summary),
        cell.x,
        cell.box_height
    );
    for (i, (line, class)) in cell.lines.iter().enumerate() {
        let weight = match *class {
            "name" | "badge" => " font-weight=\"bold\"",
            _ => "",
        };
        let color = match (*class, node.kind) {
            ("badge", NodeKind::ShuffleExchange) => "#c62828",
            ("badge", NodeKind::BroadcastExchange) => "#ef6c00",
            ("badge", NodeKind::BucketedScan) => "#2e7d32",
            ("stage", _) => "#777",
            _ => "#222",
        };
        let _ = write!(
            svg,
            "<text class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\"{weight} fill=\"{color}\">{}</text>",
            cell.x + PAD,
            top + PAD + LINE * (i as f64 + 0.8),
            escape(line)
        );
    }
    svg.push_str("</g>");
    if cell.notes.is_empty() {
        return;
    }
    let note_x = cell.x + BOX_WIDTH + GAP_X;
    let note_height = cell.notes.len() as f64 * LINE + 2.0 * PAD;
    let _ = write!(
        svg,
        "<g class=\"note\" data-for=\"{}\"><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{note_x:.1}\" y2=\"{:.1}\" \
         stroke=\"#999\" stroke-dasharray=\"2 2\"/><rect x=\"{note_x:.1}\" y=\"{top:.1}\" width=\"{NOTE_WIDTH}\" \
         height=\"{note_height:.1}\" fill=\"#fffde7\" stroke=\"#bba\"/>",
        node.id,
        cell.x + BOX_WIDTH,
        top + LINE,
        top + LINE
    );
    for (i, line) in cell.notes.iter().enumerate() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#444\">{}</text>",
            note_x + PAD,
            top + PAD + LINE * (i as f64 + 0.8),
            escape(line)
        );
    }
    svg.push_str("</g>");
}

/// `text` in lines of at most `width` characters, broken at spaces where it can be.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while !word.is_empty() {
            let used = line.chars().count();
            let room = if used == 0 { width } else { width.saturating_sub(used + 1) };
            if word.len() <= room {
                if used > 0 {
                    line.push(' ');
                }
                line.extend(word.drain(..));
            } else if used > 0 {
                lines.push(std::mem::take(&mut line));
            } else {
                lines.push(word.drain(..width).collect());
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: usize, kind: NodeKind, children: Vec<GraphNode>) -> GraphNode {
        GraphNode {
            id,
            name: format!("Op{id}"),
            kind,
            summary: String::new(),
            codegen_stage: None,
            metrics: vec![Figure {
                name: "output rows".into(),
                value: id as u64 * 1000,
                unit: Unit::Count,
                detail: None,
            }],
            notes: if kind == NodeKind::ShuffleExchange { vec!["why it shuffles".into()] } else { Vec::new() },
            children,
        }
    }

    #[test]
    fn lines_break_at_spaces_and_split_long_words() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert!(wrap("", 4).is_empty());
    }

    #[test]
    fn scans_sit_above_their_join_and_exchanges_stand_out() {
        let scan = |id| node(id, NodeKind::Scan, Vec::new());
        let left = node(2, NodeKind::ShuffleExchange, vec![scan(1)]);
        let right = node(4, NodeKind::ShuffleExchange, vec![scan(3)]);
        let root = node(5, NodeKind::Operator, vec![left, right]);
        let svg = render(&root, "g");
        assert_eq!(svg.matches("data-kind=\"shuffle_exchange\"").count(), 2);
        assert_eq!(svg.matches("class=\"edge shuffle\"").count(), 2);
        assert_eq!(svg.matches("class=\"edge plain\"").count(), 2);
        assert_eq!(svg.matches("<g class=\"note\"").count(), 2);
        assert!(svg.contains("data-output-rows=\"5000\""));
        // The root's box is below the scans' boxes.
        let top_of = |id: usize| -> f64 {
            let at = svg.find(&format!("data-id=\"{id}\"")).unwrap();
            let rect = &svg[at..];
            let y = rect.split("y=\"").nth(1).unwrap();
            y[..y.find('"').unwrap()].parse().unwrap()
        };
        assert!(top_of(1) < top_of(2) && top_of(2) < top_of(5));
        assert_eq!(top_of(1), top_of(3));
    }
}

//! Spark's own EXPLAIN FORMATTED read back into the plan model, for a statement that runs on
//! Spark: the outline gives the tree and the operator ids, each detail block the operator's
//! lines, and from those lines come the roles the bucketing section, the advice and the web
//! UI's graph need (a scan's `Bucketed:` line, an exchange's partitioning, a join's keys).
//!
//! Spark prints no expression ids' types and no reasons for its exchanges, so a node read here
//! has no output attributes and its exchanges no reason. An adaptive plan that has run, with
//! its `== Final Plan ==` and `== Initial Plan ==`, is not read: Spark Connect's AnalyzePlan
//! explains a plan that has not run.

use std::collections::HashMap;

use super::{Codegen, Node, Role, Stage};
use crate::catalog::table::TableMeta;
use crate::exec::file_source_scan::BucketedStatus;

const PHYSICAL_PLAN: &str = "== Physical Plan ==";
const CODEGEN_LABEL: &str = " [codegen id : ";

/// The plan of Spark's EXPLAIN FORMATTED `text`, its operators numbered as Spark numbered
/// them; `tables` are the tables the statement reads, for their bucket columns. `None` where
/// the text is not a FORMATTED plan this reads.
pub(in crate::explain) fn parse_formatted(text: &str, tables: &[TableMeta]) -> Option<Node> {
    let mut lines = text.lines().skip_while(|l| l.trim_end() != PHYSICAL_PLAN).skip(1);
    let mut outline = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        outline.push(OutlineLine::parse(line)?);
    }
    let blocks = detail_blocks(lines);
    let mut stack: Vec<(usize, Node)> = Vec::new();
    for line in outline.into_iter().rev() {
        // Read bottom up: a node's children are the deeper nodes gathered since it.
        let mut children = Vec::new();
        while stack.last().is_some_and(|(depth, _)| *depth == line.depth + 1) {
            children.push(stack.pop().expect("a child").1);
        }
        if stack.last().is_some_and(|(depth, _)| *depth > line.depth + 1) {
            return None;
        }
        let block = blocks.get(&line.id);
        stack.push((line.depth, node(&line, block, children, tables)));
    }
    match stack.pop() {
        Some((0, mut root)) if stack.is_empty() => {
            inherit_stages(&mut root, Stage::None);
            Some(root)
        }
        _ => None,
    }
}

/// Spark labels only some operators of a stage with its id (`codegen_ids`); the others, starred
/// in the outline, are in their parent's stage.
fn inherit_stages(node: &mut Node, parent: Stage) {
    if node.stage == Stage::Pending {
        node.stage = parent;
    }
    let stage = node.stage;
    node.children.iter_mut().for_each(|c| inherit_stages(c, stage));
}

/// One line of the outline: `:  +- * Filter (3)`.
struct OutlineLine {
    depth: usize,
    starred: bool,
    text: String,
    id: usize,
    annotation: String,
}

impl OutlineLine {
    fn parse(line: &str) -> Option<OutlineLine> {
        let mut rest = line;
        let mut depth = 0;
        while let Some(after) = rest.strip_prefix(":  ").or_else(|| rest.strip_prefix("   ")) {
            rest = after;
            depth += 1;
        }
        if let Some(after) = rest.strip_prefix(":- ").or_else(|| rest.strip_prefix("+- ")) {
            rest = after;
            depth += 1;
        }
        if rest.starts_with("== ") {
            return None;
        }
        let (starred, rest) = match rest.strip_prefix("* ") {
            Some(after) => (true, after),
            None => (false, rest),
        };
        let (text, id, annotation) = split_id(rest)?;
        Some(OutlineLine { depth, starred, text: text.to_string(), id, annotation: annotation.to_string() })
    }
}

/// `Scan parquet t (1), Statistics(..)` as its text, id and what follows the id: the first
/// ` (n)` that ends the line or is followed by a comma.
fn split_id(text: &str) -> Option<(&str, usize, &str)> {
    text.match_indices(" (").find_map(|(at, _)| {
        let after = &text[at + 2..];
        let close = after.find(')')?;
        let id = after[..close].parse().ok()?;
        let annotation = &after[close + 1..];
        (annotation.is_empty() || annotation.starts_with(',')).then_some((&text[..at], id, annotation))
    })
}

/// A detail block: its header's name and codegen stage, and its lines.
struct Block {
    name: String,
    stage: Option<u32>,
    lines: Vec<String>,
}

/// The detail blocks after the outline, by operator id, up to the first section that follows
/// them (Spark's subqueries, our own sections).
fn detail_blocks<'a>(lines: impl Iterator<Item = &'a str>) -> HashMap<usize, Block> {
    let mut blocks = HashMap::new();
    let mut current: Option<(usize, Block)> = None;
    for line in lines {
        if line.starts_with("==") || line.starts_with("Subquery:") {
            break;
        }
        let header = line.strip_prefix('(').and_then(|rest| {
            let (id, name) = rest.split_once(") ")?;
            Some((id.parse::<usize>().ok()?, name))
        });
        match (header, current.as_mut()) {
            (Some((id, name)), _) => {
                let (name, stage) = match name.split_once(CODEGEN_LABEL) {
                    Some((name, label)) => (name, label.trim_end_matches(']').parse().ok()),
                    None => (name, None),
                };
                let block = Block { name: name.to_string(), stage, lines: Vec::new() };
                if let Some((id, done)) = current.replace((id, block)) {
                    blocks.insert(id, done);
                }
            }
            (None, Some((_, block))) if !line.trim().is_empty() => block.lines.push(line.to_string()),
            _ => {}
        }
    }
    if let Some((id, block)) = current {
        blocks.insert(id, block);
    }
    blocks
}

fn node(line: &OutlineLine, block: Option<&Block>, children: Vec<Node>, tables: &[TableMeta]) -> Node {
    let name = block.map_or_else(|| line.text.clone(), |b| b.name.clone());
    let details = block.map(|b| b.lines.clone()).unwrap_or_default();
    let arguments = detail(&details, "Arguments").unwrap_or_default();
    let simple = if arguments.is_empty() { line.text.clone() } else { format!("{} {arguments}", line.text) };
    let mut node = Node::new(name, simple, Vec::new(), children);
    node.outline = line.text.clone();
    node.annotation = line.annotation.clone();
    node.id = line.id;
    node.role = role(&node, &details, tables);
    node.details = details;
    if line.starred {
        node.codegen = Codegen::Yes;
        node.stage = block.and_then(|b| b.stage).map_or(Stage::Pending, Stage::Id);
    }
    node
}

/// The value of a detail line `Name: value` or `Name [n]: value`.
pub(in crate::explain) fn detail<'a>(details: &'a [String], name: &str) -> Option<&'a str> {
    details.iter().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let rest = match rest.strip_prefix(" [") {
            Some(counted) => counted.split_once(']')?.1,
            None => rest,
        };
        Some(rest.strip_prefix(':').or_else(|| rest.strip_prefix(" :"))?.trim())
    })
}

fn role(node: &Node, details: &[String], tables: &[TableMeta]) -> Role {
    let name = node.name.as_str();
    let arguments = detail(details, "Arguments").unwrap_or_default();
    match name {
        "AdaptiveSparkPlan" => Role::AdaptiveRoot { is_final: false },
        "Exchange" => {
            let partitioning = top_level(arguments).first().copied().unwrap_or_default().to_string();
            let partitions = match partitioning.as_str() {
                "SinglePartition" => 1,
                other => other
                    .trim_end_matches(')')
                    .rsplit([',', '('])
                    .next()
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(1),
            };
            Role::Shuffle { partitioning, partitions, reason: None }
        }
        "BroadcastExchange" => Role::Broadcast,
        "SortMergeJoin"
        | "ShuffledHashJoin"
        | "BroadcastHashJoin"
        | "BroadcastNestedLoopJoin"
        | "Window"
        | "GlobalLimit" => Role::NeedsDistribution,
        "Sort" if top_level(arguments).get(1) == Some(&"true") => Role::NeedsDistribution,
        "HashAggregate" | "SortAggregate" | "ObjectHashAggregate"
            if node.children.first().is_some_and(|c| matches!(c.role, Role::Shuffle { .. })) =>
        {
            Role::NeedsDistribution
        }
        _ if name.starts_with("Scan ") => {
            let table = scanned_table(name, tables);
            let status = match detail(details, "Bucketed") {
                Some(bucketed) => [
                    BucketedStatus::Bucketed,
                    BucketedStatus::DisabledByConfiguration,
                    BucketedStatus::DisabledByQueryPlanner,
                    BucketedStatus::BucketColumnsNotRead,
                ]
                .into_iter()
                .find(|s| s.explain() == Some(bucketed))
                .unwrap_or(BucketedStatus::NotBucketedTable),
                None => BucketedStatus::NotBucketedTable,
            };
            let bucket_columns =
                table.and_then(|t| t.bucket_spec.as_ref()).map(|s| s.bucket_columns.clone()).unwrap_or_default();
            Role::Scan { status, bucket_columns, declared_size: None }
        }
        _ => Role::Other,
    }
}

/// The items of a detail line's `[a#1, b#2]` list.
pub(in crate::explain) fn list_items(list: &str) -> Option<Vec<&str>> {
    Some(top_level(list.strip_prefix('[')?.strip_suffix(']')?))
}

/// The comma-separated items of `text` outside parentheses and brackets.
fn top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        items.push(text[start..].trim());
    }
    items
}

/// The table a Spark scan reads, by the name it prints (`Scan parquet spark_catalog.db.t`).
pub(in crate::explain) fn scanned_table<'a>(scan_name: &str, tables: &'a [TableMeta]) -> Option<&'a TableMeta> {
    let qualified = scan_name.rsplit(' ').next()?;
    let mut parts = qualified.rsplit('.');
    let (name, schema) = (parts.next()?, parts.next()?);
    tables.iter().find(|t| t.name.eq_ignore_ascii_case(name) && t.schema.eq_ignore_ascii_case(schema))
}

/// A column's name in Spark's plan text, without its expression id (`account_id#14L`), and
/// without the normalisation Spark wraps floating-point keys in.
pub(in crate::explain) fn column_name(attribute: &str) -> Option<String> {
    let attribute = attribute
        .strip_prefix("knownfloatingpointnormalized(normalizenanandzero(")
        .and_then(|inner| inner.strip_suffix("))"))
        .unwrap_or(attribute);
    let (name, id) = attribute.split_once('#')?;
    let digits = id.strip_suffix('L').unwrap_or(id);
    (!name.is_empty() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.trim_matches('`').to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::tree;

    /// Spark 4.3's own FORMATTED plans, each with its query's title.
    fn spark_plans(text: &str) -> Vec<(String, String)> {
        let mut plans = Vec::new();
        for case in text.split("\n==================== ").skip(1) {
            let (title, body) = case.split_once('\n').expect("a title");
            if body.contains("\n(1) ") && !body.contains("== Final Plan ==") {
                let plan = &body[body.find(PHYSICAL_PLAN).expect("a plan")..];
                plans.push((title.to_string(), plan.to_string()));
            }
        }
        plans
    }

    fn all_plans() -> Vec<(String, String)> {
        let mut plans = spark_plans(include_str!("../../../tests/data/spark-plans-4.3.0.txt"));
        plans.extend(spark_plans(include_str!("../../../tests/data/spark-plans-aqe-4.3.0.txt")));
        plans
    }

    /// Reading Spark's text and printing it again gives Spark's text: the tree, the ids, the
    /// codegen stages and every detail line were read.
    #[test]
    fn spark_plans_read_back_as_spark_printed_them() {
        let plans = all_plans();
        assert!(plans.len() >= 10, "{} plans", plans.len());
        for (title, text) in plans {
            let root = parse_formatted(&text, &[]).unwrap_or_else(|| panic!("{title}: not read"));
            let expected: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect();
            let printed = format!("{PHYSICAL_PLAN}\n{}", tree::formatted(&root));
            let printed: Vec<&str> = printed.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect();
            assert_eq!(printed, expected[..printed.len().min(expected.len())], "{title}");
        }
    }

    #[test]
    fn roles_come_from_the_detail_lines() {
        let plans = all_plans();
        let (_, text) = plans.iter().find(|(title, _)| title.starts_with("A3 ")).expect("A3");
        let root = parse_formatted(text, &[]).expect("read");
        let nodes = tree::post_order(&root);
        let shuffles: Vec<_> = nodes
            .iter()
            .filter_map(|n| match &n.role {
                Role::Shuffle { partitioning, partitions, .. } => Some((partitioning.as_str(), *partitions)),
                _ => None,
            })
            .collect();
        assert_eq!(
            shuffles,
            [("hashpartitioning(account_id#29L, 200)", 200), ("hashpartitioning(account_id#32L, 200)", 200)]
        );
        assert_eq!(root.name, "SortMergeJoin");
        assert!(matches!(root.role, Role::NeedsDistribution));
        let scans =
            nodes.iter().filter(|n| matches!(n.role, Role::Scan { status: BucketedStatus::NotBucketedTable, .. }));
        assert_eq!(scans.count(), 2);
    }

    #[test]
    fn an_adaptive_plan_not_run_is_its_root() {
        let plans = all_plans();
        let (_, text) = plans.iter().find(|(title, _)| title.starts_with("A1 ")).expect("A1");
        let root = parse_formatted(text, &[]).expect("read");
        assert!(matches!(root.role, Role::AdaptiveRoot { is_final: false }));
        assert_eq!(root.children.len(), 1);
        let scans = tree::post_order(&root)
            .into_iter()
            .filter(|n| matches!(n.role, Role::Scan { status: BucketedStatus::Bucketed, .. }))
            .count();
        assert_eq!(scans, 2);
    }

    #[test]
    fn outline_lines() {
        let line = OutlineLine::parse(":  +- * Scan parquet spark_catalog.default.t (12)").expect("a line");
        assert_eq!(
            (line.depth, line.starred, line.text.as_str(), line.id),
            (2, true, "Scan parquet spark_catalog.default.t", 12)
        );
        let stage = OutlineLine::parse("+- ShuffleQueryStage (5), Statistics(sizeInBytes=1.0 KiB)").expect("a line");
        assert_eq!(
            (stage.text.as_str(), stage.id, stage.annotation.as_str()),
            ("ShuffleQueryStage", 5, ", Statistics(sizeInBytes=1.0 KiB)")
        );
        assert!(OutlineLine::parse("+- == Final Plan ==").is_none());
        assert!(OutlineLine::parse("not a plan").is_none());
    }

    #[test]
    fn names_and_details() {
        assert_eq!(column_name("account_id#14L").as_deref(), Some("account_id"));
        assert_eq!(column_name("k#3").as_deref(), Some("k"));
        assert_eq!(column_name("(k#3 + 1)"), None);
        assert_eq!(
            column_name("knownfloatingpointnormalized(normalizenanandzero(amount#15))").as_deref(),
            Some("amount")
        );
        let details = vec![
            "Left keys [1]: [account_id#14L]".to_string(),
            "Join type: Inner".to_string(),
            "Condition : isnotnull(k#1)".to_string(),
        ];
        assert_eq!(detail(&details, "Left keys"), Some("[account_id#14L]"));
        assert_eq!(detail(&details, "Join type"), Some("Inner"));
        assert_eq!(detail(&details, "Condition"), Some("isnotnull(k#1)"));
        assert_eq!(parse_formatted("no plan here", &[]).map(|n| n.id), None);
        assert_eq!(
            top_level("[a#1 ASC NULLS FIRST, b#2 ASC NULLS FIRST], true, 0"),
            ["[a#1 ASC NULLS FIRST, b#2 ASC NULLS FIRST]", "true", "0"]
        );
        assert_eq!(top_level(""), [] as [&str; 0]);
    }
}

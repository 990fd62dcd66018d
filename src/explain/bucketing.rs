//! `== Extended Information (Bucketing) ==`: after EXPLAIN FORMATTED, in the form of
//! Spark's extended explain providers, why each remaining exchange moves rows and why a
//! scan of a bucketed table does not read by bucket.

use super::expressions::join;
use super::plan::{Node, Role};
use super::tree::post_order;
use crate::exec::file_source_scan::BucketedStatus;

pub(super) fn section(root: &Node, v2_bucketing_enabled: bool) -> Option<String> {
    let mut lines: Vec<String> = post_order(root)
        .into_iter()
        .filter(|node| matches!(node.role, Role::Shuffle { .. } | Role::Scan { .. }))
        .filter_map(|node| line(node, &ancestors(root, node)))
        .collect();
    if v2_bucketing_enabled {
        lines.push(
            "spark.sql.sources.v2.bucketing.enabled applies to DataSource V2 sources only (storage-partitioned \
             joins); it does not change how CLUSTERED BY tables are read."
                .into(),
        );
    }
    (!lines.is_empty()).then(|| format!("\n== Extended Information (Bucketing) ==\n{}\n", lines.join("\n")))
}

fn line(node: &Node, ancestors: &[&Node]) -> Option<String> {
    let label = |n: &Node| format!("{} ({})", n.outline, n.id);
    let consumer = ancestors.iter().rev().find(|a| matches!(a.role, Role::NeedsDistribution));
    match &node.role {
        Role::Shuffle { reason: Some(reason), .. } => {
            let stop = if reason.ends_with('.') { "" } else { "." };
            Some(format!("{}: {reason}{stop}", label(node)))
        }
        Role::Shuffle { partitioning, reason: None } => {
            let what = match partitioning.as_str() {
                "SinglePartition" => "gathers its input into a single partition".to_string(),
                hash => format!("shuffles its input by {hash}"),
            };
            let why = consumer.map_or_else(String::new, |c| format!(" for {}", label(c)));
            Some(format!("{} {what}{why}.", label(node)))
        }
        Role::Scan { status, bucket_columns } => {
            let why = match status {
                BucketedStatus::Bucketed | BucketedStatus::NotBucketedTable => return None,
                BucketedStatus::DisabledByConfiguration => {
                    "disabled by configuration (spark.sql.sources.bucketing.enabled=false)".to_string()
                }
                BucketedStatus::DisabledByQueryPlanner => {
                    let mover = ancestors
                        .iter()
                        .rev()
                        .find(|a| matches!(a.role, Role::Shuffle { .. } | Role::Broadcast | Role::NeedsDistribution))
                        .filter(|a| !matches!(a.role, Role::NeedsDistribution));
                    match mover {
                        Some(exchange) => {
                            format!(
                                "disabled by query planner ({} above it redistributes its rows anyway)",
                                label(exchange)
                            )
                        }
                        None => {
                            "disabled by query planner (nothing above it needs the bucket distribution)".to_string()
                        }
                    }
                }
                BucketedStatus::BucketColumnsNotRead => format!(
                    "bucket column(s) not read (the table is bucketed by {}; a bucketed read needs all of them)",
                    join(bucket_columns, ", ")
                ),
            };
            Some(format!("{} is not bucketed: {why}.", label(node)))
        }
        _ => None,
    }
}

/// The nodes from the root down to `target`'s parent.
fn ancestors<'a>(root: &'a Node, target: &Node) -> Vec<&'a Node> {
    fn walk<'a>(node: &'a Node, target: &Node, path: &mut Vec<&'a Node>) -> bool {
        if std::ptr::eq(node, target) {
            return true;
        }
        path.push(node);
        if node.children.iter().any(|c| walk(c, target, path)) {
            return true;
        }
        path.pop();
        false
    }
    let mut path = Vec::new();
    walk(root, target, &mut path);
    path
}

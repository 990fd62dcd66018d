//! `== Extended Information (Bucketing) ==`: after EXPLAIN FORMATTED, in the form of
//! Spark's extended explain providers, why each remaining exchange moves rows and why a
//! scan of a bucketed table does not read by bucket.

use super::cost::bytes_to_string;
use super::expressions::join;
use super::plan::{Node, Role};
use super::tree::post_order;
use crate::exec::file_source_scan::BucketedStatus;

pub(super) fn section(root: &Node, v2_bucketing_enabled: bool) -> Option<String> {
    let lines: Vec<String> = notes(root, v2_bucketing_enabled).into_iter().map(|note| note.text).collect();
    (!lines.is_empty()).then(|| format!("\n== Extended Information (Bucketing) ==\n{}\n", lines.join("\n")))
}

/// One line of the section, with the operator it explains where it explains one.
pub(super) struct Note {
    pub id: Option<usize>,
    pub text: String,
}

/// The section's lines, in order.
pub(super) fn notes(root: &Node, v2_bucketing_enabled: bool) -> Vec<Note> {
    // An adaptive plan that has run: the final plan's exchanges with what adaptive execution
    // did to them, then those of the initial plan it removed.
    let (shown, initial) = match (&root.role, root.children.as_slice()) {
        (Role::AdaptiveRoot { is_final: true }, [final_plan, initial]) => (final_plan, Some(initial)),
        _ => (root, None),
    };
    let about = |node: &Node, text: String| Note { id: Some(node.id), text };
    let mut notes: Vec<Note> = post_order(shown)
        .into_iter()
        .filter(|node| matches!(node.role, Role::Shuffle { .. } | Role::Scan { .. }))
        .filter_map(|node| {
            let ancestors = ancestors(root, node);
            let line = line(node, &ancestors)?;
            Some(about(
                node,
                match initial.and_then(|_| at_run_time(node, &ancestors)) {
                    Some(outcome) => format!("{line} {outcome}"),
                    None => line,
                },
            ))
        })
        .collect();
    if let Some(initial) = initial {
        notes.extend(removed_exchanges(shown, initial, root));
    }
    notes.extend(post_order(shown).into_iter().filter_map(|node| Some(about(node, declared_size(node)?))));
    if v2_bucketing_enabled {
        notes.push(Note {
            id: None,
            text: "spark.sql.sources.v2.bucketing.enabled applies to DataSource V2 sources only (storage-partitioned \
                   joins); it does not change how CLUSTERED BY tables are read."
                .into(),
        });
    }
    notes
}

fn line(node: &Node, ancestors: &[&Node]) -> Option<String> {
    let label = |n: &Node| format!("{} ({})", n.outline, n.id);
    let consumer = ancestors.iter().rev().find(|a| matches!(a.role, Role::NeedsDistribution));
    match &node.role {
        Role::Shuffle { reason: Some(reason), .. } => {
            let stop = if reason.ends_with('.') { "" } else { "." };
            Some(format!("{}: {reason}{stop}", label(node)))
        }
        Role::Shuffle { partitioning, reason: None, .. } => {
            let what = match partitioning.as_str() {
                "SinglePartition" => "gathers its input into a single partition".to_string(),
                hash => format!("shuffles its input by {hash}"),
            };
            let why = consumer.map_or_else(String::new, |c| format!(" for {}", label(c)));
            Some(format!("{} {what}{why}.", label(node)))
        }
        Role::Scan { status, bucket_columns, .. } => {
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

/// A scan planned with its table's catalog size rather than its files' (what-if planning
/// with `ALTER TABLE .. SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = ..)`).
fn declared_size(node: &Node) -> Option<String> {
    let Role::Scan { declared_size: Some((declared, read)), .. } = &node.role else { return None };
    Some(format!(
        "{} ({}) was planned with its table's statistics, spark.sql.statistics.totalSize = {declared} ({}), not the \
         {} its files hold.",
        node.outline,
        node.id,
        bytes_to_string(u128::from(*declared)),
        bytes_to_string(u128::from(*read))
    ))
}

/// What adaptive execution did to an exchange of the final plan, from the stage and read
/// above it.
fn at_run_time(exchange: &Node, ancestors: &[&Node]) -> Option<String> {
    let Role::Shuffle { partitions, .. } = exchange.role else { return None };
    let mut above = ancestors.iter().rev().skip_while(|a| matches!(a.role, Role::QueryStage { .. }));
    let read = above.next().filter(|a| matches!(a.role, Role::ShuffleRead { .. }));
    let Some(Role::ShuffleRead { kind, partitions: read_partitions, .. }) = read.map(|r| &r.role) else {
        return (partitions > 1).then(|| format!("At run time adaptive execution kept its {partitions} partitions."));
    };
    Some(match kind.as_str() {
        "local" if above.next().is_some_and(|a| matches!(a.role, Role::Broadcast)) => {
            "At run time the sort-merge join it fed became a broadcast hash join: its output was read locally and \
             broadcast."
                .to_string()
        }
        "local" => "At run time the join it fed became a broadcast hash join: its output was read locally, no longer \
                    by partition."
            .to_string(),
        "coalesced" => {
            format!("At run time adaptive execution coalesced its {partitions} partitions into {read_partitions}.")
        }
        "skewed" | "coalesced and skewed" => format!(
            "At run time adaptive execution split its skewed partitions: {read_partitions} tasks read its {partitions} \
             partitions{}.",
            if kind.starts_with("coalesced") { ", small ones coalesced" } else { "" }
        ),
        _ => format!(
            "At run time its partitions were read once for each piece of a skewed partition they join ({read_partitions} \
             tasks)."
        ),
    })
}

/// The exchanges of the initial plan that the final plan no longer has: the final plan's
/// exchanges are those of the initial plan, in the same order, less the removed ones.
fn removed_exchanges(final_plan: &Node, initial: &Node, root: &Node) -> Vec<Note> {
    let identity = |node: &Node| match &node.role {
        Role::Shuffle { partitions, reason, .. } => Some((*partitions, reason.clone())),
        _ => None,
    };
    let kept: Vec<_> = post_order(final_plan).into_iter().filter_map(identity).collect();
    let mut kept = kept.iter().peekable();
    let mut removed = Vec::new();
    for node in post_order(initial) {
        let Some(exchange) = identity(node) else { continue };
        if kept.peek() == Some(&&exchange) {
            kept.next();
        } else if let Some(line) = line(node, &ancestors(root, node)) {
            let text = format!("{line} Removed at run time: the join it fed became a broadcast hash join.");
            removed.push(Note { id: Some(node.id), text });
        }
    }
    removed
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

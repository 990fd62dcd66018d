//! The advice's facts from Spark's own plan (its EXPLAIN FORMATTED, read by
//! [`parse_formatted`](crate::explain::plan::parse_formatted)), for a statement that runs on
//! Spark.
//!
//! Spark's text names each scan's table, its `Bucketed:` status and its output, and each
//! join's keys and type. A side's size is estimated as Spark estimates a scan without
//! statistics on its columns (its table's bytes, scaled by the width of the columns read),
//! where the side reads one table through single-input operators; other sides are taken as
//! too large to broadcast.

use datafusion::arrow::datatypes::Schema;
use datafusion::common::JoinType;

use super::{Facts, Scan, ShuffledJoin, Side, advise, table_name};
use crate::catalog::table::TableMeta;
use crate::config::SparkConf;
use crate::exec::file_source_scan::BucketedStatus;
use crate::explain::plan::{Node, Role, column_name, detail, list_items, scanned_table};
use crate::planner::statistics::{DEFAULT_SIZE_IN_BYTES, row_size};
use crate::planner::table_provider::table_schema;

/// The section for Spark's plan `root`, which reads `tables`.
pub(in crate::explain) fn spark_section(root: &Node, tables: &[TableMeta], conf: &SparkConf) -> Option<String> {
    let mut facts = Facts::default();
    visit(root, false, &mut |node, under_exchange| {
        if matches!(node.name.as_str(), "SortMergeJoin" | "ShuffledHashJoin")
            && let [left, right] = node.children.as_slice()
        {
            facts.joins.push(ShuffledJoin {
                join_type: join_type(detail(&node.details, "Join type").unwrap_or_default()),
                left: side(left, detail(&node.details, "Left keys"), tables),
                right: side(right, detail(&node.details, "Right keys"), tables),
            });
        }
        if let Role::Scan { status, .. } = &node.role
            && let Some(table) = scanned_table(&node.name, tables)
        {
            if table.bucket_spec.is_some() {
                facts.tables.insert(table.id, table);
            }
            if !under_exchange && *status == BucketedStatus::DisabledByQueryPlanner {
                facts.unneeded_bucketed_scans.push(format!("Scan parquet {} ({})", table_name(table), node.id));
            }
        }
    });
    advise(&facts, conf)
}

/// Every operator, with whether an exchange lies above it.
fn visit<'a>(node: &'a Node, under_exchange: bool, f: &mut dyn FnMut(&'a Node, bool)) {
    f(node, under_exchange);
    let exchange = matches!(node.role, Role::Shuffle { .. } | Role::Broadcast);
    for child in &node.children {
        visit(child, under_exchange || exchange, f);
    }
}

/// Spark's `JoinType.sql` names.
fn join_type(name: &str) -> JoinType {
    match name {
        "LeftOuter" => JoinType::Left,
        "RightOuter" => JoinType::Right,
        "FullOuter" => JoinType::Full,
        "LeftSemi" => JoinType::LeftSemi,
        "LeftAnti" => JoinType::LeftAnti,
        name if name.starts_with("ExistenceJoin") => JoinType::LeftMark,
        _ => JoinType::Inner,
    }
}

fn side<'a>(node: &Node, keys: Option<&str>, tables: &'a [TableMeta]) -> Side<'a> {
    let keys = keys.and_then(|list| list_items(list)?.into_iter().map(column_name).collect::<Option<Vec<_>>>());
    let chain = single_input_chain(node);
    let exchange = chain.iter().find(|n| matches!(n.role, Role::Shuffle { .. }));
    let scan_node = chain.last().filter(|n| matches!(n.role, Role::Scan { .. }));
    let scan = scan_node.and_then(|n| {
        let Role::Scan { status, .. } = &n.role else { return None };
        let table = scanned_table(&n.name, tables)?;
        let buckets = detail(&n.details, "SelectedBucketsCount")
            .and_then(|count| count.split_once("(Coalesced to ")?.1.trim_end_matches(')').parse().ok())
            .or(table.bucket_spec.as_ref().map(|s| s.num_buckets))
            .unwrap_or(0);
        Some(Scan { table, status: *status, buckets })
    });
    let size = match (&scan, scan_node) {
        (Some(scan), Some(node)) => scan_size(scan.table, node),
        _ => DEFAULT_SIZE_IN_BYTES,
    };
    Side { exchange: exchange.map(|e| format!("Exchange ({})", e.id)), scan, keys, size }
}

/// `node` and the operators it reads through single-input operators, down to a leaf or the
/// first operator with several inputs.
fn single_input_chain(node: &Node) -> Vec<&Node> {
    let mut chain = vec![node];
    let mut at = node;
    while let [only] = at.children.as_slice() {
        chain.push(only);
        at = only;
    }
    chain
}

/// Spark's estimate of a scan without column statistics: the table's bytes (its declared
/// size where it has one) times the width of the columns read over the width of the table's.
fn scan_size(table: &TableMeta, scan: &Node) -> u128 {
    let Ok(schema) = table_schema(table) else { return DEFAULT_SIZE_IN_BYTES };
    let read: Vec<String> = detail(&scan.details, "Output")
        .and_then(list_items)
        .map(|items| items.into_iter().filter_map(column_name).collect())
        .unwrap_or_default();
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .filter(|f| read.contains(&f.name().to_lowercase()))
        .map(|f| f.as_ref().clone())
        .collect();
    let bytes = table.declared_size().unwrap_or_else(|| table.files.iter().map(|f| f.byte_size).sum());
    u128::from(bytes) * row_size(&Schema::new(fields)) / row_size(&schema)
}

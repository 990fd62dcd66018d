//! The advice's facts from our own physical plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;

use super::{Facts, Scan, ShuffledJoin, Side, advise, table_name};
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};
use crate::exec::join::SparkJoinExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::explain::plan::{Node, address};
use crate::explain::tree::post_order;
use crate::planner::scan_lineage::{first_below, scan_below};
use crate::planner::statistics::size_in_bytes;

/// The section for our plan `plan`, whose Spark view is `root`.
pub(in crate::explain) fn section(plan: &Arc<dyn ExecutionPlan>, root: &Node, conf: &SparkConf) -> Option<String> {
    let ids = OperatorIds::of(root);
    let mut facts = Facts::default();
    visit(plan, false, &mut |node, under_exchange| {
        if let Some(join) = node.downcast_ref::<SparkJoinExec>()
            && join.spec().strategy.is_shuffled()
        {
            facts.joins.push(ShuffledJoin {
                join_type: join.spec().join_type,
                left: side(join.left(), &join.left_keys(), &ids),
                right: side(join.right(), &join.right_keys(), &ids),
            });
        }
        if let Some(scan) = node.downcast_ref::<FileSourceScanExec>() {
            if scan.bucket_spec().is_some() {
                facts.tables.insert(scan.table().id, scan.table());
            }
            if !under_exchange && scan.status() == BucketedStatus::DisabledByQueryPlanner {
                let name = format!("Scan parquet {}", table_name(scan.table()));
                facts.unneeded_bucketed_scans.push(ids.label(&name, scan));
            }
        }
    });
    advise(&facts, conf)
}

/// Every operator, with whether an exchange lies above it.
fn visit<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    under_exchange: bool,
    f: &mut dyn FnMut(&'a Arc<dyn ExecutionPlan>, bool),
) {
    f(plan, under_exchange);
    let exchange = plan.is::<ShuffleExchangeExec>() || plan.is::<BroadcastExchangeExec>();
    for child in plan.children() {
        visit(child, under_exchange || exchange, f);
    }
}

fn side<'a>(plan: &'a Arc<dyn ExecutionPlan>, keys: &[Arc<dyn PhysicalExpr>], ids: &OperatorIds) -> Side<'a> {
    let keys = keys.iter().map(|k| k.downcast_ref::<Column>().map(|c| c.name().to_lowercase())).collect();
    let scan = scan_below(plan).map(|scan| Scan {
        table: scan.table(),
        status: scan.status(),
        buckets: scan.coalesced_to().or(scan.bucket_spec().map(|s| s.num_buckets)).unwrap_or(0),
    });
    Side {
        exchange: first_below::<ShuffleExchangeExec>(plan).map(|e| ids.label("Exchange", e)),
        scan,
        keys,
        size: size_in_bytes(plan.as_ref()),
    }
}

/// EXPLAIN FORMATTED's operator ids of exchanges and scans, by the operator's address.
struct OperatorIds(BTreeMap<usize, usize>);

impl OperatorIds {
    /// An operator shown twice (in the final and the initial plan of an adaptive query that
    /// has run) keeps its first id, the final plan's.
    fn of(root: &Node) -> Self {
        let mut ids = BTreeMap::new();
        for node in post_order(root) {
            if let Some(operator) = node.exchange.or(node.origin) {
                ids.entry(operator).or_insert(node.id);
            }
        }
        OperatorIds(ids)
    }

    fn label<T>(&self, name: &str, operator: &T) -> String {
        match self.0.get(&address(operator)) {
            Some(id) => format!("{name} ({id})"),
            None => name.to_string(),
        }
    }
}

//! Ours, not Spark's: a shuffle exchange of a round whose rows are those of an earlier
//! exchange of the round but for null checks that the files rule out runs as a stage that
//! reads the earlier one's output (its twin's), and its own input does not run.
//!
//! Spark adds `isnotnull(c)` for each column a join or comparison needs, so two reads of one
//! table under the same filter differ when only one of them joins on `c`: TPC-H's Q21 shuffles
//! the late lineitems twice, once with `isnotnull(l_suppkey)` and once without, and Q15 computes
//! its revenue view twice the same way. Spark's stage cache (`reuse_exchange`) takes them as
//! different. Where every file the scans read holds no NULL in such a column (it is
//! required, or every row group's statistics count no NULL in it), the checks leave every row
//! in and the two exchanges move the same rows. The plan keeps Spark's text; EXPLAIN
//! ANALYZE shows the stage that read its twin's output.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::TreeNode;
use datafusion::error::Result;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};

use crate::exec::file_source_scan::{FileSourceScanExec, null_checked_column};
use crate::exec::reused_exchange::{Reused, ReusedExchangeExec};
use crate::exec::runtime_filter::RuntimeFilterExec;
use crate::exec::short_circuit::split_conjunction;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::reuse_exchange::volatile;

/// The twin an exchange of the round reads instead of running: the earlier exchange's place
/// in the round and a reader of its output.
pub struct Twin {
    pub index: usize,
    pub reused: Arc<ReusedExchangeExec>,
}

/// For each exchange of the round in `ready` that `reused` leaves to run, its twin, if it has
/// one; every twin runs. An exchange and its twin print alike when the null checks of
/// columns on the scans below them are left out, and no row the scans read holds a NULL in
/// those columns.
pub async fn twins_in_round(
    ready: &[Arc<dyn ExecutionPlan>],
    reused: &[Option<Arc<ReusedExchangeExec>>],
) -> Result<Vec<Option<Twin>>> {
    let mut twins: Vec<Option<Twin>> = ready.iter().map(|_| None).collect();
    let mut firsts: HashMap<String, (usize, Vec<NullCheck>)> = HashMap::new();
    let mut proofs = NullProofs::default();
    for (index, exchange) in ready.iter().enumerate() {
        if reused[index].is_some()
            || read_as_the_same(exchange, reused)
            || !exchange.is::<ShuffleExchangeExec>()
            || volatile(exchange)?
            || runtime_filtered(exchange)?
        {
            continue;
        }
        let (key, checks) = shown_without_null_checks(exchange);
        let Some((first, first_checks)) = firsts.get(&key) else {
            firsts.insert(key, (index, checks));
            continue;
        };
        if checks.is_empty() && first_checks.is_empty() {
            // Printed alike with no check left out: the stage cache's own case.
            continue;
        }
        if proofs.hold(first_checks).await
            && proofs.hold(&checks).await
            && let Some(shuffle) = Reused::of(&ready[*first])
        {
            twins[index] = Some(Twin { index: *first, reused: Arc::new(ReusedExchangeExec::try_new(shuffle)?) });
        }
    }
    Ok(twins)
}

/// Whether another exchange of the round reads `exchange`'s output as the same as it: then
/// `exchange` runs, and reads no twin.
fn read_as_the_same(exchange: &Arc<dyn ExecutionPlan>, reused: &[Option<Arc<ReusedExchangeExec>>]) -> bool {
    reused
        .iter()
        .flatten()
        .filter_map(|reuse| reuse.shuffle())
        .any(|shuffle| std::ptr::addr_eq(Arc::as_ptr(shuffle), Arc::as_ptr(exchange)))
}

/// Whether a runtime filter lies below `exchange`: one that gathers keys for another join
/// must run, and one that drops rows by them makes its rows its own.
fn runtime_filtered(exchange: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    exchange.exists(|node| Ok(node.is::<RuntimeFilterExec>()))
}

/// A column checked for NULL on the scan below.
type NullCheck = (Arc<dyn ExecutionPlan>, String);

/// `plan` printed in full as the stage cache compares plans, less the null checks of columns
/// in the scans and in the filters right above them, and those checks.
fn shown_without_null_checks(plan: &Arc<dyn ExecutionPlan>) -> (String, Vec<NullCheck>) {
    let mut shown = String::new();
    let mut checks = Vec::new();
    show(plan, 0, &mut shown, &mut checks);
    (shown, checks)
}

fn show(plan: &Arc<dyn ExecutionPlan>, depth: usize, shown: &mut String, checks: &mut Vec<NullCheck>) {
    let line = if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        let (line, columns) = scan.shown_without_null_checks();
        checks.extend(columns.into_iter().map(|column| (Arc::clone(plan), column)));
        line
    } else if let Some(filter) = plan.downcast_ref::<FilterExec>()
        && filter.input().is::<FileSourceScanExec>()
    {
        let kept: Vec<String> = split_conjunction(filter.predicate())
            .into_iter()
            .filter(|conjunct| match null_checked_column(conjunct) {
                Some(column) => {
                    checks.push((Arc::clone(filter.input()), column.to_string()));
                    false
                }
                None => true,
            })
            .map(|conjunct| format!("{conjunct:?}"))
            .collect();
        format!("FilterExec: {kept:?} projection={:?} fetch={:?}", filter.projection(), filter.fetch())
    } else {
        InFull(plan.as_ref()).to_string()
    };
    let schema = plan.schema();
    let fields: Vec<(&String, &DataType)> = schema.fields().iter().map(|f| (f.name(), f.data_type())).collect();
    shown.push_str(&format!("{}{line} {fields:?}\n", "  ".repeat(depth)));
    for child in plan.children() {
        show(child, depth + 1, shown, checks);
    }
}

/// One operator as DataFusion's verbose display prints it.
struct InFull<'a>(&'a dyn ExecutionPlan);

impl fmt::Display for InFull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_as(DisplayFormatType::Verbose, f)
    }
}

/// What the files' footers have shown of the columns checked, by scan and column. A footer
/// that cannot be read proves nothing: the exchange then runs.
#[derive(Default)]
struct NullProofs(HashMap<(usize, String), bool>);

impl NullProofs {
    /// Whether no row that the scans read holds a NULL in the columns checked.
    async fn hold(&mut self, checks: &[NullCheck]) -> bool {
        for (scan, column) in checks {
            let key = (Arc::as_ptr(scan) as *const () as usize, column.clone());
            let holds = match self.0.get(&key) {
                Some(&holds) => holds,
                None => {
                    let holds = match scan.downcast_ref::<FileSourceScanExec>() {
                        Some(scan) => scan.holds_no_null(column).await.unwrap_or_else(|error| {
                            tracing::debug!("no twin read: the footers of a scan could not be read: {error}");
                            false
                        }),
                        None => false,
                    };
                    self.0.insert(key, holds);
                    holds
                }
            };
            if !holds {
                return false;
            }
        }
        true
    }
}

//! The exchange's figures, in a file of its own because the map writer (`map_output`) and its
//! spill file (`spill`) both count them.

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};

/// What EXPLAIN ANALYZE shows of the exchange, shared by its map tasks.
#[derive(Clone)]
pub(super) struct ExchangeMetrics {
    pub(super) rows: Count,
    pub(super) bytes: Count,
    pub(super) spills: Count,
    pub(super) spilled_bytes: Count,
    pub(super) spill_files: Count,
}

impl ExchangeMetrics {
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet) -> Self {
        ExchangeMetrics {
            rows: MetricBuilder::new(metrics).counter("shuffle_rows", 0),
            bytes: MetricBuilder::new(metrics).counter("shuffle_bytes", 0),
            spills: MetricBuilder::new(metrics).spill_count(0),
            spilled_bytes: MetricBuilder::new(metrics).spilled_bytes(0),
            spill_files: MetricBuilder::new(metrics).counter("spill_files", 0),
        }
    }

    /// The same spill figures, with rows and bytes counted apart: a first pass over rows that
    /// are shuffled in the second.
    pub(super) fn first_pass(&self) -> Self {
        ExchangeMetrics { rows: Count::new(), bytes: Count::new(), ..self.clone() }
    }
}

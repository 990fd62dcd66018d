//! The server's Prometheus series, which the web UI serves at `/metrics` in Prometheus' text
//! format. Each layer counts what it does here (statements, scans, shuffles, commits, the
//! janitor, connections); gauges of the present (the memory pool) are set when scraped.
//!
//! One registry per process: a server is one process, and the figures are the process's.

use std::sync::LazyLock;

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

/// Statement durations' bucket bounds, in seconds: 1 ms to 5 min.
const DURATION_BUCKETS: [f64; 14] =
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 300.0];

pub struct Metrics {
    registry: Registry,
    /// By kind (`SELECT`, `INSERT`, `CREATE TABLE` … as the command tag names it), outcome
    /// (`ok`, `error`) and SQLSTATE class (`00` for success).
    pub statements: IntCounterVec,
    pub statement_seconds: Histogram,
    pub rows_read: IntCounter,
    pub bytes_read: IntCounter,
    pub bytes_shuffled: IntCounter,
    pub bytes_spilled: IntCounter,
    pub exchanges_planned: IntCounter,
    pub exchanges_avoided: IntCounter,
    pub bucket_files_pruned: IntCounter,
    pub partitions_coalesced: IntCounter,
    pub runtime_broadcasts: IntCounter,
    pub skew_splits: IntCounter,
    pub connections_open: IntGauge,
    pub connections_opened: IntCounter,
    pub connections_refused: IntCounter,
    pub memory_used: IntGauge,
    pub memory_limit: IntGauge,
    pub commits: IntCounter,
    pub conflicts: IntCounter,
    pub janitor_removals: IntCounter,
}

pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| {
            let counter = IntCounter::new(format!("bucketsql_{name}"), help).expect("a valid series");
            registry.register(Box::new(counter.clone())).expect("a series registered once");
            counter
        };
        let gauge = |name: &str, help: &str| {
            let gauge = IntGauge::new(format!("bucketsql_{name}"), help).expect("a valid series");
            registry.register(Box::new(gauge.clone())).expect("a series registered once");
            gauge
        };
        let statements = IntCounterVec::new(
            Opts::new("bucketsql_statements_total", "Statements ended, by kind, outcome and SQLSTATE class."),
            &["kind", "outcome", "sqlstate_class"],
        )
        .expect("a valid series");
        registry.register(Box::new(statements.clone())).expect("a series registered once");
        let statement_seconds = Histogram::with_opts(
            HistogramOpts::new("bucketsql_statement_duration_seconds", "How long statements took, rows sent included.")
                .buckets(DURATION_BUCKETS.to_vec()),
        )
        .expect("a valid series");
        registry.register(Box::new(statement_seconds.clone())).expect("a series registered once");
        Metrics {
            statements,
            statement_seconds,
            rows_read: counter("rows_read_total", "Rows read from table files by scans."),
            bytes_read: counter("bytes_read_total", "Bytes of table files the scans selected to read."),
            bytes_shuffled: counter("bytes_shuffled_total", "Bytes moved between partitions by exchanges."),
            bytes_spilled: counter("bytes_spilled_total", "Bytes written to spill files under memory pressure."),
            exchanges_planned: counter("exchanges_planned_total", "Shuffle exchanges in the plans that ran."),
            exchanges_avoided: counter(
                "exchanges_avoided_total",
                "Join and aggregate inputs read by bucket with no exchange: shuffles bucketing saved.",
            ),
            bucket_files_pruned: counter(
                "bucket_files_pruned_total",
                "Buckets of bucketed scans left unread because a filter on the bucket columns ruled them out.",
            ),
            partitions_coalesced: counter(
                "adaptive_partitions_coalesced_total",
                "Shuffle partitions adaptive execution merged away by coalescing small ones.",
            ),
            runtime_broadcasts: counter(
                "adaptive_runtime_broadcasts_total",
                "Sort-merge joins adaptive execution turned into broadcast joins after running a stage.",
            ),
            skew_splits: counter("adaptive_skew_splits_total", "Skewed shuffle partitions adaptive execution split."),
            connections_open: gauge("connections_open", "Client connections open now."),
            connections_opened: counter("connections_total", "Client connections accepted."),
            connections_refused: counter(
                "connections_refused_total",
                "Client connections refused past --max-connections (SQLSTATE 53300).",
            ),
            memory_used: gauge("memory_pool_used_bytes", "Memory queries hold in the shared pool now."),
            memory_limit: gauge(
                "memory_pool_limit_bytes",
                "The shared pool's size (--memory-limit); 0 when unbounded.",
            ),
            commits: counter("commits_total", "Writes published to the metastore (INSERT, CTAS, COPY, OPTIMIZE)."),
            conflicts: counter(
                "commit_conflicts_total",
                "Statements that failed on a write conflict (SQLSTATE 40001).",
            ),
            janitor_removals: counter(
                "janitor_files_removed_total",
                "Files the janitor deleted: retired or abandoned.",
            ),
            registry,
        }
    }

    /// Every series in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut text = Vec::new();
        // Encoding to a Vec fails only on a series that was not valid when made.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut text);
        String::from_utf8_lossy(&text).into_owned()
    }
}

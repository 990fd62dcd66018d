//! `bucketsql bench`: what bucketing saves. Generates transactions (N rows, `account_id` in
//! `[0, N/10)`) and accounts (N/10 rows), writes both bucketed (B buckets, sorted on the key)
//! and plain, checks the bucketed layout against Spark's bucket function, then times a join
//! with count/sum, a GROUP BY with top-5 and a point lookup on each — with as many shuffle
//! partitions as buckets and broadcasts off (adaptive execution on, then off), then at
//! Spark's defaults (200 shuffle partitions, adaptive execution) — reporting medians, the
//! bytes the scans read and their rows per second, each query's own peak memory, the most
//! descriptors held, shuffled bytes, the exchanges of each plan and the partitions read after
//! each.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, Int64Array, RecordBatch};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, collect};
use futures::StreamExt;

use crate::catalog::table::TableMeta;
use crate::error::SqlError;
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::empty_relation::EmptyRelationExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::parquet_reads::READ_REQUESTS;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::progress::Phase;
use crate::sql::activity::Backend;
use crate::sql::engine::{Engine, EngineOptions};
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::sql::statement;
use crate::storage::bucket_hash::bucket_ids;
use crate::storage::file_naming::bucket_id_of;
use crate::storage::object_stores::ObjectStores;
use crate::workload::{accounts_for, create_accounts, create_bucketed_copy, create_transactions};

/// The settings a query runs under, as the report names them.
const FIXED: &str = "fixed";
const FIXED_STATIC: &str = "fixed-static";
const DEFAULTS: &str = "defaults";
const DEFAULTS_NO_BROADCAST: &str = "defaults-nb";
/// Spark's defaults, run on the Spark Connect server.
const SPARK: &str = "spark";

pub mod tpch;

pub struct BenchOptions {
    pub rows: u64,
    pub buckets: u32,
    pub runs: usize,
    pub data_dir: PathBuf,
    pub json: Option<PathBuf>,
    /// The engine's options as `serve` would open it with: its memory limit, query history
    /// (0 measures the queries without one), warehouse and S3 settings, and a Spark Connect
    /// server that also runs the join, beside local execution.
    pub engine: EngineOptions,
}

struct Measurement {
    name: String,
    /// `bucketed` (Spark's defaults), `sorted` (bucketed scans report their sort order), `plain`.
    layout: &'static str,
    /// The settings it ran under.
    settings: &'static str,
    median: Duration,
    /// Rows the scans read (after bucket and row-group pruning) per second of the median.
    rows_per_second: f64,
    /// The most resident memory while this query ran, from a baseline with freed memory
    /// handed back to the system first.
    peak_rss: u64,
    /// The most file descriptors the process held while the query ran.
    peak_fds: u64,
    /// Process CPU time over wall time: how many cores were busy on average.
    cores_busy: f64,
    figures: PlanFigures,
}

/// CPU time this process has used (user + system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: u64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<u64>().ok()).sum();
    // The kernel reports clock ticks, 100 per second on Linux.
    Duration::from_millis(ticks * 10)
}

/// Resident memory and open descriptors of this process, sampled while queries run.
struct RssSampler {
    peak: Arc<AtomicU64>,
    peak_fds: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Descriptors this process holds, from `/proc/self/fd`.
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |entries| entries.count() as u64)
}

/// Hands memory freed by earlier queries back to the system, so that a query's peak is its own.
fn return_freed_memory() {
    // SAFETY: `mi_collect` only frees and returns unused memory; it has no preconditions.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

impl RssSampler {
    fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(rss_bytes()));
        let peak_fds = Arc::new(AtomicU64::new(open_descriptors()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, f, s) = (Arc::clone(&peak), Arc::clone(&peak_fds), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_bytes(), Ordering::Relaxed);
                f.fetch_max(open_descriptors(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler { peak, peak_fds, stop, thread: Some(thread) }
    }

    /// The peak resident bytes and the most descriptors held while it ran.
    fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        (self.peak.load(Ordering::Relaxed), self.peak_fds.load(Ordering::Relaxed))
    }
}

/// What a run's plan measured: the rows and bytes its scans read, the exchanges it ended
/// with, the bytes they moved, and for each the partitions its reader read (after adaptive
/// coalescing, when it ran).
#[derive(Default)]
struct PlanFigures {
    rows_scanned: usize,
    bytes_scanned: usize,
    read_requests: usize,
    exchanges: usize,
    bytes: usize,
    partitions_read: Vec<usize>,
}

impl PlanFigures {
    fn of(plan: &Arc<dyn ExecutionPlan>) -> Self {
        let mut figures = PlanFigures::default();
        figures.visit(plan, None);
        figures
    }

    /// `read_by` is the partition count of the adaptive read above, if `plan` is under one.
    fn visit(&mut self, plan: &Arc<dyn ExecutionPlan>, read_by: Option<usize>) {
        if plan.downcast_ref::<FileSourceScanExec>().is_some()
            && let Some(metrics) = plan.metrics()
        {
            self.rows_scanned += metrics.output_rows().unwrap_or(0);
            self.bytes_scanned += metrics.sum_by_name("bytes_scanned").map_or(0, |v| v.as_usize());
            self.read_requests += metrics.sum_by_name(READ_REQUESTS).map_or(0, |v| v.as_usize());
        }
        let read_by = match plan.downcast_ref::<AqeShuffleReadExec>() {
            Some(read) => Some(read.specs().len()),
            None if plan.downcast_ref::<ShuffleExchangeExec>().is_some() => {
                self.exchanges += 1;
                self.bytes += plan.metrics().and_then(|m| m.sum_by_name("shuffle_bytes")).map_or(0, |v| v.as_usize());
                self.partitions_read.push(read_by.unwrap_or(plan.output_partitioning().partition_count()));
                None
            }
            None => read_by,
        };
        for child in plan.children() {
            self.visit(child, read_by);
        }
        // What an empty stage let adaptive execution skip still ran below it.
        if let Some(empty) = plan.downcast_ref::<EmptyRelationExec>() {
            for stage in empty.ran() {
                self.visit(stage, read_by);
            }
        }
    }

    fn partitions_read_text(&self) -> String {
        let counts: Vec<String> = self.partitions_read.iter().map(usize::to_string).collect();
        if counts.is_empty() { "-".to_string() } else { counts.join("+") }
    }
}

/// Runs `sql`'s statements to their end; the rows they wrote.
async fn execute(session: &Arc<Session>, sql: &str) -> Result<usize, SqlError> {
    Ok(run_statements(session, sql).await?.1)
}

/// Runs `sql`'s statements as a client's are run (on Spark, under `bucketsql.engine =
/// spark`): the rows they returned and the rows they wrote.
async fn run_statements(session: &Arc<Session>, sql: &str) -> Result<(Vec<RecordBatch>, usize), SqlError> {
    let (mut batches, mut written) = (Vec::new(), 0);
    for (text, statement) in statement::parse_query(session, sql).await? {
        match statement::execute_statement(session, &text, &statement).await? {
            Output::Rows { mut stream, .. } => {
                while let Some(batch) = stream.next().await {
                    batches.push(batch?);
                }
            }
            Output::Command { rows, .. } => written += rows.unwrap_or(0),
            _ => {}
        }
    }
    Ok((batches, written))
}

/// The values of `batches`, row by row, as text: what two engines' answers are compared by.
fn answer_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<String>>, SqlError> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|column| ArrayFormatter::try_new(column.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SqlError::internal(e.to_string()))?;
        rows.extend((0..batch.num_rows()).map(|row| formatters.iter().map(|f| f.value(row).to_string()).collect()));
    }
    Ok(rows)
}

/// Times `sql` as an item of `phase`: a warm-up run, then `runs` timed ones; the rows of the
/// last.
async fn time_query(
    session: &Arc<Session>,
    phase: &mut Phase,
    name: &str,
    (layout, settings): (&'static str, &'static str),
    sql: &str,
    runs: usize,
) -> Result<(Measurement, Vec<RecordBatch>), SqlError> {
    phase.begin(format!("{name}, {layout}, {settings}"));
    let mut timings = Vec::with_capacity(runs);
    return_freed_memory();
    let sampler = RssSampler::start();
    let mut last_run = None;
    let mut busy = Vec::with_capacity(runs);
    for _ in 0..=runs {
        let cpu_before = cpu_time();
        let started = Instant::now();
        let (plan, batches) = if settings == SPARK {
            (None, run_statements(session, sql).await?.0)
        } else {
            let plan = session.plan_query(sql).await?;
            let batches = collect(Arc::clone(&plan), session.task_context()).await?;
            (Some(plan), batches)
        };
        let elapsed = started.elapsed();
        timings.push(elapsed);
        busy.push((cpu_time() - cpu_before).as_secs_f64() / elapsed.as_secs_f64());
        last_run = Some((plan, batches));
    }
    let (peak_rss, peak_fds) = sampler.finish();
    timings.remove(0); // warm-up
    busy.remove(0);
    let cores_busy = busy.iter().sum::<f64>() / busy.len() as f64;
    timings.sort();
    let median = timings[timings.len() / 2];
    let (plan, batches) = last_run.expect("ran at least once");
    let figures = plan.as_ref().map(PlanFigures::of).unwrap_or_default();
    phase.end(&format!("median {:.1} ms", median.as_secs_f64() * 1000.0));
    let measurement = Measurement {
        name: name.to_string(),
        layout,
        settings,
        median,
        rows_per_second: figures.rows_scanned as f64 / median.as_secs_f64(),
        peak_rss,
        peak_fds,
        cores_busy,
        figures,
    };
    Ok((measurement, batches))
}

/// Writes `table` with its `CREATE TABLE … AS` as an item of `phase`; how long it took.
async fn write_table(session: &Arc<Session>, phase: &mut Phase, table: &str, sql: &str) -> Result<Duration, SqlError> {
    phase.begin(table);
    let started = Instant::now();
    let written = execute(session, sql).await?;
    let took = started.elapsed();
    phase.end(&format!("{written} rows"));
    Ok(took)
}

/// Every file of a bucketed table holds only rows of the bucket its name gives, sorted.
async fn check_layout(table: &TableMeta, stores: &ObjectStores, buckets: u32) -> Result<(usize, u64), SqlError> {
    let mut phase = Phase::start("check", table.files.len() as u64);
    let mut rows = 0u64;
    for file in &table.files {
        let name = file.path.rsplit('/').next().unwrap_or_default();
        let bucket = bucket_id_of(name).ok_or_else(|| SqlError::internal(format!("{name} names no bucket")))?;
        phase.begin(format!("bucket {bucket}"));
        let bytes = stores.read(&table.file_path(file)).await?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
        let mut previous = i64::MIN;
        let mut bucket_rows = 0u64;
        for batch in reader {
            let batch = batch?;
            let keys = batch.column_by_name("account_id").ok_or_else(|| SqlError::internal("no account_id"))?;
            let values = keys
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| SqlError::internal("account_id is not BIGINT"))?;
            for id in bucket_ids(&[Arc::clone(keys)], values.len(), buckets)? {
                if id != bucket {
                    return Err(SqlError::internal(format!("{name} holds a row of bucket {id}")));
                }
            }
            for v in values.values().iter() {
                if *v < previous {
                    return Err(SqlError::internal(format!("{name} is not sorted on account_id")));
                }
                previous = *v;
            }
            bucket_rows += values.len() as u64;
        }
        rows += bucket_rows;
        phase.end(&format!("{bucket_rows} rows, all in their bucket, sorted"));
    }
    phase.finish();
    Ok((table.files.len(), rows))
}

pub async fn run(options: BenchOptions) -> Result<(), SqlError> {
    let BenchOptions { rows, buckets, runs, data_dir, json, engine } = options;
    let accounts = accounts_for(rows);
    let on_spark = engine.spark_connect.is_some();
    let engine = Engine::open(&data_dir, engine)?;
    let session = Arc::new(Session::new(Arc::clone(&engine), Arc::new(Backend::new(None)))?);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "bucketsql bench: {rows} transactions, {accounts} accounts, {buckets} buckets, {cores} cores, median of {runs} runs after a warm-up"
    );

    execute(&session, "DROP TABLE IF EXISTS tx; DROP TABLE IF EXISTS acc; DROP TABLE IF EXISTS tx_plain; DROP TABLE IF EXISTS acc_plain").await?;
    let mut phase = Phase::start("write", 4);
    let plain_write =
        write_table(&session, &mut phase, "tx_plain", &create_transactions("tx_plain", rows, accounts)).await?;
    write_table(&session, &mut phase, "acc_plain", &create_accounts("acc_plain", accounts)).await?;
    let bucketed_write =
        write_table(&session, &mut phase, "tx", &create_bucketed_copy("tx", "tx_plain", buckets)).await?;
    write_table(&session, &mut phase, "acc", &create_bucketed_copy("acc", "acc_plain", buckets)).await?;
    phase.finish();

    let tx = session.tables.table("default", "tx")?.ok_or_else(|| SqlError::internal("tx was not written"))?;
    let (files, checked) = check_layout(&tx, session.tables.stores(), buckets).await?;
    println!(
        "write ({}): plain {:.2}s ({:.0} rows/s), bucketed {:.2}s ({:.0} rows/s); layout: {files} files, {checked} rows, every row in its Spark bucket, every file sorted",
        tx.location.parent().map_or_else(String::new, |warehouse| warehouse.to_string()),
        plain_write.as_secs_f64(),
        rows as f64 / plain_write.as_secs_f64(),
        bucketed_write.as_secs_f64(),
        rows as f64 / bucketed_write.as_secs_f64()
    );

    let queries = [
        ("join count/sum", "SELECT count(*), sum(t.amount) FROM {tx} t JOIN {acc} a ON t.account_id = a.account_id"),
        (
            "group by top-5",
            "SELECT account_id, count(*), sum(amount) AS total FROM {tx} GROUP BY account_id ORDER BY total DESC LIMIT 5",
        ),
        ("point lookup", "SELECT * FROM {tx} WHERE account_id = 42"),
    ];
    // Both joins by sort-merge with as many shuffle partitions as buckets, so the comparison
    // is exchange against none, with adaptive execution and without; then Spark's defaults as
    // a user leaves them (200 shuffle partitions, adaptive execution), with and without
    // broadcasts.
    let bundles = [
        (
            FIXED,
            format!(
                "RESET ALL; SET spark.sql.autoBroadcastJoinThreshold = -1; SET spark.sql.shuffle.partitions = {buckets}"
            ),
        ),
        (
            FIXED_STATIC,
            format!(
                "RESET ALL; SET spark.sql.autoBroadcastJoinThreshold = -1; SET spark.sql.shuffle.partitions = {buckets}; SET spark.sql.adaptive.enabled = false"
            ),
        ),
        (DEFAULTS, "RESET ALL".to_string()),
        (DEFAULTS_NO_BROADCAST, "RESET ALL; SET spark.sql.autoBroadcastJoinThreshold = -1".to_string()),
    ];
    // The point lookup is timed once, under the first bundle.
    let queries_under = |settings: &str| &queries[..if settings == FIXED { 3 } else { 2 }];
    let layouts = [("bucketed", "tx", "acc"), ("plain", "tx_plain", "acc_plain")];
    // Each query on each layout under its bundles, the sorted join once, and the join on each
    // layout on Spark.
    let timed = bundles.iter().map(|(settings, _)| queries_under(settings).len() * layouts.len()).sum::<usize>()
        + 1
        + if on_spark { layouts.len() } else { 0 };
    let mut phase = Phase::start("time", timed as u64);
    let mut results = Vec::new();
    for (settings, setup) in &bundles {
        execute(&session, setup).await?;
        for (name, template) in queries_under(settings) {
            for (layout, tx, acc) in layouts {
                let sql = template.replace("{tx}", tx).replace("{acc}", acc);
                results.push(time_query(&session, &mut phase, name, (layout, settings), &sql, runs).await?.0);
            }
        }
        if *settings == FIXED {
            // Each bucket was written as one sorted file, so a bucketed scan may report its
            // order and the sort-merge join needs no sort at all (Spark's default keeps them).
            execute(&session, "SET spark.sql.legacy.bucketedTableScan.outputOrdering = true").await?;
            let join = queries[0].1.replace("{tx}", "tx").replace("{acc}", "acc");
            results
                .insert(1, time_query(&session, &mut phase, queries[0].0, ("sorted", settings), &join, runs).await?.0);
        }
    }
    if on_spark {
        // Spark's defaults, as Spark Connect's session has them; its answer must be this
        // server's.
        for (layout, tx, acc) in layouts {
            let join = queries[0].1.replace("{tx}", tx).replace("{acc}", acc);
            execute(&session, "RESET ALL").await?;
            let here = run_statements(&session, &join).await?.0;
            execute(&session, "SET bucketsql.engine = spark").await?;
            let (measurement, there) =
                time_query(&session, &mut phase, queries[0].0, (layout, SPARK), &join, runs).await?;
            let (there, here) = (answer_rows(&there)?, answer_rows(&here)?);
            if there != here {
                return Err(SqlError::internal(format!(
                    "Spark answered {there:?} to the {layout} join, this server {here:?}"
                )));
            }
            results.push(measurement);
        }
        execute(&session, "RESET ALL").await?;
    }
    phase.finish();

    println!(
        "settings: {FIXED} = broadcasts off, shuffle partitions = buckets; {FIXED_STATIC} = the same without adaptive execution; {DEFAULTS} = every setting at its default (200 shuffle partitions, adaptive execution on); {DEFAULTS_NO_BROADCAST} = defaults with broadcasts off; {SPARK} = defaults, on the Spark Connect server (its plan's figures are Spark's, not shown)"
    );
    println!(
        "{:<16} {:<9} {:<12} {:>10} {:>11} {:>9} {:>14} {:>10} {:>8} {:>11} {:>9} {:>14} {:>15}",
        "query",
        "layout",
        "settings",
        "median ms",
        "read MiB",
        "requests",
        "rows/s",
        "peak MiB",
        "max fds",
        "cores busy",
        "exchanges",
        "shuffled MiB",
        "partitions read"
    );
    for m in &results {
        // Spark's plan runs in Spark's processes: its scans and exchanges are not measured here.
        let here = |figure: String| if m.settings == SPARK { "-".to_string() } else { figure };
        println!(
            "{:<16} {:<9} {:<12} {:>10.1} {:>11} {:>9} {:>14} {:>10.1} {:>8} {:>11.2} {:>9} {:>14} {:>15}",
            m.name,
            m.layout,
            m.settings,
            m.median.as_secs_f64() * 1000.0,
            here(format!("{:.1}", m.figures.bytes_scanned as f64 / 1048576.0)),
            here(m.figures.read_requests.to_string()),
            here(format!("{:.0}", m.rows_per_second)),
            m.peak_rss as f64 / 1048576.0,
            m.peak_fds,
            m.cores_busy,
            here(m.figures.exchanges.to_string()),
            here(format!("{:.1}", m.figures.bytes as f64 / 1048576.0)),
            m.figures.partitions_read_text()
        );
    }
    let entries: Vec<String> = results
        .iter()
        .map(|m| {
            format!(
                "{{\"query\":\"{}\",\"layout\":\"{}\",\"settings\":\"{}\",\"median_ms\":{:.3},\"rows_scanned\":{},\"bytes_scanned\":{},\"read_requests\":{},\"rows_per_second\":{:.0},\"peak_rss_bytes\":{},\"peak_fds\":{},\"cores_busy\":{:.2},\"exchanges\":{},\"shuffle_bytes\":{},\"partitions_read\":{:?}}}",
                m.name,
                m.layout,
                m.settings,
                m.median.as_secs_f64() * 1000.0,
                m.figures.rows_scanned,
                m.figures.bytes_scanned,
                m.figures.read_requests,
                m.rows_per_second,
                m.peak_rss,
                m.peak_fds,
                m.cores_busy,
                m.figures.exchanges,
                m.figures.bytes,
                m.figures.partitions_read
            )
        })
        .collect();
    let report = format!(
        "{{\"rows\":{rows},\"accounts\":{accounts},\"buckets\":{buckets},\"cores\":{cores},\"runs\":{runs},\"write_plain_ms\":{:.3},\"write_bucketed_ms\":{:.3},\"layout_files\":{files},\"results\":[{}]}}",
        plain_write.as_secs_f64() * 1000.0,
        bucketed_write.as_secs_f64() * 1000.0,
        entries.join(",")
    );
    println!("{report}");
    if let Some(path) = json {
        std::fs::write(path, &report)?;
    }
    Ok(())
}

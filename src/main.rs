use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use bucketsql::bench::tpch::TpchOptions;
use bucketsql::catalog::location::Location;
use bucketsql::credentials::Passwords;
use bucketsql::exec::spark_connect::SparkConnectUrl;
use bucketsql::server::auth::Authenticator;
use bucketsql::server::connection_limit::DEFAULT_MAX_CONNECTIONS;
use bucketsql::server::{ClientLimits, Server};
use bucketsql::sql::engine::{Engine, EngineOptions};
use bucketsql::sql::history::DEFAULT_QUERY_HISTORY;
use bucketsql::sql::statement_stats::DEFAULT_STATEMENT_STATS_MAX;
use bucketsql::storage::object_stores::S3Settings;
use bucketsql::ui::WebUi;

/// mimalloc rather than glibc's malloc: batches are often freed on another thread than the one
/// that made them, and glibc's arenas then serialize threads on a lock (a third of the CPU of
/// a 16-bucket join, TPC-H Q10 and Q16).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_MAX_MESSAGE_SIZE: &str = "64MiB";

#[derive(Parser)]
#[command(name = "bucketsql", version, about = "A PostgreSQL-wire SQL server with Apache Spark's table bucketing")]
struct Cli {
    /// How log lines are written: `text` for people, `json` for one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Measure what bucketing saves: bucketed against plain tables, written and queried.
    Bench {
        /// Transactions to generate (accounts are a tenth of them).
        #[arg(long, default_value_t = 10_000_000)]
        rows: u64,
        /// Buckets of the bucketed tables.
        #[arg(long, default_value_t = 16)]
        buckets: u32,
        /// Timed runs per query (after one warm-up run); the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where the benchmark's tables are written.
        #[arg(long, default_value = "./bucketsql-bench")]
        data_dir: PathBuf,
        /// Memory shared by all queries (default: half of RAM).
        #[arg(long, value_parser = parse_bytes)]
        memory_limit: Option<usize>,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Statements the query history keeps, as `serve` does for its web UI; 0 measures
        /// without it.
        #[arg(long, default_value_t = DEFAULT_QUERY_HISTORY)]
        query_history: usize,
        /// Run TPC-H's 22 queries at this scale factor instead, on plain tables of one file
        /// each and on copies bucketed into `--buckets` (answers checked at scale factor 1).
        #[arg(long, value_name = "SF", conflicts_with = "rows")]
        tpch: Option<f64>,
        /// Also time the join on this Spark Connect server (`sc://HOST:PORT`), which must read
        /// the benchmark's data directory at the same path.
        #[arg(long, value_name = "URL", conflicts_with = "tpch")]
        spark_connect: Option<String>,
        #[command(flatten)]
        object_storage: Box<ObjectStorageArgs>,
    },
    /// Learn bucketing step by step: plans, exchanges and what they cost, on generated tables.
    Demo {
        /// Transactions to generate (accounts are a tenth of them).
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Run on the server at this URL (`postgres://postgres@127.0.0.1:5433/`), replacing its
        /// tables named demo_*, instead of on one started on a temporary data directory.
        #[arg(long, value_name = "URL")]
        connect: Option<String>,
        /// Print the lesson's statements as a script for psql instead of running them.
        #[arg(long, conflicts_with = "connect")]
        sql: bool,
    },
    /// Serve SQL over the PostgreSQL wire protocol.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:5433")]
        listen: String,
        /// Directory holding the metastore and the table files; created if missing.
        #[arg(long, default_value = "./bucketsql-data")]
        data_dir: PathBuf,
        /// A directory, or an `s3://bucket/prefix`, under which `CREATE TABLE … LOCATION` may
        /// register tables (repeatable).
        #[arg(long = "allow-location", value_name = "DIR|URL", value_parser = parse_location)]
        allowed_locations: Vec<Location>,
        #[command(flatten)]
        object_storage: Box<ObjectStorageArgs>,
        /// Memory shared by all queries, e.g. `4GiB` or `512MiB` (default: half of RAM).
        #[arg(long, value_parser = parse_bytes)]
        memory_limit: Option<usize>,
        /// Require this password, with SCRAM-SHA-256, whatever the user name.
        #[arg(long, conflicts_with = "users_file")]
        password: Option<String>,
        /// Require SCRAM-SHA-256 with the passwords of this file's `user:password` lines.
        #[arg(long, value_name = "FILE")]
        users_file: Option<PathBuf>,
        /// Accept clients without a password even on a non-loopback `--listen` address.
        #[arg(long, conflicts_with_all = ["password", "users_file"])]
        trust: bool,
        /// PEM certificate chain for TLS (with `--tls-key`).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key for TLS (with `--tls-cert`).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Clients connected at once; past it a new one gets SQLSTATE 53300.
        #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        /// Largest message a client may send (a query, a statement's parameters, a piece of
        /// COPY data); a larger one ends its connection with SQLSTATE 08P01.
        #[arg(long, default_value = DEFAULT_MAX_MESSAGE_SIZE, value_parser = parse_bytes)]
        max_message_size: usize,
        /// Where the web UI listens (`ADDR:PORT`; the next free port when taken), or `off`.
        #[arg(long, default_value = bucketsql::ui::DEFAULT_ADDRESS, value_name = "ADDR|off")]
        ui: String,
        /// With `--users-file`, the user who sees every user's statements in the web UI (the
        /// others see their own).
        #[arg(long, value_name = "USER", requires = "users_file")]
        ui_admin: Option<String>,
        /// Log statements that take at least this long with their plans (`250ms`, `1s`; `0`
        /// logs all, `-1` none); sessions may change it with SET.
        #[arg(long, default_value = "-1", value_name = "TIME", allow_hyphen_values = true)]
        log_min_duration_statement: String,
        /// Normalised statement texts `pg_stat_statements` keeps.
        #[arg(long, default_value_t = DEFAULT_STATEMENT_STATS_MAX as u32, value_parser = clap::value_parser!(u32).range(100..))]
        pg_stat_statements_max: u32,
        /// On SIGTERM or SIGINT, how long running statements may go on before they are
        /// cancelled (seconds).
        #[arg(long, default_value_t = 30, value_name = "SECONDS")]
        shutdown_timeout: u64,
        /// A Spark Connect server (`sc://HOST:PORT[/;token=…;use_ssl=true]`) that runs the
        /// statements of sessions with `bucketsql.engine = spark` (or `auto`, for large scans).
        /// It must read the warehouse at the same paths.
        #[arg(long, value_name = "URL")]
        spark_connect: Option<String>,
    },
}

/// `serve`'s flags for tables on object storage.
#[derive(clap::Args)]
struct ObjectStorageArgs {
    /// Where managed tables live: a directory or an `s3://bucket/prefix` (default:
    /// `<data-dir>/warehouse`). The metastore stays in the data directory.
    #[arg(long, value_name = "DIR|URL", value_parser = parse_location)]
    warehouse: Option<Location>,
    /// An S3-compatible server to reach `s3://` locations at, instead of AWS. Credentials and
    /// region come from the `AWS_*` variables or the AWS shared files.
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// Allow a plain-HTTP `--s3-endpoint`.
    #[arg(long)]
    s3_allow_http: bool,
    /// Address buckets as host names (`bucket.endpoint`) rather than as the path's first
    /// segment.
    #[arg(long)]
    s3_virtual_hosted_style: bool,
}

impl ObjectStorageArgs {
    fn s3_settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.s3_endpoint.clone(),
            virtual_hosted: self.s3_virtual_hosted_style,
            allow_http: self.s3_allow_http,
        }
    }
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(bucketsql::server::WORKER_STACK_BYTES)
        .max_blocking_threads(bucketsql::exec::executor::MAX_BLOCKING_THREADS)
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let Cli { log_format, command } = Cli::parse();
    // The demo's own server would log between the steps it prints.
    let default_level = if matches!(command, Command::Demo { .. }) { "warn" } else { "info" };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)));
    match log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    match command {
        Command::Bench {
            rows,
            buckets,
            runs,
            data_dir,
            memory_limit,
            json,
            query_history,
            tpch,
            spark_connect,
            object_storage,
        } => {
            if buckets == 0 || runs == 0 || rows == 0 {
                anyhow::bail!("--rows, --buckets and --runs must be positive");
            }
            let engine = EngineOptions {
                memory_limit: shared_memory_limit(
                    memory_limit,
                    if tpch.is_some() { FreedMemory::Mapped } else { FreedMemory::Unmapped },
                ),
                query_history,
                spark_connect: spark_connect.as_deref().map(SparkConnectUrl::parse).transpose()?,
                warehouse: object_storage.warehouse.clone(),
                s3: object_storage.s3_settings(),
                ..EngineOptions::default()
            };
            if let Some(scale) = tpch {
                if !(scale > 0.0 && scale.is_finite()) {
                    anyhow::bail!("--tpch takes a positive scale factor");
                }
                bucketsql::bench::tpch::run(TpchOptions { scale, buckets, runs, data_dir, json, engine }).await?;
                return Ok(());
            }
            bucketsql::bench::run(bucketsql::bench::BenchOptions { rows, buckets, runs, data_dir, json, engine })
                .await?;
        }
        Command::Demo { rows, connect, sql } => {
            if rows == 0 {
                anyhow::bail!("--rows must be positive");
            }
            if sql {
                print!("{}", bucketsql::demo::script(rows));
                return Ok(());
            }
            match connect {
                Some(url) => bucketsql::demo::run(&url, rows).await?,
                None => {
                    let data_dir = tempfile::Builder::new().prefix("bucketsql-demo").tempdir()?;
                    let engine = Engine::open(
                        data_dir.path(),
                        EngineOptions {
                            memory_limit: shared_memory_limit(None, FreedMemory::Mapped),
                            ..EngineOptions::default()
                        },
                    )?;
                    let limits = ClientLimits {
                        max_connections: DEFAULT_MAX_CONNECTIONS as usize,
                        max_message_bytes: parse_bytes(DEFAULT_MAX_MESSAGE_SIZE).map_err(anyhow::Error::msg)?,
                    };
                    // Trusting clients is safe: the server listens on loopback only, for this run.
                    let server =
                        Server::bind("127.0.0.1:0", engine, Authenticator::new(None, None), None, limits).await?;
                    let url = format!("postgres://postgres@{}/", server.local_addr()?);
                    tokio::spawn(server.run());
                    bucketsql::demo::run(&url, rows).await?;
                }
            }
        }
        Command::Serve {
            listen,
            data_dir,
            allowed_locations,
            object_storage,
            memory_limit,
            password,
            users_file,
            trust,
            tls_cert,
            tls_key,
            max_connections,
            max_message_size,
            ui,
            ui_admin,
            log_min_duration_statement,
            pg_stat_statements_max,
            shutdown_timeout,
            spark_connect,
        } => {
            let passwords = match (password, users_file) {
                (Some(password), _) => Some(Arc::new(Passwords::for_everyone(&password))),
                (None, Some(file)) => Some(Arc::new(Passwords::from_file(&file)?)),
                (None, None) => None,
            };
            let ui_address = match ui.as_str() {
                "off" => None,
                address => Some(
                    tokio::net::lookup_host(address)
                        .await?
                        .next()
                        .ok_or_else(|| anyhow::anyhow!("--ui {address} names no address"))?,
                ),
            };
            if passwords.is_none() && !trust && ui_address.is_some_and(|a| !a.ip().is_loopback()) {
                anyhow::bail!(
                    "refusing to show the web UI on {ui} without a password: set --password or --users-file, or pass --trust"
                );
            }
            if passwords.is_none() && !trust && tokio::net::lookup_host(&listen).await?.any(|a| !a.ip().is_loopback()) {
                anyhow::bail!(
                    "refusing to let anyone connect to {listen} without a password: set --password or --users-file, or pass --trust"
                );
            }
            let tls = match (&tls_cert, &tls_key) {
                (Some(cert), Some(key)) => Some(bucketsql::server::tls::acceptor(cert, key)?),
                _ => None,
            };
            let cert_pem = tls_cert.as_deref().map(std::fs::read).transpose()?;
            let auth = Authenticator::new(passwords.clone(), cert_pem.as_deref());
            let memory_limit = shared_memory_limit(memory_limit, FreedMemory::Mapped);
            let query_history = if ui_address.is_some() { DEFAULT_QUERY_HISTORY } else { 0 };
            let engine = Engine::open(
                &data_dir,
                EngineOptions {
                    allowed_locations,
                    warehouse: object_storage.warehouse.clone(),
                    s3: object_storage.s3_settings(),
                    memory_limit,
                    query_history,
                    statement_stats_max: pg_stat_statements_max as usize,
                    log_min_duration_statement,
                    spark_connect: spark_connect.as_deref().map(SparkConnectUrl::parse).transpose()?,
                },
            )?;
            if let Some(address) = ui_address {
                let ui = WebUi::bind(address, Arc::clone(&engine), passwords, ui_admin, tls.clone()).await?;
                let scheme = if tls.is_some() { "https" } else { "http" };
                tracing::info!(address = %format!("{scheme}://{}/", ui.local_addr()?), "web UI is listening");
                tokio::spawn(ui.run());
            }
            let limits =
                ClientLimits { max_connections: max_connections as usize, max_message_bytes: max_message_size };
            let server = Server::bind(&listen, Arc::clone(&engine), auth, tls, limits).await?;
            tracing::info!(address = %server.local_addr()?, data_dir = %data_dir.display(), "bucketsql is listening");
            server.run_until(shutdown_signal()).await?;
            let timeout = std::time::Duration::from_secs(shutdown_timeout);
            tracing::info!(
                timeout_seconds = shutdown_timeout,
                "shutting down: no new connections; running statements may finish"
            );
            let cancelled = engine.finish_statements(timeout).await;
            tracing::info!(cancelled, "bucketsql has shut down");
            // Connections still open end with the process, as their statements have.
            std::process::exit(0);
        }
    }
    Ok(())
}

/// SIGTERM (what service managers send) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// A directory or an `s3://` URL, as `--warehouse` and `--allow-location` take them.
fn parse_location(text: &str) -> Result<Location, String> {
    Location::parse(text).map_err(|e| e.message)
}

/// `1024`, `64KiB`, `512MiB`, `4GiB` (also `KB`/`MB`/`GB`, read as binary units).
fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number.parse().map_err(|_| format!("{text} is not a size such as 512MiB"))?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit {other}")),
    };
    number.checked_mul(scale).ok_or_else(|| format!("{text} is too large"))
}

/// The memory all queries share: the `--memory-limit` given, with freed memory returned to the
/// system promptly so that resident memory stays near it, or else half of RAM, with freed
/// memory kept for the next query as `freed` says.
fn shared_memory_limit(given: Option<usize>, freed: FreedMemory) -> Option<usize> {
    match given {
        Some(limit) => {
            return_freed_memory_promptly();
            Some(limit)
        }
        None => {
            set_allocator_option(PURGE_DELAY, KEEP_FREED_MEMORY_MS);
            if freed == FreedMemory::Mapped {
                set_allocator_option(PURGE_DECOMMITS, 0);
            }
            total_memory().map(|bytes| bytes / 2)
        }
    }
}

/// What mimalloc does with freed pages it hands back, without a memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FreedMemory {
    /// Marks them free (`MADV_FREE`): the kernel takes them only when it needs memory, and a
    /// page used again before costs no page fault. Four TPC-H queries at SF1 (Q5, Q17, Q18,
    /// Q21), run four times each, took 110 000 page faults unmapping pages and 10 000 marking
    /// them, with 12 % less CPU; a fault of a transparent huge page zeroes 2 MiB.
    Mapped,
    /// Unmaps them (`MADV_DONTNEED`), mimalloc's default: resident memory then shows only what
    /// is in use, which the bench's per-query peaks need.
    Unmapped,
}

/// How long mimalloc keeps freed pages before handing them back without a memory limit. Its
/// own default, 10 ms, hands back the pages of one operator's batches while the next is about
/// to fault them in again, each page zeroed by the kernel: five TPC-H queries at SF1, run five
/// times each, took 450 000 page faults with it and 40 000 with a second.
const KEEP_FREED_MEMORY_MS: std::ffi::c_long = 1000;

/// Has mimalloc give freed pages back to the system within 10 ms, and keeps transparent huge
/// pages out of the process (mimalloc commits its arenas eagerly, and a huge page counts whole
/// as resident), so that resident memory stays near the limit. Not at once: each purge
/// interrupts every other core to flush its page tables, which took a quarter of the CPU of a
/// busy server when every free purged.
fn return_freed_memory_promptly() {
    set_allocator_option(PURGE_DELAY, 10);
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process for the pages it faults in next.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        tracing::warn!("could not turn off transparent huge pages; resident memory may exceed --memory-limit");
    }
}

/// mimalloc's options in mimalloc.h's `mi_option_e`, which the bindings leave unnamed.
const PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn set_allocator_option(option: libmimalloc_sys::mi_option_t, value: std::ffi::c_long) {
    // SAFETY: mi_option_set only changes an allocator parameter, which mimalloc reads atomically.
    unsafe { libmimalloc_sys::mi_option_set(option, value) };
}

/// Physical memory from `/proc/meminfo`.
fn total_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

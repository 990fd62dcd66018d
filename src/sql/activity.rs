//! Who is connected and what each connection is doing, for `pg_stat_activity` and
//! `pg_stat_progress_copy`: a server-wide list of backends that the wire front end keeps (a
//! backend is listed when its client connects and leaves the list when the connection ends,
//! however it ends) and that the catalog views read at each scan.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use crate::storage::transaction::BlockStatus;

/// Every connected backend, in the order they connected.
#[derive(Default)]
pub struct Backends {
    next_key: AtomicU64,
    connected: Mutex<BTreeMap<u64, Arc<Backend>>>,
}

impl Backends {
    /// Lists `backend` until the returned registration is dropped, which the connection's
    /// task does when it ends, by a close, an error or a panic alike.
    pub fn register(self: &Arc<Self>, backend: Arc<Backend>) -> Registration {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        lock(&self.connected).insert(key, backend);
        Registration { backends: Arc::clone(self), key }
    }

    /// The listed backends whose client has logged in: PostgreSQL 15 shows a backend once
    /// authentication is over.
    pub fn logged_in(&self) -> Vec<Arc<Backend>> {
        lock(&self.connected).values().filter(|b| b.login().is_some()).cloned().collect()
    }

    /// A CancelRequest, its key checked, for the backend of process id `pid`: stops the
    /// statement it runs, if any.
    pub fn cancel_statement(&self, pid: i32) {
        let connected = lock(&self.connected);
        for backend in connected.values().filter(|b| b.login().is_some_and(|login| login.pid == pid)) {
            backend.cancel_statement();
        }
    }
}

/// Keeps a backend in [`Backends`] while it lives.
pub struct Registration {
    backends: Arc<Backends>,
    key: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.backends.connected).remove(&self.key);
    }
}

/// One connection, as `pg_stat_activity` describes it.
pub struct Backend {
    /// `None` for a session no client opened (the benchmark's).
    pub client: Option<SocketAddr>,
    pub started: SystemTime,
    login: OnceLock<Login>,
    /// The session's settings, whose `application_name` (`SET` since login, or `set_config`)
    /// `pg_stat_activity` shows in place of the start-up parameter, as PostgreSQL does.
    settings: OnceLock<Arc<Mutex<BTreeMap<String, String>>>>,
    statement: Mutex<StatementActivity>,
    /// Fired by a CancelRequest or the web UI; a fresh one for each statement. It stays fired,
    /// so a cancel that comes while the statement plans stops it once its rows start.
    statement_cancel: Mutex<CancellationToken>,
    copy: Mutex<Option<Arc<CopyProgress>>>,
}

/// What authentication established.
pub struct Login {
    /// The process id of BackendKeyData, which a CancelRequest names.
    pub pid: i32,
    pub user: String,
    /// The `application_name` start-up parameter; empty when the client sent none.
    pub application_name: String,
}

/// `pg_stat_activity.state`. The idle states follow the transaction status ReadyForQuery
/// reports: the session's transaction block, open, failed or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendState {
    Active,
    Idle,
    IdleInTransaction,
    IdleInTransactionAborted,
}

impl BackendState {
    /// The idle state of a backend whose transaction block is in `status`.
    pub fn idle(status: BlockStatus) -> Self {
        match status {
            BlockStatus::Idle => BackendState::Idle,
            BlockStatus::InBlock => BackendState::IdleInTransaction,
            BlockStatus::Failed => BackendState::IdleInTransactionAborted,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendState::Active => "active",
            BackendState::Idle => "idle",
            BackendState::IdleInTransaction => "idle in transaction",
            BackendState::IdleInTransactionAborted => "idle in transaction (aborted)",
        }
    }
}

/// The backend's running or last statement.
#[derive(Debug, Clone)]
pub struct StatementActivity {
    pub state: BackendState,
    /// The text the client sent, all of a simple query's statements together.
    pub query: String,
    pub query_start: Option<SystemTime>,
    pub state_change: SystemTime,
    /// When the client's transaction block began; `None` outside one.
    transaction_start: Option<SystemTime>,
    /// The statement runs on the Spark Connect server, and waits for it.
    pub on_spark: bool,
}

impl StatementActivity {
    /// `xact_start`: the transaction block's start, else the running statement's, which is
    /// a transaction of its own.
    pub fn transaction_start(&self) -> Option<SystemTime> {
        self.transaction_start.or(if self.state == BackendState::Active { self.query_start } else { None })
    }
}

impl Backend {
    pub fn new(client: Option<SocketAddr>) -> Self {
        let started = SystemTime::now();
        Backend {
            client,
            started,
            login: OnceLock::new(),
            settings: OnceLock::new(),
            statement: Mutex::new(StatementActivity {
                state: BackendState::Idle,
                query: String::new(),
                query_start: None,
                state_change: started,
                transaction_start: None,
                on_spark: false,
            }),
            statement_cancel: Mutex::default(),
            copy: Mutex::new(None),
        }
    }

    /// Authentication is over: from now on the backend is shown.
    pub fn logged_in(&self, login: Login) {
        let _ = self.login.set(login);
        lock(&self.statement).state_change = SystemTime::now();
    }

    pub fn login(&self) -> Option<&Login> {
        self.login.get()
    }

    /// The settings the session has set (its overrides of the defaults).
    pub fn settings(&self) -> BTreeMap<String, String> {
        self.settings.get().map(|settings| lock(settings).clone()).unwrap_or_default()
    }

    /// The session's settings, shared when its session opens.
    pub fn share_settings(&self, settings: Arc<Mutex<BTreeMap<String, String>>>) {
        let _ = self.settings.set(settings);
    }

    /// The session's `application_name`: as last set, else the start-up parameter; at most
    /// PostgreSQL's `NAMEDATALEN - 1` bytes.
    pub fn application_name(&self) -> String {
        let set = self.settings.get().and_then(|settings| lock(settings).get(APPLICATION_NAME).cloned());
        let name = set.or_else(|| self.login().map(|login| login.application_name.clone())).unwrap_or_default();
        truncated(&name, APPLICATION_NAME_BYTES).to_string()
    }

    /// A statement starts running (a simple query, or a Parse or Execute message). Its text
    /// is kept up to PostgreSQL's `track_activity_query_size` default of 1024 bytes.
    pub fn statement_started(&self, query: &str) {
        let now = SystemTime::now();
        *lock(&self.statement_cancel) = CancellationToken::new();
        let mut statement = lock(&self.statement);
        statement.query.clear();
        statement.query.push_str(truncated(query, QUERY_TEXT_BYTES));
        statement.query_start = Some(now);
        statement.on_spark = false;
        if statement.state != BackendState::Active {
            statement.state = BackendState::Active;
            statement.state_change = now;
        }
    }

    /// The server answers ReadyForQuery: it waits for the client, in `state`.
    pub fn ready(&self, state: BackendState) {
        let now = SystemTime::now();
        let mut statement = lock(&self.statement);
        statement.transaction_start = match state {
            BackendState::Active | BackendState::Idle => None,
            // The statement that opened the block began it.
            _ => statement.transaction_start.or(statement.query_start),
        };
        if statement.state != state {
            statement.state = state;
            statement.state_change = now;
        }
    }

    /// The running statement waits for the Spark Connect server, which runs it.
    pub fn runs_on_spark(&self) {
        lock(&self.statement).on_spark = true;
    }

    pub fn statement(&self) -> StatementActivity {
        lock(&self.statement).clone()
    }

    /// The running (or last) statement's cancel signal.
    pub fn statement_cancellation(&self) -> CancellationToken {
        lock(&self.statement_cancel).clone()
    }

    /// Stops the running statement: it ends with SQLSTATE 57014.
    pub fn cancel_statement(&self) {
        lock(&self.statement_cancel).cancel();
    }

    /// Shows a COPY in `pg_stat_progress_copy` until the returned report is dropped.
    pub fn report_copy(self: &Arc<Self>, relid: i32, command: CopyCommand) -> CopyReport {
        let progress = Arc::new(CopyProgress { relid, command, bytes: AtomicU64::new(0), tuples: AtomicU64::new(0) });
        *lock(&self.copy) = Some(Arc::clone(&progress));
        CopyReport { backend: Arc::clone(self), progress }
    }

    pub fn copy_progress(&self) -> Option<Arc<CopyProgress>> {
        lock(&self.copy).clone()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyCommand {
    From,
    To,
}

impl CopyCommand {
    pub fn name(self) -> &'static str {
        match self {
            CopyCommand::From => "COPY FROM",
            CopyCommand::To => "COPY TO",
        }
    }
}

/// A running COPY's counters, bumped as its data moves and read by other connections.
pub struct CopyProgress {
    /// The table's OID, 0 for a query's rows.
    pub relid: i32,
    pub command: CopyCommand,
    bytes: AtomicU64,
    tuples: AtomicU64,
}

impl CopyProgress {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn tuples(&self) -> u64 {
        self.tuples.load(Ordering::Relaxed)
    }
}

/// A COPY listed in `pg_stat_progress_copy` while this lives.
pub struct CopyReport {
    backend: Arc<Backend>,
    progress: Arc<CopyProgress>,
}

impl CopyReport {
    /// `bytes` more of the COPY's data read or sent, holding `tuples` more rows.
    pub fn processed(&self, bytes: usize, tuples: usize) {
        self.progress.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.progress.tuples.fetch_add(tuples as u64, Ordering::Relaxed);
    }
}

impl Drop for CopyReport {
    fn drop(&mut self) {
        let mut copy = lock(&self.backend.copy);
        if copy.as_ref().is_some_and(|running| Arc::ptr_eq(running, &self.progress)) {
            *copy = None;
        }
    }
}

/// The lists stay consistent under any panic: each update is one assignment.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

const APPLICATION_NAME: &str = "application_name";
/// PostgreSQL's `NAMEDATALEN - 1`: the longest `application_name` shown.
const APPLICATION_NAME_BYTES: usize = 63;

/// PostgreSQL's default `track_activity_query_size`: the longest statement text shown.
const QUERY_TEXT_BYTES: usize = 1024;

/// The longest prefix of `text` within `bytes`, cut at a character boundary.
pub(super) fn truncated(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged_in(backends: &Arc<Backends>, pid: i32) -> (Arc<Backend>, Registration) {
        let backend = Arc::new(Backend::new(None));
        let registration = backends.register(Arc::clone(&backend));
        backend.logged_in(Login { pid, user: "postgres".into(), application_name: String::new() });
        (backend, registration)
    }

    #[test]
    fn a_backend_is_listed_from_login_until_its_registration_drops() {
        let backends = Arc::new(Backends::default());
        let starting = Arc::new(Backend::new(None));
        let _starting = backends.register(Arc::clone(&starting));
        let (_, first) = logged_in(&backends, 7);
        let (_, _second) = logged_in(&backends, 8);
        let pids = |b: &Backends| b.logged_in().iter().map(|b| b.login().unwrap().pid).collect::<Vec<_>>();
        assert_eq!(pids(&backends), [7, 8]);
        drop(first);
        assert_eq!(pids(&backends), [8]);
    }

    #[test]
    fn state_follows_statements_and_transaction_blocks() {
        let backend = Backend::new(None);
        backend.statement_started("BEGIN");
        let begun = backend.statement();
        assert_eq!((begun.state, begun.query.as_str()), (BackendState::Active, "BEGIN"));
        assert_eq!(begun.transaction_start(), begun.query_start);
        backend.ready(BackendState::IdleInTransaction);
        backend.statement_started("SELECT 1");
        backend.ready(BackendState::IdleInTransaction);
        let inside = backend.statement();
        assert_eq!((inside.state, inside.query.as_str()), (BackendState::IdleInTransaction, "SELECT 1"));
        assert_eq!(inside.transaction_start(), begun.query_start);
        backend.statement_started("COMMIT");
        backend.ready(BackendState::Idle);
        let after = backend.statement();
        assert_eq!((after.state, after.transaction_start()), (BackendState::Idle, None));
        let changed = after.state_change;
        backend.ready(BackendState::Idle);
        assert_eq!(backend.statement().state_change, changed, "a state kept is no change");
    }

    #[test]
    fn a_cancel_stops_the_statement_running_and_not_the_next() {
        let backends = Arc::new(Backends::default());
        let (backend, _registration) = logged_in(&backends, 7);
        backend.statement_started("SELECT 1");
        let first = backend.statement_cancellation();
        backends.cancel_statement(8);
        assert!(!first.is_cancelled(), "another backend's pid");
        backends.cancel_statement(7);
        assert!(first.is_cancelled() && backend.statement_cancellation().is_cancelled());
        backend.statement_started("SELECT 2");
        assert!(!backend.statement_cancellation().is_cancelled());
    }

    #[test]
    fn a_copy_is_reported_until_its_report_drops() {
        let backend = Arc::new(Backend::new(None));
        let report = backend.report_copy(16385, CopyCommand::From);
        report.processed(10, 2);
        report.processed(5, 1);
        let progress = backend.copy_progress().unwrap();
        assert_eq!((progress.relid, progress.bytes(), progress.tuples()), (16385, 15, 3));
        drop(report);
        assert!(backend.copy_progress().is_none());
    }

    #[test]
    fn statement_text_is_cut_at_a_character_boundary() {
        assert_eq!(truncated("abc", 10), "abc");
        assert_eq!(truncated("abcdef", 4), "abcd");
        // 'é' is two bytes: a cut inside it falls back before it.
        assert_eq!(truncated("aé", 2), "a");
    }
}

//! `pg_stat_statements`: for each statement text, with its constants replaced by `$n` as
//! PostgreSQL normalises it, how often it ran, how long it took and the rows it returned or
//! wrote; beside PostgreSQL's columns, what bucketing is about: the exchanges its plans ran,
//! the bytes they shuffled and the buckets pruned.
//!
//! As PostgreSQL's extension does, only statements that finish are counted, the number of
//! texts is bounded (`pg_stat_statements.max`; past it the least-called text leaves), and the
//! figures are saved when the server shuts down (to `pg_stat_statements.json` beside the
//! metastore) and read back when it starts: a crash loses what was counted since the start.
//! Each text kept is bounded as the query history's is (64 KiB; its id is the whole text's).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use serde::{Deserialize, Serialize};

use super::activity::{lock, truncated};
use super::history::SQL_TEXT_BYTES;
use crate::explain::analyze::Totals;

/// PostgreSQL's default `pg_stat_statements.max`.
pub const DEFAULT_STATEMENT_STATS_MAX: usize = 5000;

/// The file the figures are saved to, in the data directory.
pub const STATEMENT_STATS_FILE: &str = "pg_stat_statements.json";

/// One normalised statement text's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementEntry {
    /// Who ran it: one entry per user and text, as PostgreSQL keeps one per role.
    pub user: String,
    pub queryid: i64,
    pub query: String,
    pub calls: u64,
    pub total_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Sum of the squares of the durations, for `stddev_exec_time`.
    pub squares_ms: f64,
    pub rows: u64,
    pub exchanges: u64,
    pub bytes_shuffled: u64,
    pub buckets_pruned: u64,
}

impl StatementEntry {
    pub fn mean_ms(&self) -> f64 {
        self.total_ms / self.calls as f64
    }

    /// The population standard deviation, as PostgreSQL reports it.
    pub fn stddev_ms(&self) -> f64 {
        let mean = self.mean_ms();
        (self.squares_ms / self.calls as f64 - mean * mean).max(0.0).sqrt()
    }
}

pub struct StatementStats {
    max: usize,
    file: PathBuf,
    entries: Mutex<HashMap<(String, i64), StatementEntry>>,
}

impl StatementStats {
    /// The figures saved in `data_dir` at the last shutdown, if any, bounded by `max`. A file
    /// that cannot be read is reported and left for a fresh count.
    pub fn open(data_dir: &Path, max: usize) -> Self {
        let file = data_dir.join(STATEMENT_STATS_FILE);
        let saved: Vec<StatementEntry> = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %file.display(), "pg_stat_statements starts empty: its saved figures do not read: {e}");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        let stats = StatementStats { max: max.max(1), file, entries: Mutex::default() };
        let mut entries = lock(&stats.entries);
        for entry in saved {
            entries.insert((entry.user.clone(), entry.queryid), entry);
        }
        drop(entries);
        stats.evict_past_max(None);
        stats
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Counts a finished statement of text `sql` that `user` ran.
    pub fn record(&self, user: &str, sql: &str, duration: Duration, rows: u64, totals: &Totals) {
        let query = normalize(sql);
        // The id is the whole text's; the text kept is bounded as the query history's is.
        let queryid = query_id(&query);
        let query = truncated(&query, SQL_TEXT_BYTES).to_string();
        let key = (user.to_string(), queryid);
        let ms = duration.as_secs_f64() * 1000.0;
        let mut entries = lock(&self.entries);
        let entry = entries.entry(key.clone()).or_insert_with(|| StatementEntry {
            user: user.to_string(),
            queryid,
            query,
            calls: 0,
            total_ms: 0.0,
            min_ms: ms,
            max_ms: ms,
            squares_ms: 0.0,
            rows: 0,
            exchanges: 0,
            bytes_shuffled: 0,
            buckets_pruned: 0,
        });
        entry.calls += 1;
        entry.total_ms += ms;
        entry.min_ms = entry.min_ms.min(ms);
        entry.max_ms = entry.max_ms.max(ms);
        entry.squares_ms += ms * ms;
        entry.rows += rows;
        entry.exchanges += totals.exchanges;
        entry.bytes_shuffled += totals.bytes_shuffled;
        entry.buckets_pruned += totals.buckets_pruned;
        drop(entries);
        self.evict_past_max(Some(&key));
    }

    /// Every text counted, most called first.
    pub fn entries(&self) -> Vec<StatementEntry> {
        let mut entries: Vec<StatementEntry> = lock(&self.entries).values().cloned().collect();
        entries.sort_by(|a, b| b.calls.cmp(&a.calls).then(b.total_ms.total_cmp(&a.total_ms)));
        entries
    }

    /// `pg_stat_statements_reset()`.
    pub fn reset(&self) {
        lock(&self.entries).clear();
    }

    /// Writes the figures to the data directory, whole or not at all (a new file renamed
    /// over the old).
    pub fn save(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec(&self.entries()).map_err(std::io::Error::other)?;
        let partial = self.file.with_extension("json.partial");
        std::fs::write(&partial, json)?;
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, &self.file)
    }

    /// Past `max` texts, the least called leave, but never `kept`: the text just counted.
    fn evict_past_max(&self, kept: Option<&(String, i64)>) {
        let mut entries = lock(&self.entries);
        if entries.len() <= self.max {
            return;
        }
        let mut by_use: Vec<(u64, f64, (String, i64))> = entries
            .iter()
            .filter(|(key, _)| Some(*key) != kept)
            .map(|(key, e)| (e.calls, e.total_ms, key.clone()))
            .collect();
        by_use.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let excess = entries.len() - self.max;
        for (_, _, key) in by_use.into_iter().take(excess) {
            entries.remove(&key);
        }
    }
}

/// `sql` with each constant replaced by `$n`, numbered after the parameters it already has,
/// as `pg_stat_statements` shows a statement: the same statement with other constants is one
/// entry. Text that does not tokenize is kept as it is.
pub fn normalize(sql: &str) -> String {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else { return sql.trim().to_string() };
    let mut next = tokens
        .iter()
        .filter_map(|t| match t {
            Token::Placeholder(p) => p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut text = String::with_capacity(sql.len());
    for token in &tokens {
        match token {
            Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DollarQuotedString(_) => {
                next += 1;
                text.push('$');
                text.push_str(&next.to_string());
            }
            other => text.push_str(&other.to_string()),
        }
    }
    text.trim().trim_end_matches(';').trim_end().to_string()
}

/// A stable 64-bit id of a normalised text (FNV-1a), the same across restarts and builds.
fn query_id(query: &str) -> i64 {
    let hash = query
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    hash as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_become_numbered_parameters_after_the_given_ones() {
        assert_eq!(
            normalize("SELECT * FROM t WHERE k = 42 AND v = 'x' AND w > 1.5;"),
            "SELECT * FROM t WHERE k = $1 AND v = $2 AND w > $3"
        );
        assert_eq!(normalize("SELECT $2 + 7, $1"), "SELECT $2 + $3, $1");
        assert_eq!(normalize("select  a from t"), "select  a from t", "spacing and case stay");
        assert_eq!(query_id(&normalize("SELECT 1")), query_id(&normalize("SELECT 2")));
        assert_ne!(query_id("SELECT $1"), query_id("SELECT $1 + $2"));
    }

    #[test]
    fn figures_add_up_and_the_least_called_leave_past_max() {
        let dir = tempfile::tempdir().unwrap();
        let stats = StatementStats::open(dir.path(), 2);
        let totals = Totals { exchanges: 2, bytes_shuffled: 100, ..Totals::default() };
        for ms in [10, 30] {
            stats.record("ann", "SELECT 1", Duration::from_millis(ms), 1, &totals);
        }
        stats.record("ann", "SELECT 'a' || 'b'", Duration::from_millis(5), 1, &Totals::default());
        stats.record("bob", "SELECT 3 FROM t", Duration::from_millis(5), 0, &Totals::default());
        let entries = stats.entries();
        assert_eq!(entries.len(), 2);
        let first = &entries[0];
        assert_eq!((first.query.as_str(), first.calls, first.rows), ("SELECT $1", 2, 2));
        assert_eq!((first.total_ms, first.min_ms, first.max_ms, first.mean_ms()), (40.0, 10.0, 30.0, 20.0));
        assert_eq!((first.stddev_ms(), first.exchanges, first.bytes_shuffled), (10.0, 4, 200));
        assert_eq!(
            (entries[1].user.as_str(), entries[1].query.as_str()),
            ("bob", "SELECT $1 FROM t"),
            "the text just counted stays"
        );

        // A long text keeps its own entry and a bounded copy of its text.
        let columns: Vec<String> = (0..SQL_TEXT_BYTES / 4).map(|i| format!("c{i}")).collect();
        let long = |end: &str| format!("SELECT {} FROM {end}", columns.join(", "));
        let wide = StatementStats::open(dir.path(), 10);
        for end in ["a", "b"] {
            wide.record("ann", &long(end), Duration::from_millis(1), 1, &Totals::default());
        }
        let kept = wide.entries();
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|e| e.query.len() == SQL_TEXT_BYTES && e.query.starts_with("SELECT c0, c1")));

        stats.save().unwrap();
        assert_eq!(StatementStats::open(dir.path(), 2).entries(), entries);
        stats.reset();
        assert!(stats.entries().is_empty());
    }
}

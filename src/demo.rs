//! `bucketsql demo`: Spark's table bucketing taught step by step, as a client of a server
//! over the PostgreSQL wire (one the command starts on a temporary data directory, or
//! `--connect URL`). It writes the transactions and accounts `bench` writes, plain, bucketed
//! by `account_id` into 8, 6 and 4 buckets, partitioned by day over buckets and skewed, then
//! runs each step's query under `EXPLAIN ANALYZE` and prints the lines of the plan that tell
//! the story (exchanges, joins, bucketed scans, pruning, adaptive reads), the bucketing notes
//! and what was measured. `--sql` prints the same statements as a script for psql.

use std::fmt::Write as _;

use anyhow::Context;
use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::progress::Phase;
use crate::workload::{accounts_for, create_accounts, create_bucketed_copy, create_transactions};

/// One step of the lesson: a query under some settings, and what to look for.
struct Step {
    title: &'static str,
    /// What the step shows and which lines of its plan show it.
    lesson: &'static str,
    /// `SET` statements the step runs under, after `RESET ALL` undoes the previous step's.
    settings: &'static [&'static str],
    action: Action,
    /// A remark on the outcome that depends on what the plan holds.
    verdict: Option<Verdict>,
}

enum Action {
    /// A query run under `EXPLAIN ANALYZE`: its plan and its measurements.
    Analyze(&'static str),
    /// A query whose rows are the lesson.
    Rows(&'static str),
}

/// Says `seen` when the plan holds `sign`, else `unseen`.
struct Verdict {
    sign: &'static str,
    seen: &'static str,
    unseen: &'static str,
}

/// Broadcasts off, so that a join stays a sort-merge join whatever its tables' sizes.
const NO_BROADCAST: &str = "SET spark.sql.autoBroadcastJoinThreshold = -1";

/// Files, rows, bytes and key range per bucket of the skewed bucketed table, from the
/// metastore and the files' footers.
const SKEWED_BUCKET_SIZES: &str = "SHOW BUCKETS demo_tx_skewed_b8";

const STEPS: &[Step] = &[
    Step {
        title: "A plain join",
        lesson: "demo_tx and demo_acc are not bucketed. A sort-merge join needs each account_id's rows in the \
                 same partition on both sides, so both sides are shuffled: two Exchanges \
                 hashpartitioning(account_id, 200) move every row. Broadcasts are off so that the join \
                 stays a sort-merge join; adaptive execution reads the 200 small partitions coalesced \
                 (AQEShuffleRead). Note the bytes shuffled.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx t JOIN demo_acc a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "Both sides bucketed alike",
        lesson: "demo_tx_b8 and demo_acc_b8 hold the same rows, bucketed by account_id into 8 buckets: bucket i \
                 of one holds the same accounts as bucket i of the other, so the join reads them pair by pair \
                 and shuffles nothing (Bucketed: true, no hashpartitioning Exchange). The one Exchange left, \
                 SinglePartition, gathers the 8 partial counts.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_b8 t JOIN demo_acc_b8 a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "8 buckets against 6",
        lesson: "6 does not divide 8, so the buckets do not line up: demo_acc_b6 is read as a plain table \
                 (Bucketed: false) and shuffled into 8 partitions to meet demo_tx_b8's buckets. Only the \
                 smaller side moves, but a hashpartitioning Exchange is back.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_b8 t JOIN demo_acc_b6 a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "8 buckets against 4",
        lesson: "4 divides 8: bucket i of demo_acc_b4 holds the accounts of buckets i and i+4 of demo_tx_b8. \
                 By default Spark still shuffles demo_acc_b4 into 8 partitions; the bucketing notes say what \
                 would avoid it.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_b8 t JOIN demo_acc_b4 a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "8 buckets against 4, coalesced",
        lesson: "With spark.sql.bucketing.coalesceBucketsInJoin.enabled, demo_tx_b8 is read as 4 buckets \
                 (SelectedBucketsCount: 8 out of 8 (Coalesced to 4)): each task reads buckets i and i+4 and \
                 meets bucket i of demo_acc_b4, and neither side is shuffled. Spark coalesces up to \
                 spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio (4) times fewer buckets.",
        settings: &[NO_BROADCAST, "SET spark.sql.bucketing.coalesceBucketsInJoin.enabled = true"],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_b8 t JOIN demo_acc_b4 a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "A broadcast",
        lesson: "Under spark.sql.autoBroadcastJoinThreshold (10MB, Spark's default) demo_acc is small enough to \
                 send whole to every task: a BroadcastHashJoin whose BroadcastExchange copies the small side, \
                 and the big side is not shuffled at all. Bucketing pays when both sides are too big for this.",
        settings: &["SET spark.sql.autoBroadcastJoinThreshold = 10MB"],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx t JOIN demo_acc a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "Partitions over buckets",
        lesson: "demo_tx_daily is PARTITIONED BY (day), 7 directories, and CLUSTERED BY (account_id) INTO 8 \
                 BUCKETS within each. The filter on day reads one directory (PartitionFilters), the filter on \
                 account_id only the buckets that can hold those accounts, on both sides (SelectedBucketsCount: \
                 2 out of 8): 2 of demo_tx_daily's 56 files. The join of what is left is still bucketed: no \
                 hashpartitioning Exchange.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_daily t JOIN demo_acc_b8 a ON t.account_id = a.account_id \
             WHERE t.day = DATE '2024-01-03' AND t.account_id IN (42, 4242)",
        ),
        verdict: None,
    },
    Step {
        title: "Bucketed history UNION ALL plain current",
        lesson: "A common layout: the history rewritten into buckets now and then (demo_tx_b8), new rows \
                 appended to a plain table (demo_tx_current). Their UNION ALL is not partitioned by account_id, \
                 since only one input is, so joining the union shuffles all of it, history included, into \
                 demo_acc_b8's 8 buckets.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM (SELECT * FROM demo_tx_b8 UNION ALL SELECT * FROM demo_tx_current) t \
             JOIN demo_acc_b8 a ON t.account_id = a.account_id",
        ),
        verdict: None,
    },
    Step {
        title: "Join each part, then UNION ALL",
        lesson: "Joining each part before the union keeps the history's buckets: its join shuffles nothing, and \
                 only the current rows are shuffled, into 8 partitions that meet demo_acc_b8's buckets. Compare \
                 the bytes shuffled with the previous step.",
        settings: &[NO_BROADCAST],
        action: Action::Analyze(
            "SELECT count(*), sum(amount) FROM (\
             SELECT t.amount FROM demo_tx_b8 t JOIN demo_acc_b8 a ON t.account_id = a.account_id \
             UNION ALL \
             SELECT t.amount FROM demo_tx_current t JOIN demo_acc_b8 a ON t.account_id = a.account_id)",
        ),
        verdict: None,
    },
    Step {
        title: "Skew: one hot account in one bucket",
        lesson: "In demo_tx_skewed half of the transactions belong to account 42. Bucketed by account_id \
                 (demo_tx_skewed_b8), all of them are in one bucket: in a bucketed join, the task of that bucket \
                 does half the work alone, and adaptive execution cannot split it, since no shuffle is read.",
        settings: &[],
        action: Action::Rows(SKEWED_BUCKET_SIZES),
        verdict: None,
    },
    Step {
        title: "Skew: adaptive execution splits the hot partition",
        lesson: "Joined as plain tables, account 42's rows are shuffled into one partition. After the shuffle, \
                 adaptive execution sees that partition is over spark.sql.adaptive.skewJoin.skewedPartitionFactor \
                 (5) times the median and over skewedPartitionThresholdInBytes (256MB by default, lowered to the \
                 demo's size here), splits it into pieces of about advisoryPartitionSizeInBytes, and joins each \
                 piece with a copy of the other side's partition: SortMergeJoin(skew=true), AQEShuffleRead \
                 skewed.",
        settings: &[
            NO_BROADCAST,
            "SET spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes = 256KB",
            "SET spark.sql.adaptive.advisoryPartitionSizeInBytes = 256KB",
        ],
        action: Action::Analyze(
            "SELECT count(*), sum(t.amount) FROM demo_tx_skewed t JOIN demo_acc a ON t.account_id = a.account_id",
        ),
        verdict: Some(Verdict {
            sign: "skew=true",
            seen: "the join ran with skew=true: the hot partition was split among several tasks.",
            unseen: "no skew=true: at this size no partition passed the thresholds (try more --rows).",
        }),
    },
];

/// The tables the lesson reads, each with the statement that writes it.
fn tables(rows: u64) -> Vec<(&'static str, String)> {
    let accounts = accounts_for(rows);
    vec![
        ("demo_tx", create_transactions("demo_tx", rows, accounts)),
        ("demo_acc", create_accounts("demo_acc", accounts)),
        ("demo_tx_b8", create_bucketed_copy("demo_tx_b8", "demo_tx", 8)),
        ("demo_acc_b8", create_bucketed_copy("demo_acc_b8", "demo_acc", 8)),
        ("demo_acc_b6", create_bucketed_copy("demo_acc_b6", "demo_acc", 6)),
        ("demo_acc_b4", create_bucketed_copy("demo_acc_b4", "demo_acc", 4)),
        (
            "demo_tx_daily",
            "CREATE TABLE demo_tx_daily USING parquet PARTITIONED BY (day) CLUSTERED BY (account_id) SORTED BY \
             (account_id) INTO 8 BUCKETS AS SELECT tx_id, account_id, amount, \
             date_add(DATE '2024-01-01', CAST(tx_id % 7 AS INT)) AS day FROM demo_tx"
                .to_string(),
        ),
        (
            "demo_tx_current",
            format!(
                "CREATE TABLE demo_tx_current USING parquet AS SELECT tx_id + {rows} AS tx_id, account_id, amount \
                 FROM demo_tx WHERE tx_id % 10 = 0"
            ),
        ),
        (
            "demo_tx_skewed",
            "CREATE TABLE demo_tx_skewed USING parquet AS SELECT tx_id, \
             CASE WHEN tx_id % 2 = 0 THEN CAST(42 AS BIGINT) ELSE account_id END AS account_id, amount FROM demo_tx"
                .to_string(),
        ),
        ("demo_tx_skewed_b8", create_bucketed_copy("demo_tx_skewed_b8", "demo_tx_skewed", 8)),
    ]
}

fn drop_statement(table: &str) -> String {
    format!("DROP TABLE IF EXISTS {table}")
}

/// Lessons are wrapped to this many characters, comment marks aside.
const LESSON_WIDTH: usize = 96;

fn title(rows: u64) -> String {
    format!(
        "bucketsql demo: Spark's bucketing step by step, over {rows} transactions and {} accounts",
        accounts_for(rows)
    )
}

impl Step {
    /// `Step 3 of 11: 8 buckets against 6`, of the step at `index` in `STEPS`.
    fn heading(&self, index: usize) -> String {
        format!("Step {} of {}: {}", index + 1, STEPS.len(), self.title)
    }

    /// What the step sends, in order; the last one's answer is the lesson.
    fn statements(&self) -> Vec<String> {
        let query = match self.action {
            Action::Analyze(query) => format!("EXPLAIN ANALYZE {query}"),
            Action::Rows(query) => query.to_string(),
        };
        std::iter::once("RESET ALL".to_string())
            .chain(self.settings.iter().map(|s| s.to_string()))
            .chain(std::iter::once(query))
            .collect()
    }
}

/// The lesson as a psql script: the tables, then each step with its lesson as comments.
pub fn script(rows: u64) -> String {
    let mut script = format!(
        "-- {}.\n\
         -- Run it with psql, e.g. `bucketsql demo --sql | psql -h 127.0.0.1 -p 5433 -U postgres`.\n\
         -- It replaces the tables named demo_*.\n\n",
        title(rows)
    );
    let _ = writeln!(
        script,
        "-- The lesson's tables: plain, bucketed into 8, 6 and 4 buckets, partitioned by day over buckets, skewed."
    );
    let tables = tables(rows);
    for (table, _) in &tables {
        let _ = writeln!(script, "{};", drop_statement(table));
    }
    for (_, create) in &tables {
        let _ = writeln!(script, "{create};");
    }
    for (index, step) in STEPS.iter().enumerate() {
        let _ = writeln!(script, "\n-- {}", step.heading(index));
        for line in wrap(step.lesson, LESSON_WIDTH) {
            let _ = writeln!(script, "-- {line}");
        }
        for statement in step.statements() {
            let _ = writeln!(script, "{statement};");
        }
    }
    script
}

/// Runs the lesson against the server at `url` (`postgres://user@host:port/`).
pub async fn run(url: &str, rows: u64) -> anyhow::Result<()> {
    let (client, connection) =
        tokio_postgres::connect(url, NoTls).await.with_context(|| format!("cannot connect to {url}"))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("connection to the server ended: {error}");
        }
    });
    println!("{}", title(rows));
    let tables = tables(rows);
    for (table, _) in &tables {
        client.simple_query(&drop_statement(table)).await?;
    }
    let mut phase = Phase::start("write", tables.len() as u64);
    for (table, create) in &tables {
        phase.begin(*table);
        let written = rows_written(&client.simple_query(create).await?);
        phase.end(&format!("{written} rows"));
    }
    phase.finish();

    for (index, step) in STEPS.iter().enumerate() {
        println!("\n== {} ==", step.heading(index));
        for line in wrap(step.lesson, LESSON_WIDTH) {
            println!("{line}");
        }
        println!();
        let mut answer = Vec::new();
        for statement in step.statements() {
            println!("  {statement};");
            answer = client.simple_query(&statement).await?;
        }
        println!();
        match step.action {
            Action::Analyze(_) => {
                let text = first_value(&answer).ok_or_else(|| anyhow::anyhow!("EXPLAIN ANALYZE returned no plan"))?;
                print!("{}", AnalyzedPlan::read(text).summary());
                if let Some(verdict) = &step.verdict {
                    println!("{}", if text.contains(verdict.sign) { verdict.seen } else { verdict.unseen });
                }
            }
            Action::Rows(_) => print!("{}", table_text(&answer)),
        }
    }
    Ok(())
}

/// The row count of a `CREATE TABLE … AS` or `INSERT`.
fn rows_written(messages: &[SimpleQueryMessage]) -> u64 {
    messages
        .iter()
        .map(|m| match m {
            SimpleQueryMessage::CommandComplete(rows) => *rows,
            _ => 0,
        })
        .sum()
}

/// The first column of the first row: the text of an EXPLAIN.
fn first_value(messages: &[SimpleQueryMessage]) -> Option<&str> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    })
}

/// Rows as an aligned table under their column names.
fn table_text(messages: &[SimpleQueryMessage]) -> String {
    let mut lines: Vec<Vec<String>> = Vec::new();
    for message in messages {
        if let SimpleQueryMessage::Row(row) = message {
            if lines.is_empty() {
                lines.push(row.columns().iter().map(|c| c.name().to_string()).collect());
            }
            lines.push((0..row.len()).map(|i| row.get(i).unwrap_or("NULL").to_string()).collect());
        }
    }
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..columns).map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let mut text = String::new();
    for line in &lines {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(cell, width)| format!("{cell:>width$}")).collect();
        let _ = writeln!(text, "  {}", cells.join("  "));
    }
    text
}

/// The parts of an `EXPLAIN ANALYZE` a step shows.
struct AnalyzedPlan<'a> {
    /// Each operator's `(n) Name` line and the lines under it, of the plan that ran.
    nodes: Vec<(&'a str, Vec<&'a str>)>,
    /// `== Extended Information (Bucketing) ==`: why each exchange is there, why a scan is not
    /// bucketed, what adaptive execution did.
    bucketing: Vec<&'a str>,
    /// `== Advice (Bucketing) ==`: what would remove an exchange or serve the buckets better.
    advice: Vec<&'a str>,
    metrics: Vec<&'a str>,
}

/// Operators that say where rows move, how tables are read and how they are joined.
const TELLING_OPERATORS: &[&str] = &[
    "Scan",
    "Exchange",
    "BroadcastExchange",
    "ReusedExchange",
    "AQEShuffleRead",
    "Union",
    "SortMergeJoin",
    "ShuffledHashJoin",
    "BroadcastHashJoin",
    "BroadcastNestedLoopJoin",
    "CartesianProduct",
];

/// Lines under an operator that carry the lesson, each with whether its label is kept: it is
/// dropped where the operator's name says enough (`Arguments: ` of an Exchange is its
/// partitioning).
const TELLING_DETAILS: &[(&str, bool)] = &[
    ("Arguments: ", false),
    ("Join type: ", false),
    ("Bucketed: ", true),
    ("PartitionFilters: ", true),
    ("SelectedBucketsCount: ", true),
];

impl<'a> AnalyzedPlan<'a> {
    fn read(text: &'a str) -> Self {
        let mut sections = text.split("\n\n").map(str::trim).filter(|s| !s.is_empty());
        // The tree comes first; under adaptive execution its final plan comes before the
        // initial one, whose operators are not the ones that ran.
        let tree = sections.next().unwrap_or_default();
        let ran = tree.split("== Initial Plan ==").next().unwrap_or_default();
        let ran_ids: Vec<&str> = ran.lines().filter_map(operator_id).collect();
        let mut plan =
            AnalyzedPlan { nodes: Vec::new(), bucketing: Vec::new(), advice: Vec::new(), metrics: Vec::new() };
        for section in sections {
            let mut lines = section.lines();
            let first = lines.next().unwrap_or_default();
            let notes = if first.starts_with("== Extended Information (Bucketing) ==") {
                Some(&mut plan.bucketing)
            } else if first.starts_with("== Advice (Bucketing) ==") {
                Some(&mut plan.advice)
            } else {
                None
            };
            if let Some(notes) = notes {
                notes.extend(lines.take_while(|l| !l.starts_with("== ")));
                if let Some(metrics) = section.split_once("== Metrics ==") {
                    plan.metrics.extend(metrics.1.lines().filter(|l| !l.is_empty()));
                }
            } else if first.starts_with("== Metrics ==") {
                plan.metrics.extend(lines);
            } else if first.starts_with('(')
                && first.split_once(") ").is_some_and(|(id, _)| ran_ids.contains(&&id[1..]))
            {
                plan.nodes.push((first, lines.collect()));
            }
        }
        plan
    }

    /// The telling operators with their telling lines, the bucketing notes and what was
    /// measured, as a step prints them.
    fn summary(&self) -> String {
        let mut text = String::from("plan:\n");
        for (header, details) in &self.nodes {
            // `(15) SortMergeJoin(skew=true) [codegen id : 5]` → `(15) SortMergeJoin(skew=true)`
            let header = header.split(" [codegen id").next().unwrap_or(header);
            let name = header.split_once(") ").map_or("", |(_, name)| name);
            if !TELLING_OPERATORS.iter().any(|op| name.starts_with(op)) {
                continue;
            }
            let details: Vec<&str> = details
                .iter()
                .filter_map(|line| {
                    TELLING_DETAILS
                        .iter()
                        .find_map(|(label, keep)| line.strip_prefix(label).map(|rest| if *keep { *line } else { rest }))
                })
                .collect();
            if details.is_empty() {
                let _ = writeln!(text, "  {header}");
            } else {
                let _ = writeln!(text, "  {header}: {}", details.join("; "));
            }
        }
        for (heading, lines) in [("bucketing", &self.bucketing), ("advice", &self.advice)] {
            if !lines.is_empty() {
                let _ = writeln!(text, "{heading}:");
                for line in lines {
                    let _ = writeln!(text, "  {line}");
                }
            }
        }
        text.push_str("measured:\n");
        text.push_str(&self.measured());
        text
    }

    /// Time and rows returned, rows and bytes shuffled, rows and files the scans read.
    fn measured(&self) -> String {
        let sum = |operator: &str, metric: &str| -> u64 {
            self.metrics
                .iter()
                .filter(|l| l.trim_start().starts_with(operator))
                .filter_map(|l| metric_value(l, metric))
                .sum()
        };
        let returned = self.metrics.first().copied().unwrap_or_default();
        let shuffled = self.metrics.iter().find(|l| l.starts_with("bytes shuffled")).copied().unwrap_or_default();
        format!(
            "  {returned}\n  {shuffled} ({} rows)\n  scans: {} rows from {} files\n",
            sum("ShuffleExchangeExec:", "rows shuffled"),
            sum("FileSourceScanExec:", "output rows"),
            sum("FileSourceScanExec:", "files read"),
        )
    }
}

/// `5` of a plan tree line such as `:  +- ShuffleQueryStage (5), Statistics(…)`.
fn operator_id(line: &str) -> Option<&str> {
    line.match_indices(" (").find_map(|(at, _)| {
        let rest = &line[at + 2..];
        let id = &rest[..rest.find(')')?];
        (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
    })
}

/// The number after `metric ` in a metrics line such as `FileSourceScanExec: output rows 14286, files read 8`.
fn metric_value(line: &str, metric: &str) -> Option<u64> {
    let after = &line[line.find(&format!("{metric} "))? + metric.len() + 1..];
    after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

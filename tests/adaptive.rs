//! Adaptive query execution over the wire: the decisions Spark's `AdaptiveSparkPlanExec` makes
//! once stages have run — coalesced shuffle partitions, a sort-merge join turned into a
//! broadcast hash join, a skewed partition split, bucketed joins left alone — each checked in
//! EXPLAIN ANALYZE and in the rows, against the same query without adaptive execution and
//! against what the generating formulas give. Then the final plans of Spark 4.3's examples
//! (`tests/data/spark-plans-aqe-4.3.0.txt`, real Spark output) on the same tables at a tenth
//! of their size: same operators, tree, stages and reads.

use tokio_postgres::Client;

use crate::common::{TestServer, text_rows};

/// Rows of `tx_plain` and friends: a tenth of the examples' 200000.
const ROWS: i64 = 20_000;
/// Accounts: a tenth of the examples' 5000.
const ACCOUNTS: i64 = 500;

/// The examples' tables at a tenth of their size; `skewed` is written in two statements so
/// that its scan has two map tasks (a skewed partition is split by map task).
fn setup() -> String {
    format!(
        "CREATE TABLE tx8 (account_id BIGINT, amount DOUBLE) USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO 8 BUCKETS;
         INSERT INTO tx8 SELECT id % {ACCOUNTS}, CAST(id AS DOUBLE) FROM range({ROWS});
         CREATE TABLE acc8 (account_id BIGINT, name STRING) USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO 8 BUCKETS;
         INSERT INTO acc8 SELECT id, concat('n', CAST(id AS STRING)) FROM range({ACCOUNTS});
         CREATE TABLE acc4 (account_id BIGINT, name STRING) USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO 4 BUCKETS;
         INSERT INTO acc4 SELECT id, concat('n', CAST(id AS STRING)) FROM range({ACCOUNTS});
         CREATE TABLE tx_plain (account_id BIGINT, amount DOUBLE) USING parquet;
         INSERT INTO tx_plain SELECT id % {ACCOUNTS}, CAST(id AS DOUBLE) FROM range({ROWS});
         CREATE TABLE acc_plain (account_id BIGINT, name STRING) USING parquet;
         INSERT INTO acc_plain SELECT id, concat('n', CAST(id AS STRING)) FROM range({ACCOUNTS});
         CREATE TABLE skewed (account_id BIGINT, amount DOUBLE) USING parquet;
         INSERT INTO skewed SELECT CASE WHEN id % 10 < 7 THEN 1 ELSE id % {ACCOUNTS} END, CAST(id AS DOUBLE) FROM range({half});
         INSERT INTO skewed SELECT CASE WHEN id % 10 < 7 THEN 1 ELSE id % {ACCOUNTS} END, CAST(id AS DOUBLE) FROM range({half}, {ROWS});",
        half = ROWS / 2
    )
}

/// The account of row `id` of `tx_plain` and `tx8`, and of `skewed`.
fn account(id: i64) -> i64 {
    id % ACCOUNTS
}

fn skewed_account(id: i64) -> i64 {
    if id % 10 < 7 { 1 } else { id % ACCOUNTS }
}

async fn start() -> (TestServer, Client) {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute(&setup()).await.unwrap();
    (server, client)
}

async fn set(client: &Client, settings: &[&str]) {
    client.batch_execute("RESET").await.unwrap();
    for setting in settings {
        client.batch_execute(&format!("SET {setting}")).await.unwrap();
    }
}

async fn plan(client: &Client, sql: &str) -> String {
    let rows = text_rows(client, sql).await;
    assert_eq!(rows.len(), 1, "EXPLAIN returns one row: {rows:?}");
    rows[0][0].clone()
}

/// The rows of `query` with adaptive execution on (under `settings`) and off, which must agree.
async fn rows_both_ways(client: &Client, settings: &[&str], query: &str) -> Vec<Vec<String>> {
    set(client, settings).await;
    let adaptive = text_rows(client, query).await;
    client.batch_execute("SET spark.sql.adaptive.enabled = false").await.unwrap();
    let static_plan = text_rows(client, query).await;
    assert_eq!(adaptive, static_plan, "{query} under {settings:?}");
    adaptive
}

/// The figure `partitions read N …` of each adaptive read in EXPLAIN ANALYZE's metrics.
fn partitions_read(analyzed: &str) -> Vec<usize> {
    analyzed
        .lines()
        .filter_map(|line| line.split("partitions read ").nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_decisions_and_their_rows() {
    let (_server, client) = start().await;
    let sum_of_ids = (0..ROWS).sum::<i64>();

    // A sort-merge join at 200 shuffle partitions reads them coalesced.
    let no_broadcast = ["spark.sql.autoBroadcastJoinThreshold = -1"];
    let join = "SELECT count(*), sum(t.amount) FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id";
    set(&client, &no_broadcast).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {join}")).await;
    assert!(analyzed.contains("AdaptiveSparkPlan (") && analyzed.contains("Arguments: isFinalPlan=true"), "{analyzed}");
    assert_eq!(analyzed.matches("AQEShuffleRead (").count(), 2, "{analyzed}");
    assert!(analyzed.contains("), coalesced\n"), "{analyzed}");
    let read = partitions_read(&analyzed);
    assert!(
        read.len() == 2 && read[0] == read[1] && read[0] < 200,
        "both sides read alike, coalesced: {read:?}\n{analyzed}"
    );
    assert!(analyzed.contains("At run time adaptive execution coalesced its 200 partitions into"), "{analyzed}");
    let rows = rows_both_ways(&client, &no_broadcast, join).await;
    assert_eq!(rows, vec![vec![ROWS.to_string(), sum_of_ids.to_string()]]);

    // Coalesced, the join sorts and joins the shuffle partitions of each read one by one, in
    // key order within each only: the same rows, in another order.
    assert!(analyzed.contains("shuffle partitions joined one by one "), "{analyzed}");
    let pairs = "SELECT t.amount, a.name FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id";
    set(&client, &no_broadcast).await;
    let mut adaptive = text_rows(&client, pairs).await;
    client.batch_execute("SET spark.sql.adaptive.enabled = false").await.unwrap();
    let mut static_plan = text_rows(&client, pairs).await;
    let mut expected: Vec<Vec<String>> =
        (0..ROWS).map(|id| vec![id.to_string(), format!("n{}", account(id))]).collect();
    for rows in [&mut adaptive, &mut static_plan, &mut expected] {
        rows.sort();
    }
    assert_eq!(adaptive, expected);
    assert_eq!(static_plan, expected);

    // A semi join and an anti join above it, on the same key: both take the shuffle partitions
    // one by one, the anti join merging each of the semi join's with its own other side.
    let chained = "SELECT a.account_id FROM acc_plain a \
                   WHERE EXISTS (SELECT 1 FROM tx_plain t WHERE t.account_id = a.account_id AND t.amount < 5000 \
                                 AND t.amount > a.account_id * 30) \
                   AND NOT EXISTS (SELECT 1 FROM tx_plain t WHERE t.account_id = a.account_id AND t.amount >= 19900) \
                   ORDER BY a.account_id";
    set(&client, &no_broadcast).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {chained}")).await;
    assert!(analyzed.contains("SortMergeJoin LeftAnti") && analyzed.contains("SortMergeJoin LeftSemi"), "{analyzed}");
    let joined_apart = analyzed.lines().filter(|l| l.contains("shuffle partitions joined one by one ")).count();
    assert_eq!(joined_apart, 2, "{analyzed}");
    let rows = rows_both_ways(&client, &no_broadcast, chained).await;
    let tx = || (0..ROWS).map(|id| (account(id), id as f64));
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .filter(|&a| tx().any(|(acc, amount)| acc == a && amount < 5000.0 && amount > (a * 30) as f64))
        .filter(|&a| !tx().any(|(acc, amount)| acc == a && amount >= 19900.0))
        .map(|a| vec![a.to_string()])
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(rows, expected);

    // Rows themselves, in order: the final plan's single partition keeps the ORDER BY.
    let listed = "SELECT t.amount, a.name FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id \
                  WHERE t.amount < 1500 ORDER BY t.amount";
    let rows = rows_both_ways(&client, &no_broadcast, listed).await;
    let expected: Vec<Vec<String>> = (0..1500).map(|id| vec![id.to_string(), format!("n{}", account(id))]).collect();
    assert_eq!(rows, expected);

    // A side small at run time (its file is not) is broadcast: the sort-merge join becomes a
    // broadcast hash join reading both stages locally.
    let runtime_broadcast =
        ["spark.sql.autoBroadcastJoinThreshold = -1", "spark.sql.adaptive.autoBroadcastJoinThreshold = 100KB"];
    let small_side = "SELECT count(*) FROM tx_plain t JOIN (SELECT * FROM tx_plain WHERE amount < 200) s ON t.account_id = s.account_id";
    set(&client, &runtime_broadcast).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {small_side}")).await;
    let final_plan = analyzed.split("+- == Initial Plan ==").next().unwrap();
    assert!(
        final_plan.contains("BroadcastHashJoin Inner BuildRight") && !final_plan.contains("SortMergeJoin"),
        "{analyzed}"
    );
    assert!(
        final_plan.contains("BroadcastQueryStage (") && final_plan.contains("+- BroadcastExchange ("),
        "{analyzed}"
    );
    assert_eq!(final_plan.matches("), local\n").count(), 2, "{analyzed}");
    assert!(analyzed.contains("SortMergeJoin Inner"), "the initial plan keeps the sort-merge join: {analyzed}");
    let rows = rows_both_ways(&client, &runtime_broadcast, small_side).await;
    let expected = (0..ROWS).filter(|id| account(*id) < 200).count();
    assert_eq!(rows, vec![vec![expected.to_string()]]);

    // A side that is tiny but sits in few partitions keeps the sort-merge join.
    let tiny_side = "SELECT count(*) FROM tx_plain t JOIN (SELECT * FROM tx_plain WHERE amount < 10) s ON t.account_id = s.account_id";
    set(&client, &runtime_broadcast).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {tiny_side}")).await;
    let final_plan = analyzed.split("+- == Initial Plan ==").next().unwrap();
    assert!(final_plan.contains("SortMergeJoin Inner") && !final_plan.contains("BroadcastHashJoin"), "{analyzed}");
    let rows = rows_both_ways(&client, &runtime_broadcast, tiny_side).await;
    let expected = (0..ROWS).filter(|id| account(*id) < 10).count();
    assert_eq!(rows, vec![vec![expected.to_string()]]);

    // One key holds 70% of `skewed`: its partition is split, the other side read per piece.
    let skew = [
        "spark.sql.autoBroadcastJoinThreshold = -1",
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes = 10KB",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes = 10KB",
    ];
    let skewed_join = "SELECT count(*), sum(a.amount) FROM skewed a JOIN tx_plain b ON a.account_id = b.account_id";
    set(&client, &skew).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {skewed_join}")).await;
    assert!(analyzed.contains("SortMergeJoin(skew=true) Inner"), "{analyzed}");
    assert!(
        analyzed.contains("), coalesced and skewed\n") && analyzed.contains("Arguments: coalesced and skewed"),
        "{analyzed}"
    );
    let read = partitions_read(&analyzed);
    assert!(read.len() == 2 && read[0] == read[1], "the pieces pair up: {read:?}\n{analyzed}");
    let rows = rows_both_ways(&client, &skew, skewed_join).await;
    let mut tx_rows_of = vec![0i64; ACCOUNTS as usize];
    (0..ROWS).for_each(|id| tx_rows_of[account(id) as usize] += 1);
    let (count, sum) = (0..ROWS).fold((0i64, 0i64), |(count, sum), id| {
        let matches = tx_rows_of[skewed_account(id) as usize];
        (count + matches, sum + matches * id)
    });
    assert_eq!(rows, vec![vec![count.to_string(), sum.to_string()]]);

    // Tables bucketed alike need no shuffle: nothing to adapt but the final gather.
    let bucketed = "SELECT count(*), sum(t.amount) FROM tx8 t JOIN acc8 a ON t.account_id = a.account_id";
    set(&client, &no_broadcast).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {bucketed}")).await;
    assert!(!analyzed.contains("AQEShuffleRead") && !analyzed.contains("hashpartitioning"), "{analyzed}");
    assert_eq!(analyzed.matches("SelectedBucketsCount: 8 out of 8\n").count(), 2, "{analyzed}");
    let rows = rows_both_ways(&client, &no_broadcast, bucketed).await;
    assert_eq!(rows, vec![vec![ROWS.to_string(), sum_of_ids.to_string()]]);

    // 8 buckets joined with 4, coalesced in the scan, keep working under adaptive execution.
    let coalesce_buckets =
        ["spark.sql.autoBroadcastJoinThreshold = -1", "spark.sql.bucketing.coalesceBucketsInJoin.enabled = true"];
    let eight_and_four = "SELECT count(*), sum(t.amount) FROM tx8 t JOIN acc4 a ON t.account_id = a.account_id";
    set(&client, &coalesce_buckets).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {eight_and_four}")).await;
    assert!(analyzed.contains("SelectedBucketsCount: 8 out of 8 (Coalesced to 4)"), "{analyzed}");
    assert!(!analyzed.contains("AQEShuffleRead") && !analyzed.contains("hashpartitioning"), "{analyzed}");
    let rows = rows_both_ways(&client, &coalesce_buckets, eight_and_four).await;
    assert_eq!(rows, vec![vec![ROWS.to_string(), sum_of_ids.to_string()]]);

    // A grouped top 5 reads its coalesced partitions.
    let top = "SELECT account_id, sum(amount) AS s FROM tx_plain GROUP BY account_id ORDER BY s DESC LIMIT 5";
    set(&client, &[]).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {top}")).await;
    assert!(analyzed.contains("AQEShuffleRead (6), coalesced"), "{analyzed}");
    assert!(partitions_read(&analyzed).first().is_some_and(|n| *n < 200), "{analyzed}");
    let rows = rows_both_ways(&client, &[], top).await;
    let mut sums: Vec<(i64, i64)> =
        (0..ACCOUNTS).map(|a| (a, (0..ROWS).filter(|id| account(*id) == a).sum::<i64>())).collect();
    sums.sort_by_key(|(_, sum)| std::cmp::Reverse(*sum));
    let expected: Vec<Vec<String>> = sums.iter().take(5).map(|(a, s)| vec![a.to_string(), s.to_string()]).collect();
    assert_eq!(rows, expected);

    // A scalar subquery's value is known before the stage that compares with it runs.
    let above_subquery = "SELECT account_id, count(*) FROM tx_plain WHERE amount >= (SELECT max(amount) - 99 FROM tx_plain) \
                          GROUP BY account_id ORDER BY account_id";
    let rows = rows_both_ways(&client, &[], above_subquery).await;
    let mut expected: Vec<Vec<String>> =
        (ROWS - 100..ROWS).map(|id| vec![account(id).to_string(), "1".to_string()]).collect();
    expected.sort_by_key(|row| row[0].parse::<i64>().unwrap());
    assert_eq!(rows, expected);
}

/// Each figure `name N` in EXPLAIN ANALYZE's metrics, with the line before its line.
fn figures_after<'a>(analyzed: &'a str, name: &str) -> Vec<(&'a str, u64)> {
    let lines: Vec<&str> = analyzed.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.split(&format!("{name} ")).nth(1)?;
            let value = rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
            Some((*lines.get(i.checked_sub(1)?)?, value))
        })
        .collect()
}

/// A query under runtime filters at any scan size and without them: the same final plan as
/// EXPLAIN ANALYZE prints it (statistics aside) and the same rows; returns the rows and the
/// filtered run's EXPLAIN ANALYZE.
async fn with_and_without_runtime_filters(client: &Client, query: &str) -> (Vec<Vec<String>>, String) {
    let no_broadcast = "spark.sql.autoBroadcastJoinThreshold = -1";
    set(client, &[no_broadcast, "bucketsql.runtimeFilter.applicationSideScanSizeThreshold = 0"]).await;
    let filtered_plan = plan(client, &format!("EXPLAIN ANALYZE {query}")).await;
    let filtered = text_rows(client, query).await;
    set(client, &[no_broadcast, "bucketsql.runtimeFilter.enabled = false"]).await;
    let unfiltered_plan = plan(client, &format!("EXPLAIN ANALYZE {query}")).await;
    let unfiltered = text_rows(client, query).await;
    assert_eq!(outline(&filtered_plan), outline(&unfiltered_plan), "{query}");
    assert!(!unfiltered_plan.contains("RuntimeFilterExec"), "{unfiltered_plan}");
    assert_eq!(filtered, unfiltered, "{query}");
    (filtered, filtered_plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_filters_drop_early_the_rows_a_join_drops() {
    let (_server, client) = start().await;
    // The accounts named `n1…`: 1, 10-19 and 100-199.
    let selected = |a: i64| a.to_string().starts_with('1');
    let selected_rows = (0..ROWS).filter(|&id| selected(account(id))).count() as u64;

    // A side aggregated by the key: the filter sits below its partial aggregate.
    let totals = "SELECT a.account_id, s.n, s.total FROM acc_plain a \
                  JOIN (SELECT account_id, count(*) AS n, sum(CAST(amount AS BIGINT)) AS total FROM tx_plain GROUP BY account_id) s \
                  ON s.account_id = a.account_id WHERE a.name LIKE 'n1%' ORDER BY a.account_id";
    let (rows, analyzed) = with_and_without_runtime_filters(&client, totals).await;
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .filter(|&a| selected(a))
        .map(|a| {
            let ids: Vec<i64> = (0..ROWS).filter(|&id| account(id) == a).collect();
            vec![a.to_string(), ids.len().to_string(), ids.iter().sum::<i64>().to_string()]
        })
        .collect();
    assert_eq!(rows, expected);
    let gathered = figures_after(&analyzed, "join keys gathered");
    assert_eq!(gathered.iter().map(|(_, n)| n).sum::<u64>(), expected.len() as u64, "{analyzed}");
    let dropped = figures_after(&analyzed, "rows dropped by the other side's keys");
    assert!(
        matches!(dropped.as_slice(), [(above, n)] if above.contains("HashAggregateExec") && *n > (ROWS as u64 - selected_rows) / 2
            && *n <= ROWS as u64 - selected_rows),
        "below the partial aggregate, no matching row dropped: {dropped:?}\n{analyzed}"
    );
    assert!(!analyzed.split("== Metrics ==").next().unwrap().contains("RuntimeFilter"), "{analyzed}");

    // The same aggregate joined twice is one stage read twice (`ReusedExchange`), as in
    // Spark's plan: neither is filtered, by keys the other's join would not drop.
    let twice = "SELECT a.account_id, s.n FROM acc_plain a \
                 JOIN (SELECT account_id, count(*) AS n FROM tx_plain GROUP BY account_id) s \
                 ON s.account_id = a.account_id WHERE a.name LIKE 'n1%' \
                 UNION ALL SELECT b.account_id, s.n FROM acc_plain b \
                 JOIN (SELECT account_id, count(*) AS n FROM tx_plain GROUP BY account_id) s \
                 ON s.account_id = b.account_id WHERE b.name LIKE 'n2%' ORDER BY 1";
    let (rows, analyzed) = with_and_without_runtime_filters(&client, twice).await;
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .filter(|&a| selected(a) || a.to_string().starts_with('2'))
        .map(|a| vec![a.to_string(), (0..ROWS).filter(|&id| account(id) == a).count().to_string()])
        .collect();
    assert_eq!(rows, expected);
    assert!(analyzed.contains("ReusedExchange ("), "{analyzed}");
    assert!(figures_after(&analyzed, "rows dropped by the other side's keys").is_empty(), "{analyzed}");

    // A side with no aggregate: the filter sits right below its exchange. The left side of a
    // left outer join keeps every row, so only its right side can be filtered.
    let joined = "SELECT count(*), sum(CAST(t.amount AS BIGINT)) FROM tx_plain t JOIN acc_plain a \
                  ON t.account_id = a.account_id WHERE a.name LIKE 'n1%'";
    let (rows, analyzed) = with_and_without_runtime_filters(&client, joined).await;
    let ids = (0..ROWS).filter(|&id| selected(account(id)));
    assert_eq!(rows, vec![vec![selected_rows.to_string(), ids.sum::<i64>().to_string()]]);
    let dropped = figures_after(&analyzed, "rows dropped by the other side's keys");
    assert!(
        matches!(dropped.as_slice(), [(above, n)] if above.contains("ShuffleExchangeExec") && *n > 0),
        "{dropped:?}\n{analyzed}"
    );
    let outer = "SELECT t.account_id, count(a.name) FROM tx_plain t LEFT JOIN acc_plain a \
                 ON t.account_id = a.account_id AND a.name LIKE 'n1%' WHERE t.amount < 1000 \
                 GROUP BY t.account_id ORDER BY t.account_id";
    let (rows, analyzed) = with_and_without_runtime_filters(&client, outer).await;
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .map(|a| {
            let n = (0..1000).filter(|&id| account(id) == a).count();
            vec![a.to_string(), if selected(a) { n } else { 0 }.to_string()]
        })
        .filter(|row| (0..1000).any(|id| account(id).to_string() == row[0]))
        .collect();
    assert_eq!(rows, expected);
    assert!(figures_after(&analyzed, "rows dropped by the other side's keys").is_empty(), "{analyzed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_settings_at_200_partitions_give_the_rows() {
    let (_server, client) = start().await;
    // Every setting at its default: small tables broadcast as planned, the rest at 200
    // shuffle partitions, adapted.
    let query = "SELECT a.name, count(*), sum(t.amount) FROM tx_plain t JOIN acc_plain a ON t.account_id = a.account_id \
                 GROUP BY a.name ORDER BY a.name";
    let rows = rows_both_ways(&client, &[], query).await;
    let mut expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .map(|a| {
            let ids: Vec<i64> = (0..ROWS).filter(|id| account(*id) == a).collect();
            vec![format!("n{a}"), ids.len().to_string(), ids.iter().sum::<i64>().to_string()]
        })
        .collect();
    expected.sort();
    assert_eq!(rows, expected);
    // The same with the sort-merge join the examples use.
    let rows = rows_both_ways(&client, &["spark.sql.autoBroadcastJoinThreshold = -1"], query).await;
    assert_eq!(rows, expected);
}

/// One example of the examples file.
struct Example {
    title: String,
    settings: Vec<(String, String)>,
    query: String,
    before: String,
    after: String,
}

fn examples() -> Vec<Example> {
    let text = include_str!("data/spark-plans-aqe-4.3.0.txt");
    text.split("\n### ")
        .skip(1)
        .map(|section| {
            let mut lines = section.lines();
            let title = lines.next().unwrap_or_default().to_string();
            let settings_line = lines.next().unwrap_or_default().trim_start_matches("-- settings: ");
            let settings = settings_line
                .trim_matches(|c| c == '{' || c == '}')
                .split(", ")
                .filter_map(|pair| pair.split_once(": "))
                .map(|(k, v)| (k.trim_matches('\'').to_string(), v.trim_matches('\'').to_string()))
                .collect();
            let query = lines.next().unwrap_or_default().trim_start_matches("-- ").to_string();
            let rest: String = lines.collect::<Vec<_>>().join("\n");
            let (before, after) = rest.split_once("--- after collect()").unwrap_or_default();
            Example { title, settings, query, before: before.to_string(), after: after.to_string() }
        })
        .collect()
}

/// The settings an example ran with, for a tenth of its data: the skew split's sizes a tenth
/// too. Spark's broadcast threshold (300KB) lies between the examples' filtered sides (2000 and
/// 10 rows, whatever the table's size) and the whole `tx_plain`; here it is 100KB, between the
/// same sides and a tenth of `tx_plain`, and applies to measured sizes only
/// (`spark.sql.adaptive.autoBroadcastJoinThreshold`), since a tenth of `tx_plain` is under it on
/// disk where Spark's whole table was not.
fn scaled(settings: &[(String, String)]) -> Vec<String> {
    settings
        .iter()
        .flat_map(|(key, value)| match (key.as_str(), value.strip_suffix("KB").and_then(|kb| kb.parse::<u64>().ok())) {
            ("spark.sql.autoBroadcastJoinThreshold", Some(_)) => {
                vec![format!("{key} = -1"), "spark.sql.adaptive.autoBroadcastJoinThreshold = 100KB".to_string()]
            }
            (_, Some(kb)) => vec![format!("{key} = {}KB", kb / 10)],
            _ => vec![format!("{key} = {value}")],
        })
        .collect()
}

/// The outline of a FORMATTED plan, statistics left out (sizes differ: Spark's are of its
/// row format, ours of Arrow's).
pub fn outline(plan: &str) -> Vec<String> {
    outline_with_statistics(plan, |_| false)
}

/// The outline, keeping the statistics of the lines `keep` picks.
pub fn outline_with_statistics(plan: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
    plan.lines()
        .skip_while(|line| !line.starts_with("== Physical Plan =="))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| if keep(line) { line } else { line.split(", Statistics(").next().unwrap_or(line) }.to_string())
        .collect()
}

/// Whether our outline is Spark's. Where we differ: an ORDER BY merges sorted partitions
/// (`SortPreservingMerge`), which shifts the tree; then the operators must agree, in order.
fn same_outline(ours: &[String], spark: &[String]) -> bool {
    let merges = |plan: &[String]| plan.iter().any(|l| l.contains("SortPreservingMerge"));
    if !merges(ours) || merges(spark) {
        return ours == spark;
    }
    let operators = |plan: &[String]| -> Vec<String> {
        plan.iter()
            .filter(|l| !l.contains("SortPreservingMerge"))
            .map(|l| l.trim_start_matches([' ', ':', '+', '-', '*']).split(" (").next().unwrap_or_default().to_string())
            .collect()
    };
    operators(ours) == operators(spark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_example_final_plans_are_reproduced() {
    let (_server, client) = start().await;
    let examples = examples();
    assert_eq!(examples.len(), 8, "every example is read");
    let mut mismatches = Vec::new();
    for example in examples {
        let settings = scaled(&example.settings);
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        set(&client, &settings).await;
        let before = plan(&client, &format!("EXPLAIN FORMATTED {}", example.query)).await;
        let after = plan(&client, &format!("EXPLAIN ANALYZE {}", example.query)).await;
        for (when, spark, ours) in
            [("before running", &example.before, &before), ("after running", &example.after, &after)]
        {
            if !same_outline(&outline(ours), &outline(spark)) {
                mismatches.push(format!(
                    "=== {} ({when})\nexpected:\n{}\nactual:\n{ours}",
                    example.title,
                    outline(spark).join("\n")
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{} plans differ from Spark's:\n{}", mismatches.len(), mismatches.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_union_keeping_its_inputs_partitioning_reads_them_coalesced_alike() {
    let (_server, client) = start().await;
    // Both inputs are hash-partitioned on `account_id`, so the union keeps that partitioning;
    // the second input has ten rows, and coalesced apart from the first (kept in as many
    // partitions as cores, partitions being allowed small) it would be read in fewer partitions.
    let query = "SELECT account_id, count(*) AS n FROM tx_plain GROUP BY account_id \
                 UNION ALL SELECT account_id, count(*) AS n FROM tx_plain WHERE amount < 10 GROUP BY account_id";
    let small_partitions = ["spark.sql.adaptive.coalescePartitions.minPartitionSize = 1KB"];
    set(&client, &small_partitions).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {query}")).await;
    assert!(analyzed.contains("Arguments: isFinalPlan=true"), "{analyzed}");
    let read = partitions_read(&analyzed);
    assert_eq!(read.len(), 2, "{analyzed}");
    assert!(read[0] == read[1] && read[0] > 1 && read[0] < 200, "{analyzed}");
    let mut rows = rows_both_ways(&client, &small_partitions, &format!("{query} ORDER BY account_id, n")).await;
    let key = |row: &Vec<String>| (row[0].parse::<i64>().unwrap(), row[1].parse::<i64>().unwrap());
    rows.sort_by_key(key);
    // Rows 0 to 9 have amounts below 10, one in each of the first ten accounts.
    let all = (0..ACCOUNTS).map(|a| (a, (0..ROWS).filter(|id| account(*id) == a).count() as i64));
    let mut expected: Vec<(i64, i64)> = all.chain((0..10).map(|id| (account(id), 1))).collect();
    expected.sort_unstable();
    assert_eq!(rows.iter().map(key).collect::<Vec<_>>(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregate_of_coalesced_shuffle_partitions_aggregates_each_on_its_own() {
    let (_server, client) = start().await;
    let query = "SELECT account_id, count(*), sum(amount) FROM tx_plain GROUP BY account_id";
    set(&client, &[]).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {query}")).await;
    let read = partitions_read(&analyzed);
    assert_eq!(read.len(), 1, "{analyzed}");
    let apart: usize = analyzed
        .lines()
        .filter_map(|line| line.split("shuffle partitions aggregated one by one ").nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok())
        .sum();
    // Every one of the 200 shuffle partitions, in fewer coalesced ones.
    assert!(read[0] < 200 && apart == 200, "{analyzed}");
    let rows = rows_both_ways(&client, &[], &format!("{query} ORDER BY account_id")).await;
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .map(|a| {
            let ids: Vec<i64> = (0..ROWS).filter(|id| account(*id) == a).collect();
            vec![a.to_string(), ids.len().to_string(), ids.iter().sum::<i64>().to_string()]
        })
        .collect();
    assert_eq!(rows, expected);
}

/// TPC-H's Q18 in small: a sort-merge join whose one side is a broadcast hash join streaming a
/// semi join, itself of a sort and an aggregate of coalesced reads, all on one key. The joins
/// take their shuffle partitions one by one through the broadcast join, and a shuffle
/// partition with no row on the semi join's side never sorts its rows of the other side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_take_shuffle_partitions_apart_through_a_broadcast_join() {
    let (_server, client) = start().await;
    client
        .batch_execute(
            "CREATE TABLE labels (k BIGINT, label STRING) USING parquet;
             INSERT INTO labels SELECT id, concat('l', CAST(id AS STRING)) FROM range(7);",
        )
        .await
        .unwrap();
    let query = "SELECT /*+ BROADCAST(c) */ c.label, a.account_id, sum(t.amount) FROM labels c \
                 JOIN acc_plain a ON c.k = a.account_id % 7 \
                 JOIN tx_plain t ON t.account_id = a.account_id \
                 WHERE a.account_id IN (SELECT account_id FROM tx_plain GROUP BY account_id HAVING sum(amount) > 400000) \
                 GROUP BY c.label, a.account_id ORDER BY a.account_id";
    // Only `labels` is broadcast, as the hint asks.
    let settings = ["spark.sql.autoBroadcastJoinThreshold = -1"];
    set(&client, &settings).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {query}")).await;
    for operator in ["BroadcastHashJoin Inner BuildLeft", "SortMergeJoin LeftSemi", "SortMergeJoin Inner"] {
        assert!(analyzed.contains(operator), "{operator}\n{analyzed}");
    }
    let joined_apart = analyzed.lines().filter(|l| l.contains("shuffle partitions joined one by one ")).count();
    assert_eq!(joined_apart, 2, "{analyzed}");
    // The broadcast join ran once per shuffle partition, each time with the one table.
    assert!(analyzed.lines().any(|l| l.trim_start().starts_with("BroadcastHashJoin: output rows 249")), "{analyzed}");
    // Sorted rows of tx_plain: only those of shuffle partitions with accounts above 250.
    let sorted: Vec<usize> = analyzed
        .lines()
        .filter(|l| l.trim_start().starts_with("SortExec: output rows "))
        .filter_map(|l| l.split("output rows ").nth(1)?.split(',').next()?.parse().ok())
        .collect();
    assert!(sorted.iter().all(|&rows| rows < ROWS as usize), "{sorted:?}\n{analyzed}");

    let rows = rows_both_ways(&client, &settings, query).await;
    // Account a holds the ids a, a + 500, …: 40 of them, summing to 40a + 500·(0 + … + 39).
    let expected: Vec<Vec<String>> = (0..ACCOUNTS)
        .map(|a| (a, (0..ROWS).filter(|id| account(*id) == a).sum::<i64>()))
        .filter(|&(_, sum)| sum > 400_000)
        .map(|(a, sum)| vec![format!("l{}", a % 7), a.to_string(), sum.to_string()])
        .collect();
    assert_eq!(expected.len(), 249);
    assert_eq!(rows, expected);
}

/// The lines of a Q21-shaped query over `items`: its lines of over 500 in an order where
/// another part was bought and no other part went over 500, counted by part name.
const LATE_LINES: &str = "SELECT p.name, count(*) FROM items a JOIN parts p ON p.part = a.part \
                          WHERE a.amount > 500 \
                          AND EXISTS (SELECT * FROM items b WHERE b.order_id = a.order_id AND b.part <> a.part) \
                          AND NOT EXISTS (SELECT * FROM items c WHERE c.order_id = a.order_id \
                                          AND c.part <> a.part AND c.amount > 500) \
                          GROUP BY p.name ORDER BY p.name";

/// Items over 500 counted with their part joined and without: `a` checks `part` for NULL (it
/// joins on it), `c` does not, so a NULL part counts in `c`'s rows only.
const BY_PART_AND_NOT: &str = "SELECT 'joined', count(*), count(a.part) FROM items a \
                               JOIN orders o ON a.order_id = o.order_id JOIN parts p ON p.part = a.part \
                               WHERE a.amount > 500 \
                               UNION ALL SELECT 'all', count(*), count(c.part) FROM items c \
                               JOIN orders o ON c.order_id = o.order_id WHERE c.amount > 500 ORDER BY 1";

/// Item `id`: its order, part and amount.
fn item(id: i64) -> (i64, i64, i64) {
    (id / 4, id % 7, id * 37 % 1000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchanges_apart_only_by_null_checks_the_files_rule_out_run_once() {
    let (_server, client) = start().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE items (order_id BIGINT, part BIGINT, amount BIGINT) USING parquet;
             INSERT INTO items SELECT id DIV 4, id % 7, id * 37 % 1000 FROM range({ROWS});
             CREATE TABLE parts (part BIGINT, name STRING) USING parquet;
             INSERT INTO parts SELECT id, concat('p', CAST(id AS STRING)) FROM range(7);
             CREATE TABLE orders (order_id BIGINT) USING parquet;
             INSERT INTO orders SELECT id FROM range({orders});",
            orders = ROWS / 4
        ))
        .await
        .unwrap();
    let mut counts = [0usize; 7];
    for (order, part, amount) in (0..ROWS).map(item) {
        // An order's items are ids 4·order to 4·order + 3.
        let others = || (4 * order..4 * order + 4).map(item).filter(move |o| o.1 != part);
        if amount > 500 && others().next().is_some() && !others().any(|o| o.2 > 500) {
            counts[part as usize] += 1;
        }
    }
    let expected_rows: Vec<Vec<String>> =
        (0..7).filter(|&p| counts[p] > 0).map(|p| vec![format!("p{p}"), counts[p].to_string()]).collect();
    assert!(!expected_rows.is_empty());

    // `a` checks `part` for NULL (it joins on it), `c` does not: the same rows otherwise, and
    // `part` holds no NULL, so `c`'s exchange reads the output of `a`'s.
    let settings = ["spark.sql.autoBroadcastJoinThreshold = -1"];
    set(&client, &settings).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {LATE_LINES}")).await;
    let (shown, metrics) = analyzed.split_once("== Metrics ==").unwrap();
    assert_eq!(metrics.matches("read the output of stage ").count(), 1, "{analyzed}");
    assert!(!shown.contains("ReusedExchange"), "Spark's plan reuses nothing: {analyzed}");
    assert_eq!(rows_both_ways(&client, &settings, LATE_LINES).await, expected_rows);
    let over_500 = (0..ROWS).filter(|&id| item(id).2 > 500).count();
    let counts = |label: &str, rows: usize, parts: usize| vec![label.to_string(), rows.to_string(), parts.to_string()];
    set(&client, &settings).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {BY_PART_AND_NOT}")).await;
    assert_eq!(analyzed.matches("read the output of stage ").count(), 1, "{analyzed}");
    assert_eq!(
        rows_both_ways(&client, &settings, BY_PART_AND_NOT).await,
        vec![counts("all", over_500, over_500), counts("joined", over_500, over_500)]
    );
    // Spark's own stage cache off: nothing is reused, twin or not.
    set(&client, &["spark.sql.autoBroadcastJoinThreshold = -1", "spark.sql.exchange.reuse = false"]).await;
    let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {LATE_LINES}")).await;
    assert!(!analyzed.contains("read the output of stage"), "{analyzed}");
    assert_eq!(text_rows(&client, LATE_LINES).await, expected_rows);

    // Once a file holds a NULL part, the checks may drop rows: each exchange runs.
    // A NULL part joins no part, and neither `b.part <> a.part` nor `c.part <> a.part` is
    // true of it, so the late lines stay; `c`'s count takes the one over 500.
    client.batch_execute("INSERT INTO items VALUES (0, NULL, 900), (1, NULL, 100)").await.unwrap();
    for query in [LATE_LINES, BY_PART_AND_NOT] {
        set(&client, &settings).await;
        let analyzed = plan(&client, &format!("EXPLAIN ANALYZE {query}")).await;
        assert!(analyzed.contains("AdaptiveSparkPlan"), "{analyzed}");
        assert!(!analyzed.contains("read the output of stage"), "{analyzed}");
    }
    assert_eq!(rows_both_ways(&client, &settings, LATE_LINES).await, expected_rows);
    assert_eq!(
        rows_both_ways(&client, &settings, BY_PART_AND_NOT).await,
        vec![counts("all", over_500 + 1, over_500), counts("joined", over_500, over_500)]
    );
}

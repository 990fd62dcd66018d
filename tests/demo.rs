//! `bucketsql demo` run to its end on its own server, each step's plan checked for what the
//! step teaches; and its `--sql` script run by psql against a server of the test's.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{TestServer, run_logged};

const ROWS: u64 = 100_000;

/// The text of the step titled `title`, from its header to the next step's.
fn step<'a>(output: &'a str, title: &str) -> &'a str {
    let header = format!(": {title} ==\n");
    let start = output.find(&header).unwrap_or_else(|| panic!("no step {title:?} in:\n{output}"));
    let rest = &output[start + header.len()..];
    &rest[..rest.find("\n== Step ").unwrap_or(rest.len())]
}

/// The lines of a step's `plan:` block: the operators that ran.
fn plan_lines(step: &str) -> Vec<&str> {
    step.lines().skip_while(|l| *l != "plan:").skip(1).take_while(|l| l.starts_with("  ")).map(str::trim).collect()
}

/// Exchanges that hash-partition rows: the shuffles a join needs.
fn hash_exchanges(step: &str) -> usize {
    plan_lines(step).iter().filter(|l| l.contains(" Exchange: hashpartitioning(")).count()
}

fn bytes_shuffled(step: &str) -> u64 {
    let line = step.lines().find_map(|l| l.trim().strip_prefix("bytes shuffled by exchanges: "));
    let number =
        line.and_then(|l| l.split_whitespace().next()).unwrap_or_else(|| panic!("no bytes shuffled in:\n{step}"));
    number.parse().expect("a byte count")
}

#[test]
fn the_demo_shows_each_step_in_its_plan() {
    let (status, output) = run_logged(
        Command::new(env!("CARGO_BIN_EXE_bucketsql")).args(["demo", "--rows", &ROWS.to_string()]),
        Duration::from_secs(300),
    );
    assert!(status.is_some_and(|s| s.success()), "the demo failed or hung:\n{output}");

    let plain = step(&output, "A plain join");
    assert_eq!(hash_exchanges(plain), 2, "both sides of a plain join are shuffled:\n{plain}");
    assert!(plan_lines(plain).iter().any(|l| l.contains("SortMergeJoin")), "{plain}");

    let bucketed = step(&output, "Both sides bucketed alike");
    assert_eq!(hash_exchanges(bucketed), 0, "tables bucketed alike join without a shuffle:\n{bucketed}");
    assert_eq!(plan_lines(bucketed).iter().filter(|l| l.contains("Bucketed: true")).count(), 2, "{bucketed}");
    assert!(bytes_shuffled(bucketed) < bytes_shuffled(plain) / 100, "{bucketed}\n{plain}");

    let six = step(&output, "8 buckets against 6");
    assert_eq!(hash_exchanges(six), 1, "the 6-bucket side is shuffled to 8:\n{six}");
    assert!(plan_lines(six).iter().any(|l| l.contains("hashpartitioning(") && l.contains(", 8)")), "{six}");
    assert!(six.contains("Bucket `demo_acc_b6` INTO 8 BUCKETS to drop this Exchange"), "the advice says how:\n{six}");
    // The advice names the exchange of the plan that ran.
    let exchange = plan_lines(six).into_iter().find(|l| l.contains("hashpartitioning(")).unwrap();
    let id = exchange.trim().split(')').next().unwrap().trim_start_matches('(');
    assert!(six.contains(&format!("so Exchange ({id}) shuffles `demo_acc_b6`")), "{six}");

    let four = step(&output, "8 buckets against 4");
    assert_eq!(hash_exchanges(four), 1, "without coalescing, the 4-bucket side is shuffled:\n{four}");
    let coalesced = step(&output, "8 buckets against 4, coalesced");
    assert_eq!(hash_exchanges(coalesced), 0, "coalesced buckets need no shuffle:\n{coalesced}");
    assert!(four.contains("CoalesceBucketsInJoin: `demo_acc_b4` and `demo_tx_b8`"), "{four}");
    assert!(!coalesced.contains("CoalesceBucketsInJoin:"), "{coalesced}");
    assert!(plan_lines(coalesced).iter().any(|l| l.contains("(Coalesced to 4)")), "{coalesced}");

    let broadcast = step(&output, "A broadcast");
    assert!(plan_lines(broadcast).iter().any(|l| l.contains("BroadcastHashJoin")), "{broadcast}");
    assert_eq!(hash_exchanges(broadcast), 0, "{broadcast}");

    // 7 days of 8 buckets; one day and two accounts leave at most 2 bucket files to read.
    let partitions = step(&output, "Partitions over buckets");
    let daily_scan = plan_lines(partitions)
        .into_iter()
        .find(|l| l.contains("demo_tx_daily"))
        .unwrap_or_else(|| panic!("no scan of demo_tx_daily:\n{partitions}"));
    assert!(daily_scan.contains("PartitionFilters: [") && daily_scan.contains("day"), "{daily_scan}");
    let selected = daily_scan.split("SelectedBucketsCount: ").nth(1).and_then(|s| s.split(' ').next());
    assert!(selected.and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n <= 2), "bucket pruning: {daily_scan}");
    assert_eq!(hash_exchanges(partitions), 0, "{partitions}");

    let union_first = step(&output, "Bucketed history UNION ALL plain current");
    let join_first = step(&output, "Join each part, then UNION ALL");
    assert_eq!(hash_exchanges(union_first), 1, "{union_first}");
    assert_eq!(hash_exchanges(join_first), 1, "{join_first}");
    // The history (ten times the current rows) is shuffled only when the union comes first.
    assert!(bytes_shuffled(join_first) * 5 < bytes_shuffled(union_first), "{union_first}\n{join_first}");

    // Half of the transactions belong to one account, so one bucket holds at least half of them
    // (SHOW BUCKETS: bucket, files, rows, bytes, min, max, sorted).
    let skewed = step(&output, "Skew: one hot account in one bucket");
    let bucket_rows: Vec<u64> = skewed
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            match cells[..] {
                [bucket, _, rows, _, _, _, _] if bucket.parse::<u32>().is_ok() => rows.parse().ok(),
                _ => None,
            }
        })
        .collect();
    assert_eq!(bucket_rows.len(), 8, "{skewed}");
    assert_eq!(bucket_rows.iter().sum::<u64>(), ROWS, "{skewed}");
    assert!(bucket_rows.iter().max().is_some_and(|max| *max >= ROWS / 2), "{skewed}");

    let split = step(&output, "Skew: adaptive execution splits the hot partition");
    let split_plan = plan_lines(split);
    assert!(split_plan.iter().any(|l| l.contains("SortMergeJoin(skew=true)")), "{split}");
    assert!(split_plan.iter().any(|l| l.contains("AQEShuffleRead") && l.contains("skewed")), "{split}");
}

#[test]
fn the_demo_script_runs_in_psql() {
    let script = Command::new(env!("CARGO_BIN_EXE_bucketsql"))
        .args(["demo", "--sql", "--rows", &ROWS.to_string()])
        .output()
        .expect("bucketsql runs");
    assert!(script.status.success(), "{}", String::from_utf8_lossy(&script.stderr));
    let script = String::from_utf8(script.stdout).expect("UTF-8");

    let server = TestServer::start();
    let mut psql = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-p"])
        .arg(server.port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs (it is installed by .ci/run)");
    psql.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("script written");
    let ran = psql.wait_with_output().expect("psql ends");
    let (stdout, stderr) = (String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    assert!(ran.status.success() && stderr.trim().is_empty(), "psql failed on the script:\n{stderr}\n{stdout}");
    // Each EXPLAIN ANALYZE printed its plan.
    assert_eq!(
        stdout.matches("== Physical Plan ==").count(),
        script.lines().filter(|l| l.starts_with("EXPLAIN ANALYZE ")).count(),
        "{stdout}"
    );
}

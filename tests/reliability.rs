//! The reliability suite at the size CI affords: crash cycles (`kill -9` mid-write, restart,
//! check every write is all or nothing and the files on disk are the committed ones, also on
//! a full disk), a many-client soak, and SQL and protocol fuzzing. Each is a script in
//! `tests/reliability/` that starts the real server itself and ends with a `RESULT {json}`
//! line; the README's Reliability section gives the full-size commands and figures.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::clients::python_env;
use crate::common::run_logged;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reliability").join(name)
}

/// Runs a script of the suite against this build's server and fails with its report unless
/// it passed.
fn run_suite_script(name: &str, args: &[&str], timeout: Duration) {
    let python = python_env("python-clients", "requirements.txt");
    let (status, report) = run_logged(
        Command::new(python).arg(script(name)).args(["--binary", env!("CARGO_BIN_EXE_bucketsql")]).args(args),
        timeout,
    );
    let result = report.lines().rev().find(|line| line.starts_with("RESULT "));
    match status {
        Some(status) if status.success() && result.is_some() => println!("{report}"),
        Some(status) => panic!("{name} failed ({status}):\n{report}"),
        None => panic!("{name} did not finish within {timeout:?}:\n{report}"),
    }
}

#[test]
fn crash_cycles_lose_no_write_and_leave_no_stray_file() {
    let duckdb = python_env("python-random-queries", "random-queries-requirements.txt");
    let duckdb = duckdb.to_str().unwrap();
    run_suite_script(
        "crash_cycles.py",
        &["--cycles", "12", "--seed", "20261201", "--duckdb-python", duckdb, "--full-disk"],
        Duration::from_secs(600),
    );
}

#[test]
fn a_soak_of_many_clients_loses_and_duplicates_no_row() {
    run_suite_script(
        "soak.py",
        &["--clients", "16", "--seconds", "30", "--seed", "20261201"],
        Duration::from_secs(300),
    );
}

#[test]
fn fuzzed_statements_get_answers_or_errors_and_never_stop_the_server() {
    run_suite_script("fuzz_sql.py", &["--statements", "400", "--seed", "20261201"], Duration::from_secs(900));
}

#[test]
fn fuzzed_frames_get_postgresqls_answers_and_never_stop_the_server() {
    run_suite_script("fuzz_protocol.py", &["--frames", "600", "--seed", "20261201"], Duration::from_secs(600));
}

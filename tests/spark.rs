//! Apache Spark and bucketsql read each other's bucketed tables: `tests/clients/spark_roundtrip.py`
//! runs a real local Spark (pyspark from PyPI, in its own virtual environment) against the
//! server. Spark 4 needs Java 17 or later, found as Spark finds it: `$JAVA_HOME/bin/java`, else
//! `java` on the PATH.

use std::process::Command;
use std::time::Duration;

use crate::clients::{clients_dir, python_env};
use crate::common::{TestServer, run_logged};

/// Generous: Spark's JVM start and first jobs take tens of seconds on two busy cores, but a
/// hung session must still end the test.
const TIMEOUT: Duration = Duration::from_secs(600);

/// Fails, rather than skips, when Spark could not run here.
pub(crate) fn require_java_17() {
    let java = std::env::var_os("JAVA_HOME")
        .map(|home| std::path::PathBuf::from(home).join("bin/java"))
        .unwrap_or_else(|| "java".into());
    let output = Command::new(&java).arg("-version").output().unwrap_or_else(|e| {
        panic!("pyspark needs Java 17 or later, but {java:?} did not run ({e}): install a JDK (e.g. openjdk-17-jre-headless)")
    });
    let banner = String::from_utf8_lossy(&output.stderr);
    let major = banner.split('"').nth(1).and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    assert!(
        output.status.success() && major.is_some_and(|m| m >= 17),
        "pyspark needs Java 17 or later, but {java:?} -version says:\n{banner}"
    );
}

#[test]
fn spark_and_bucketsql_read_each_others_bucketed_tables() {
    require_java_17();
    let python = python_env("python-spark", "spark-requirements.txt");
    let temp = tempfile::tempdir().expect("temp dir");
    let spark_dir = temp.path().join("spark");
    std::fs::create_dir(&spark_dir).unwrap();
    let server = TestServer::start_with_args(
        &temp.path().join("data"),
        &["--allow-location", spark_dir.to_str().expect("UTF-8 temp dir")],
    );

    let (status, output) = run_logged(
        Command::new(python)
            .arg(clients_dir().join("spark_roundtrip.py"))
            .arg(server.port.to_string())
            .arg(&spark_dir)
            .current_dir(&spark_dir),
        TIMEOUT,
    );
    match status {
        Some(status) if status.success() => println!("{}", output.lines().last().unwrap_or_default()),
        Some(status) => panic!("spark_roundtrip.py failed ({status}):\n{output}"),
        None => panic!("spark_roundtrip.py did not finish within {TIMEOUT:?}:\n{output}"),
    }
}

/// Random Spark SQL in families (arithmetic, decimals, dates, strings, casts, aggregates, set
/// operations, windows, grouping sets, subqueries), and every replay of an earlier difference,
/// answered by a real local Spark and by bucketsql over the same rows: errors, column types and
/// rows must agree (`tests/clients/spark_answers.py`). `BUCKETSQL_SPARK_QUERIES` and
/// `BUCKETSQL_SPARK_SEED` make a longer run on another seed.
#[test]
fn random_spark_sql_answers_as_spark_does() {
    compare_random_spark_sql("BUCKETSQL_SPARK_QUERIES", "300", "BUCKETSQL_SPARK_SEED", "1", &[]);
}

/// The same comparison under Spark's legacy mode (`spark.sql.ansi.enabled = false`, set in
/// both after the tables are loaded), on its own seed: wrapped integers, and NULL where ANSI
/// mode fails. `BUCKETSQL_SPARK_LEGACY_QUERIES` and `BUCKETSQL_SPARK_LEGACY_SEED` make a longer
/// run.
#[test]
fn random_spark_sql_answers_as_spark_does_in_legacy_mode() {
    compare_random_spark_sql(
        "BUCKETSQL_SPARK_LEGACY_QUERIES",
        "150",
        "BUCKETSQL_SPARK_LEGACY_SEED",
        "legacy-1",
        &["--legacy"],
    );
}

/// Runs `spark_answers.py` for the queries and seed the environment variables name (else the
/// defaults), with `extra` arguments.
fn compare_random_spark_sql(queries: &str, default_queries: &str, seed: &str, default_seed: &str, extra: &[&str]) {
    require_java_17();
    let python = python_env("python-spark", "spark-requirements.txt");
    let temp = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start_on(&temp.path().join("data"));
    let queries = std::env::var(queries).unwrap_or_else(|_| default_queries.to_string());
    let seed = std::env::var(seed).unwrap_or_else(|_| default_seed.to_string());
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (status, output) = run_logged(
        Command::new(python)
            .arg(clients_dir().join("spark_answers.py"))
            .arg(server.port.to_string())
            .arg(&seed)
            .arg(&queries)
            .arg(temp.path())
            .arg("--replays")
            .arg(data.join("spark-answers-replays.tsv"))
            .arg("--known")
            .arg(data.join("spark-answers-known.tsv"))
            .args(extra)
            .current_dir(temp.path()),
        TIMEOUT,
    );
    match status {
        Some(status) if status.success() => println!("{output}"),
        Some(status) => panic!("spark_answers.py found differences from Spark ({status}):\n{output}"),
        None => panic!("spark_answers.py did not finish within {TIMEOUT:?}:\n{output}"),
    }
}

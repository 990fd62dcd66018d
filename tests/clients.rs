//! Real client drivers against the server, one test per driver, each on a fresh server
//! running that driver's program from `tests/clients/`: connect, create a bucketed table,
//! insert and select with parameters, read an `EXPLAIN FORMATTED` plan, survive an error.
//!
//! Drivers are installed on first use under Cargo's target directory: the Python ones into a
//! virtual environment (PyPI), node-postgres with npm. pgjdbc is Debian's
//! `libpostgresql-jdbc-java` (installed by `.ci/run`), compiled against with `javac`. A missing
//! tool fails its test with the package to install.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use tokio_postgres::types::Type;

use crate::common::{TestServer, sqlstate, wait_with_timeout};

/// node-postgres, as npm names it.
const NODE_PG: &str = "pg@8.23.1";
const PGJDBC_JAR: &str = "/usr/share/java/postgresql.jar";
/// A driver waiting on a reply that never comes must still end its test.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

pub fn run(command: &mut Command) {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?} did not start: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A virtual environment `name` under Cargo's target directory with the packages pinned in
/// `tests/clients/<requirements>`, created once and again whenever that file changes.
pub fn python_env(name: &str, requirements: &str) -> PathBuf {
    let env = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let requirements_file = clients_dir().join(requirements);
    let pinned = std::fs::read_to_string(&requirements_file).unwrap();
    installed(&env, &pinned, || {
        require("python3", "--version", "install Python 3 with its venv module (apt-get install python3-venv)");
        run(Command::new("python3").args(["-m", "venv"]).arg(&env));
        run(Command::new(env.join("bin/python"))
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements_file));
    });
    env.join("bin/python")
}

/// Runs `install` to fill `dir` unless it already holds what `recipe` describes. One install
/// at a time, across the tests of this run and other `cargo test` processes.
fn installed(dir: &Path, recipe: &str, install: impl FnOnce()) {
    std::fs::create_dir_all(dir).unwrap();
    let lock = File::create(dir.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    let stamp = dir.join("installed.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(recipe) {
        install();
        std::fs::write(&stamp, recipe).unwrap();
    }
}

fn require(tool: &str, version_flag: &str, remedy: &str) {
    let runs = Command::new(tool).arg(version_flag).output().is_ok_and(|o| o.status.success());
    assert!(runs, "`{tool} {version_flag}` did not run: {remedy}");
}

/// Runs one client program to completion (or [`CLIENT_TIMEOUT`]) and fails with its output.
pub fn run_client(command: &mut Command) {
    let mut log = tempfile::tempfile().unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} did not start: {e}"));
    let status = wait_with_timeout(&mut child, CLIENT_TIMEOUT);
    let mut output = String::new();
    log.seek(SeekFrom::Start(0)).unwrap();
    log.read_to_string(&mut output).unwrap();
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("{command:?} failed ({status}):\n{output}"),
        None => panic!("{command:?} did not finish within {CLIENT_TIMEOUT:?}:\n{output}"),
    }
}

fn python_client(program: &str) {
    let python = python_env("python-clients", "requirements.txt");
    let server = TestServer::start();
    run_client(Command::new(python).arg(clients_dir().join(program)).arg(server.port.to_string()));
}

#[test]
fn psycopg2() {
    python_client("psycopg2_client.py");
}

#[test]
fn psycopg3() {
    python_client("psycopg3_client.py");
}

#[test]
fn asyncpg() {
    python_client("asyncpg_client.py");
}

#[test]
fn pg8000() {
    python_client("pg8000_client.py");
}

#[test]
fn sqlalchemy() {
    python_client("sqlalchemy_client.py");
}

#[test]
fn node_postgres() {
    require("node", "--version", "install Node.js and npm (apt-get install nodejs npm)");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-clients");
    installed(&dir, NODE_PG, || {
        require("npm", "--version", "install npm (apt-get install npm)");
        run(Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .arg(NODE_PG));
    });
    let server = TestServer::start();
    run_client(
        Command::new("node")
            .env("NODE_PATH", dir.join("node_modules"))
            .arg(clients_dir().join("node_pg.js"))
            .arg(server.port.to_string()),
    );
}

#[test]
fn pgjdbc() {
    let server = TestServer::start();
    run_client(&mut java_client("PgJdbc", server.port));
}

/// The pgjdbc program `tests/clients/<class>.java`, compiled, to run against `port`.
pub fn java_client(class: &str, port: u16) -> Command {
    assert!(Path::new(PGJDBC_JAR).exists(), "{PGJDBC_JAR} is missing: apt-get install libpostgresql-jdbc-java");
    require("javac", "-version", "install a JDK (apt-get install openjdk-17-jdk-headless)");
    let source = clients_dir().join(format!("{class}.java"));
    let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("java-clients-{class}"));
    installed(&classes, &std::fs::read_to_string(&source).unwrap(), || {
        run(Command::new("javac").arg("-d").arg(&classes).args(["-cp", PGJDBC_JAR]).arg(&source));
    });
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}:{PGJDBC_JAR}", classes.display())).arg(class).arg(port.to_string());
    command
}

/// tokio-postgres: prepared statements with inferred parameter types, binary parameters and
/// results.
#[tokio::test]
async fn tokio_postgres() {
    type Row = (i64, Option<String>, Option<String>, Option<NaiveDate>);
    let rows: Vec<Row> = vec![
        (1, Some("one".into()), Some("1.50".into()), NaiveDate::from_ymd_opt(2024, 1, 15)),
        (2, Some("two".into()), Some("20.25".into()), NaiveDate::from_ymd_opt(2024, 2, 29)),
        (3, None, None, None),
    ];
    let server = TestServer::start();
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, v STRING, price DECIMAL(10,2), day DATE) USING parquet \
             CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS",
        )
        .await
        .unwrap();

    let insert = client.prepare("INSERT INTO t VALUES ($1, $2, $3, $4)").await.unwrap();
    assert_eq!(insert.params(), &[Type::INT8, Type::TEXT, Type::NUMERIC, Type::DATE]);
    for (k, v, price, day) in &rows {
        let price: Option<Decimal> = price.as_deref().map(|p| p.parse().unwrap());
        assert_eq!(client.execute(&insert, &[k, v, &price, day]).await.unwrap(), 1);
    }

    let select = client.prepare("SELECT k, v, price, day FROM t WHERE k = $1").await.unwrap();
    assert_eq!(select.params(), &[Type::INT8]);
    let types: Vec<&Type> = select.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, [&Type::INT8, &Type::TEXT, &Type::NUMERIC, &Type::DATE]);
    for expected in rows.iter().chain(&rows) {
        let got: Vec<Row> = client
            .query(&select, &[&expected.0])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get::<_, Option<Decimal>>(2).map(|d| d.to_string()), r.get(3)))
            .collect();
        assert_eq!(got, std::slice::from_ref(expected));
    }

    let explain = client.query("EXPLAIN FORMATTED SELECT k, v FROM t WHERE k = 2", &[]).await.unwrap();
    assert_eq!(explain.len(), 1);
    let columns: Vec<(&str, &Type)> = explain[0].columns().iter().map(|c| (c.name(), c.type_())).collect();
    assert_eq!(columns, [("plan", &Type::TEXT)]);
    let plan: &str = explain[0].get(0);
    assert!(plan.starts_with("== Physical Plan ==\n"), "{plan}");
    assert!(plan.contains("Scan parquet spark_catalog.default.t"), "{plan}");

    let error = client.query("SELECT * FROM missing", &[]).await.unwrap_err();
    assert_eq!(sqlstate(&error), "42P01", "{error}");
    let count: i64 = client.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(count, 3);
}

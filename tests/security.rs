//! Passwords, TLS, CancelRequest and `statement_timeout`, as clients meet them.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::common::{TestServer, free_port, sqlstate, text_rows};

/// Runs far longer than any test waits for it, unless something stops it.
const LONG_QUERY: &str = "SELECT count(*) FROM range(5000000000)";

async fn connect<T>(server: &TestServer, params: &str, tls: T) -> Result<Client, tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) =
        tokio_postgres::connect(&format!("host=127.0.0.1 port={} dbname=postgres {params}", server.port), tls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn message(error: &tokio_postgres::Error) -> String {
    error.as_db_error().map_or_else(|| error.to_string(), |e| e.message().to_string())
}

/// A self-signed certificate for 127.0.0.1, written where `--tls-cert`/`--tls-key` read it.
struct Certificate {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    der: CertificateDer<'static>,
}

impl Certificate {
    fn new() -> Self {
        let generated = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("server.crt"), dir.path().join("server.key"));
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        Certificate { _dir: dir, cert, key, der: generated.cert.der().clone() }
    }

    fn args(&self) -> [&str; 4] {
        ["--tls-cert", self.cert.to_str().unwrap(), "--tls-key", self.key.to_str().unwrap()]
    }

    /// A TLS client that trusts this certificate only.
    fn client(&self) -> MakeRustlsConnect {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        MakeRustlsConnect::new(config)
    }
}

fn psql(server: &TestServer, conninfo: &str, password: &str, sql: &str) -> Output {
    Command::new("psql")
        .arg(format!("host=127.0.0.1 port={} user=postgres dbname=postgres {conninfo}", server.port))
        .args(["-XAtc", sql])
        .env("PGPASSWORD", password)
        .stdin(Stdio::null())
        .output()
        .expect("psql runs (Debian's postgresql-client)")
}

#[tokio::test]
async fn password_is_checked_with_scram() {
    let server = TestServer::start_fresh(&["--password", "s3cret"]);
    let wrong = connect(&server, "user=postgres password=wrong", NoTls).await.unwrap_err();
    assert_eq!(sqlstate(&wrong), "28P01");
    assert!(message(&wrong).contains("\"postgres\""), "{wrong:?}");
    assert!(connect(&server, "user=postgres", NoTls).await.is_err(), "a password is required");

    // `--password` holds for every user name.
    let client = connect(&server, "user=someone password=s3cret", NoTls).await.unwrap();
    assert_eq!(text_rows(&client, "SELECT 1 + 1").await, [["2"]]);
}

#[tokio::test]
async fn users_file_gives_each_user_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users");
    std::fs::write(&file, "# user:password\nalice:pa:ss\n\nbob:hunter2\n").unwrap();
    let server = TestServer::start_fresh(&["--users-file", file.to_str().unwrap()]);

    let client = connect(&server, "user=alice password=pa:ss", NoTls).await.unwrap();
    assert_eq!(text_rows(&client, "SELECT 'in'").await, [["in"]]);
    connect(&server, "user=bob password=hunter2", NoTls).await.unwrap();
    for refused in ["user=alice password=hunter2", "user=carol password=hunter2"] {
        let error = connect(&server, refused, NoTls).await.unwrap_err();
        assert_eq!(sqlstate(&error), "28P01", "{refused}");
    }
}

#[tokio::test]
async fn tls_when_the_client_asks_and_plain_text_otherwise() {
    let certificate = Certificate::new();
    let mut args = vec!["--password", "s3cret"];
    args.extend(certificate.args());
    let server = TestServer::start_fresh(&args);

    // `require` with a verified certificate, and SCRAM over it.
    let client = connect(&server, "user=postgres password=s3cret sslmode=require", certificate.client()).await.unwrap();
    assert_eq!(text_rows(&client, "SELECT 'secure'").await, [["secure"]]);
    let plain = connect(&server, "user=postgres password=s3cret sslmode=disable", NoTls).await.unwrap();
    assert_eq!(text_rows(&plain, "SELECT 'plain'").await, [["plain"]]);

    // Without a certificate the server answers SSLRequest with 'N'.
    let no_tls = TestServer::start();
    assert!(connect(&no_tls, "user=postgres sslmode=require", certificate.client()).await.is_err());
    connect(&no_tls, "user=postgres sslmode=prefer", certificate.client()).await.unwrap();
}

#[test]
fn psql_logs_in_with_channel_binding_over_tls() {
    let certificate = Certificate::new();
    let mut args = vec!["--password", "s3cret"];
    args.extend(certificate.args());
    let server = TestServer::start_fresh(&args);

    let output = psql(&server, "sslmode=require channel_binding=require", "s3cret", "SELECT 1");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "1");
    // Plain text must not be offered SCRAM-SHA-256-PLUS, which libpq rejects.
    let output = psql(&server, "sslmode=disable", "s3cret", "SELECT 2");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let output = psql(&server, "sslmode=require", "wrong", "SELECT 1");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("FATAL") && stderr.contains("authentication failed"), "{stderr}");
}

/// Runs `query`, cancels it after `delay` with a CancelRequest, and returns the error and
/// how long the cancel took.
async fn cancel_after(client: &Client, delay: Duration, extended: bool) -> (tokio_postgres::Error, Duration) {
    let token = client.cancel_token();
    let cancel = async {
        tokio::time::sleep(delay).await;
        token.cancel_query(NoTls).await.unwrap();
        Instant::now()
    };
    let query = async {
        let result = match extended {
            true => client.query(LONG_QUERY, &[]).await.map(drop),
            false => client.simple_query(LONG_QUERY).await.map(drop),
        };
        (result, Instant::now())
    };
    let ((result, ended), cancelled) =
        tokio::time::timeout(Duration::from_secs(30), futures::future::join(query, cancel))
            .await
            .expect("the query ends");
    (result.expect_err("the query is canceled"), ended.saturating_duration_since(cancelled))
}

#[tokio::test]
async fn cancel_request_stops_a_running_query() {
    let server = TestServer::start();
    let client = server.connect().await;
    for extended in [false, true] {
        let (error, took) = cancel_after(&client, Duration::from_millis(500), extended).await;
        assert_eq!(sqlstate(&error), "57014", "{error}");
        assert_eq!(message(&error), "canceling statement due to user request");
        assert!(took < Duration::from_secs(1), "the query ran on for {took:?} after the cancel");
        assert_eq!(text_rows(&client, "SELECT 'still here'").await, [["still here"]]);
    }
}

/// A cancel that comes while the statement is planned, or just as its rows start, is not
/// lost: swept across that moment, every cancel ends the query with 57014.
#[tokio::test]
async fn a_cancel_at_any_moment_of_a_running_statement_stops_it() {
    let server = TestServer::start();
    let (client, watcher) = (server.connect().await, server.connect().await);
    let pid = text_rows(&client, "SELECT pg_backend_pid()").await[0][0].clone();
    let active = format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} AND state = 'active'");
    for delay_ms in 0..25 {
        let token = client.cancel_token();
        let cancel = async {
            while text_rows(&watcher, &active).await != [["1"]] {}
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            token.cancel_query(NoTls).await.unwrap();
        };
        let (result, ()) = tokio::time::timeout(
            Duration::from_secs(20),
            futures::future::join(client.simple_query(LONG_QUERY), cancel),
        )
        .await
        .unwrap_or_else(|_| panic!("a cancel {delay_ms} ms after the query turned active was lost"));
        assert_eq!(sqlstate(&result.unwrap_err()), "57014", "cancelled {delay_ms} ms after it turned active");
    }
    assert_eq!(text_rows(&client, "SELECT 'still here'").await, [["still here"]]);
}

#[tokio::test]
async fn statement_timeout_stops_a_long_query() {
    let server = TestServer::start();
    let client = server.connect().await;
    client.batch_execute("SET statement_timeout = '500ms'").await.unwrap();
    assert_eq!(text_rows(&client, "SHOW statement_timeout").await, [["statement_timeout", "500ms"]]);
    for extended in [false, true] {
        let started = Instant::now();
        let error = match extended {
            true => client.query(LONG_QUERY, &[]).await.map(drop),
            false => client.simple_query(LONG_QUERY).await.map(drop),
        }
        .unwrap_err();
        assert_eq!(sqlstate(&error), "57014", "{error}");
        assert_eq!(message(&error), "canceling statement due to statement timeout");
        // 500 ms of timeout, stopped within a second of it.
        assert!(started.elapsed() < Duration::from_millis(1500), "stopped after {:?}", started.elapsed());
        assert_eq!(text_rows(&client, "SELECT 'still here'").await, [["still here"]]);
    }

    // A write runs before any row reaches the client; stopped, it leaves the table as it was.
    client.batch_execute("CREATE TABLE t (id BIGINT) USING parquet").await.unwrap();
    let error = client.batch_execute("INSERT INTO t SELECT id FROM range(5000000000)").await.unwrap_err();
    assert_eq!(message(&error), "canceling statement due to statement timeout");
    assert_eq!(text_rows(&client, "SELECT count(*) FROM t").await, [["0"]]);

    let invalid = client.batch_execute("SET statement_timeout = 'soon'").await.unwrap_err();
    assert_eq!(sqlstate(&invalid), "22023");
    client.batch_execute("SET statement_timeout = 0").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*) FROM range(1000000)").await, [["1000000"]]);
}

#[tokio::test]
async fn statement_timeout_from_startup_options() {
    let server = TestServer::start();
    let client = connect(&server, "user=postgres options='-c statement_timeout=1s'", NoTls).await.unwrap();
    assert_eq!(text_rows(&client, "SHOW statement_timeout").await, [["statement_timeout", "1s"]]);
    let error = client.simple_query(LONG_QUERY).await.unwrap_err();
    assert_eq!(sqlstate(&error), "57014", "{error}");

    let error = connect(&server, "user=postgres options='-c statement_timeout=soon'", NoTls).await.unwrap_err();
    assert_eq!(sqlstate(&error), "22023", "{error}");
}

#[test]
fn trust_beyond_loopback_needs_a_flag() {
    let data = tempfile::tempdir().unwrap();
    let serve = |port: u16, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bucketsql"));
        command.args(["serve", "--listen", &format!("0.0.0.0:{port}"), "--data-dir"]).arg(data.path()).args(extra);
        command.stdin(Stdio::null()).stderr(Stdio::piped());
        command
    };
    let output = serve(free_port(), &[]).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--trust") && stderr.contains("--password"), "{stderr}");

    for allowed in [&["--trust"][..], &["--password", "s3cret"]] {
        let port = free_port();
        let mut child = serve(port, allowed).stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = child.try_wait().unwrap();
            assert!(exited.is_none() && Instant::now() < deadline, "{allowed:?}: not listening ({exited:?})");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Past `--max-connections` a client is refused with 53300, psql's too; a full server still
/// takes CancelRequests, and a closed connection frees its slot. A connection that has sent
/// nothing yet (a port probe) holds no slot, as PostgreSQL counts a client from its startup packet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_clients_get_53300_and_cancels_still_work() {
    let server = TestServer::start_fresh(&["--max-connections", "2"]);
    let _probes: Vec<_> = (0..3).map(|_| std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap()).collect();
    let first = server.connect().await;
    let second = server.connect().await;
    let refused = connect(&server, "user=postgres", NoTls).await.expect_err("a third client is refused");
    assert_eq!(sqlstate(&refused), "53300", "{refused}");
    assert_eq!(message(&refused), "sorry, too many clients already");
    let output = psql(&server, "sslmode=prefer", "", "SELECT 1");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("sorry, too many clients already"), "{stderr}");

    let (error, _) = cancel_after(&first, Duration::from_millis(300), false).await;
    assert_eq!(sqlstate(&error), "57014", "a full server cancels: {error}");
    assert_eq!(text_rows(&second, "SELECT 2").await, vec![vec!["2"]]);

    drop(second);
    let deadline = Instant::now() + Duration::from_secs(10);
    let third = loop {
        match connect(&server, "user=postgres", NoTls).await {
            Ok(client) => break client,
            Err(e) if Instant::now() < deadline && sqlstate(&e) == "53300" => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("a freed slot takes a new client: {e}"),
        }
    };
    assert_eq!(text_rows(&third, "SELECT 3").await, vec![vec!["3"]]);
}

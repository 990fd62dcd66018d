//! Statements on a Spark cluster through Spark Connect: a real Spark Connect server (the one
//! the pyspark wheel bundles, `local[2]` on 127.0.0.1) and `bucketsql serve --spark-connect`,
//! checked over the wire. The rows expected are worked out here from how the tables were
//! filled, not taken from either engine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustls::pki_types::PrivateKeyDer;
use serde_json::json;
use tokio_postgres::Client;
use tokio_rustls::TlsAcceptor;

use crate::browser::Browser;

use crate::clients::python_env;
use crate::common::{TestServer, free_port, sqlstate, text_rows};
use crate::spark::require_java_17;
use crate::web_ui::open_statement_page;

/// Spark's JVM takes tens of seconds to start on two busy cores.
const START_TIMEOUT: Duration = Duration::from_secs(240);

/// A Spark Connect server of its own, stopped when dropped.
struct SparkConnectServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl SparkConnectServer {
    fn start(dir: &Path, port: u16) -> Self {
        require_java_17();
        let python = python_env("python-spark", "spark-requirements.txt");
        let spark_home = Command::new(&python)
            .args(["-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"])
            .output()
            .expect("pyspark's directory");
        let spark_home = PathBuf::from(String::from_utf8(spark_home.stdout).unwrap().trim());
        std::fs::create_dir_all(dir).unwrap();
        let log = std::fs::File::create(dir.join("spark-connect.log")).unwrap();
        let child = Command::new(spark_home.join("bin/spark-submit"))
            .args(["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"])
            .args(["--conf", &format!("spark.connect.grpc.binding.port={port}")])
            .args(["--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false"])
            .args(["--conf", &format!("spark.sql.warehouse.dir={}", dir.join("spark-warehouse").display())])
            .args(["--driver-java-options", &format!("-Dderby.system.home={}", dir.display())])
            .env("SPARK_HOME", &spark_home)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spark-submit starts");
        let mut server = SparkConnectServer { child, port, dir: dir.to_path_buf() };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("Spark Connect exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "Spark Connect did not listen within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn url(&self) -> String {
        format!("sc://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("spark-connect.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SparkConnectServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A TLS front for a Spark Connect server, which speaks plain gRPC: it terminates TLS with a
/// certificate for `localhost` (its PEM in `cert`) and passes the bytes on to Spark. It counts
/// the TLS handshakes that succeeded.
struct TlsFront {
    port: u16,
    cert: PathBuf,
    handshakes: Arc<AtomicUsize>,
}

impl TlsFront {
    async fn start(dir: &Path, spark_port: u16) -> Self {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert = dir.join("spark-front.crt");
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der()).unwrap();
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![generated.cert.der().clone()], key)
                .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&handshakes);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, counted) = (acceptor.clone(), Arc::clone(&counted));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(socket).await else { return };
                    counted.fetch_add(1, Ordering::SeqCst);
                    let Ok(mut spark) = tokio::net::TcpStream::connect(("127.0.0.1", spark_port)).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut spark).await;
                });
            }
        });
        TlsFront { port, cert, handshakes }
    }
}

async fn execute(client: &Client, sql: &str) {
    client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

async fn failure(client: &Client, sql: &str) -> tokio_postgres::Error {
    match client.simple_query(sql).await {
        Ok(_) => panic!("{sql} succeeded"),
        Err(e) => e,
    }
}

/// Staging directories of writes, which none should outlive.
fn staging_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "_temporary") {
                found.push(path.clone());
            }
            found.extend(staging_dirs(&path));
        }
    }
    found
}

fn message(error: &tokio_postgres::Error) -> &str {
    error.as_db_error().map_or("", |e| e.message())
}

async fn plan(client: &Client, sql: &str) -> String {
    text_rows(client, &format!("EXPLAIN {sql}")).await.concat().concat()
}

/// Keys 0..20,000 in `a` (v = k % 7), the even ones in `b` (w = 3k), bucketed alike into 8;
/// `c` holds `b`'s rows unbucketed. The join of `a` and `b` has 10,000 rows, and its sums are
/// these.
const TABLES: &str = "
    CREATE TABLE a (k INT, v BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
    CREATE TABLE b (k INT, w BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
    CREATE TABLE c (k INT, w BIGINT) USING parquet;
    INSERT INTO a SELECT id, id % 7 FROM range(20000);
    INSERT INTO b SELECT id, id * 3 FROM range(0, 20000, 2);
    INSERT INTO c SELECT k, w FROM b;";
const JOIN: &str = "SELECT count(*), sum(v), sum(w) FROM a JOIN b ON a.k = b.k";

fn expected_join() -> Vec<Vec<String>> {
    let keys = (0..20_000i64).filter(|k| k % 2 == 0);
    let (count, v, w) = keys.fold((0, 0, 0), |(n, v, w), k| (n + 1, v + k % 7, w + 3 * k));
    vec![vec![count.to_string(), v.to_string(), w.to_string()]]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_run_on_spark_through_spark_connect() {
    let temp = tempfile::tempdir().unwrap();
    let spark_port = free_port();
    let mut spark = SparkConnectServer::start(&temp.path().join("spark"), spark_port);
    let ui = free_port();
    let ui_address = format!("127.0.0.1:{ui}");
    let server =
        TestServer::start_with_args(&temp.path().join("data"), &["--spark-connect", &spark.url(), "--ui", &ui_address]);
    let client = server.connect().await;
    execute(&client, TABLES).await;

    // The same rows on both engines.
    for engine in ["local", "spark"] {
        execute(&client, &format!("SET bucketsql.engine = {engine}")).await;
        assert_eq!(text_rows(&client, JOIN).await, expected_join(), "on {engine}");
    }
    assert_eq!(text_rows(&client, "SHOW bucketsql.engine").await, [["bucketsql.engine", "spark"]]);

    // Over TLS (`use_ssl=true`, as a token also asks for), to a certificate the server is told
    // to trust: the same rows. Without that trust, the handshake fails and so does the
    // statement, with 08001.
    let front = TlsFront::start(temp.path(), spark_port).await;
    let tls_url = format!("sc://localhost:{}/;use_ssl=true;token=not-checked-by-this-spark", front.port);
    for trusted in [true, false] {
        let env: &[(&str, &str)] = if trusted { &[("SSL_CERT_FILE", front.cert.to_str().unwrap())] } else { &[] };
        let data_dir = temp.path().join(format!("tls-{trusted}"));
        let over_tls = TestServer::start_with_env(&data_dir, &["--spark-connect", &tls_url], env);
        let tls_client = over_tls.connect().await;
        // A table of its own name: Spark's catalog is shared with the server above.
        let table = format!("over_tls_{trusted}");
        execute(
            &tls_client,
            &format!("CREATE TABLE {table} (k INT) USING parquet; INSERT INTO {table} SELECT id FROM range(100)"),
        )
        .await;
        execute(&tls_client, "SET bucketsql.engine = spark").await;
        let query = format!("SELECT count(*), sum(k) FROM {table}");
        if trusted {
            assert_eq!(text_rows(&tls_client, &query).await, [["100", "4950"]], "over TLS");
        } else {
            let error = failure(&tls_client, &query).await;
            assert_eq!(sqlstate(&error), "08001", "{error:?}");
        }
    }
    assert!(front.handshakes.load(Ordering::SeqCst) > 0, "no TLS handshake with the front");

    // The web UI marks the statement as run on Spark (the newest with its text; the one
    // before ran here) and shows Spark's plan of it.
    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page().await.unwrap();
    let statement = open_statement_page(&page, ui, JOIN).await;
    let engine = page.eval("document.getElementById('engine').textContent").await.unwrap();
    assert_eq!(engine, json!(format!("ran on Spark: sc://127.0.0.1:{spark_port}")));
    // Spark's plan is fetched beside the statement: the page shows it once it is known.
    let deadline = Instant::now() + Duration::from_secs(60);
    while page.eval("document.getElementById('spark-plan') === null").await.unwrap() == json!(true) {
        assert!(Instant::now() < deadline, "no Spark plan on the statement's page");
        tokio::time::sleep(Duration::from_millis(500)).await;
        page.goto(&statement).await.unwrap();
    }
    let spark_plan = page.eval("document.getElementById('spark-plan').textContent").await.unwrap();
    let spark_plan = spark_plan.as_str().unwrap();
    assert!(spark_plan.contains("Scan parquet spark_catalog.default.a"), "{spark_plan}");
    // The page draws Spark's plan: an operator for each line of Spark's outline, the
    // exchanges among them as exchanges.
    let outline: Vec<&str> = spark_plan
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.contains("AdaptiveSparkPlan"))
        .collect();
    let drawn = page
        .eval(
            "[...document.querySelectorAll('svg[data-graph=final] g.node')].map(n => [n.dataset.kind, n.dataset.name])",
        )
        .await
        .unwrap();
    let drawn = drawn.as_array().unwrap();
    assert_eq!(drawn.len(), outline.len(), "{drawn:?} drawn of {spark_plan}");
    let exchanges = |kind: &str, name: &str| {
        let drawn = drawn.iter().filter(|n| n[0] == json!(kind)).count();
        let printed = outline
            .iter()
            .filter(|l| l.split("- ").last().is_some_and(|op| op.starts_with(&format!("{name} ("))))
            .count();
        (drawn, printed)
    };
    for (kind, name) in [("shuffle_exchange", "Exchange"), ("broadcast_exchange", "BroadcastExchange")] {
        let (drawn, printed) = exchanges(kind, name);
        assert_eq!(drawn, printed, "{kind} in {spark_plan}");
    }
    assert!(
        drawn.iter().any(|n| n[1].as_str().unwrap().starts_with("Scan parquet spark_catalog.default.a")),
        "{drawn:?}"
    );

    // Spark's own plan, with the session's Spark settings: no broadcast, so the co-bucketed
    // join has no Exchange below it, and the join with the plain table shuffles the plain
    // side into the bucketed side's 8 partitions.
    execute(&client, "SET spark.sql.autoBroadcastJoinThreshold = -1").await;
    let bucketed = plan(&client, JOIN).await;
    assert!(bucketed.contains("SortMergeJoin") && bucketed.contains("Bucketed: true"), "{bucketed}");
    assert!(!bucketed.contains("Exchange hashpartitioning"), "{bucketed}");
    assert!(bucketed.contains("== Engine ==\nSpark Connect at sc://127.0.0.1:"), "{bucketed}");
    let plain = plan(&client, "SELECT count(*) FROM a JOIN c ON a.k = c.k").await;
    assert_eq!(plain.matches("Exchange hashpartitioning(k#").count(), 1, "{plain}");
    assert!(plain.contains(", 8), ENSURE_REQUIREMENTS"), "{plain}");
    let formatted = text_rows(&client, &format!("EXPLAIN FORMATTED {JOIN}")).await.concat().concat();
    assert!(formatted.contains("(1) Scan parquet spark_catalog.default."), "{formatted}");
    // Spark's FORMATTED plan comes with the bucketing section and the advice, computed from
    // it: the plain side's Exchange, by the id Spark gave it, shuffled for the join because
    // `c` is not bucketed; and first, a side small enough to broadcast that this session's
    // settings keep Spark from broadcasting.
    let formatted =
        text_rows(&client, "EXPLAIN FORMATTED SELECT count(*) FROM a JOIN c ON a.k = c.k").await.concat().concat();
    // Operator ids from Spark's detail blocks: `(6) Exchange` and its arguments.
    let id_of = |header: &str, argument: &str| {
        let block = formatted.split("\n\n").find(|b| b.contains(header) && b.contains(argument)).expect(&formatted);
        block[1..block.find(')').unwrap()].to_string()
    };
    let exchange = id_of(") Exchange\n", "Arguments: hashpartitioning(k#");
    let join = id_of(") SortMergeJoin", "Join type: Inner");
    let section = formatted.split("== Extended Information (Bucketing) ==\n").nth(1).expect(&formatted);
    assert!(
        section.contains(&format!("Exchange ({exchange}) shuffles its input by hashpartitioning(k#"))
            && section.contains(&format!(", 8) for SortMergeJoin Inner ({join}).")),
        "{formatted}"
    );
    let advice = formatted.split("== Advice (Bucketing) ==\n").nth(1).expect(&formatted);
    assert!(advice.starts_with("JoinSelection: the `"), "{formatted}");
    assert!(
        advice
            .contains(&format!("Exchange ({exchange}) shuffles `c`, which is not bucketed, into the 8 buckets of `a`")),
        "{formatted}"
    );
    assert!(advice.find("== Engine ==").is_some(), "{formatted}");

    // Parameters are bound before the statement goes to Spark; their types hold.
    let rows =
        client.query("SELECT count(*), max(v) FROM a WHERE k < $1 AND v <> $2", &[&100i32, &6i64]).await.unwrap();
    let (count, max): (i64, i64) = (rows[0].get(0), rows[0].get(1));
    assert_eq!((count, max), ((0..100).filter(|k| k % 7 != 6).count() as i64, 5));
    let rows = client.query("SELECT $1::string || '!'", &[&"it's \\ fine"]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "it's \\ fine!");

    // Spark's values arrive with the types local execution gives them.
    let typed = "SELECT CAST(1.5 AS DECIMAL(10,2)) d, DATE '2024-01-02' dt, TIMESTAMP '2024-01-02 03:04:05' ts, \
                 array(1, 2) a, map('x', 1) m, CAST(NULL AS STRING) n";
    let expected = [["1.50", "2024-01-02", "2024-01-02 03:04:05+00", "{1,2}", "{\"x\":1}", "NULL"]];
    for engine in ["spark", "local"] {
        execute(&client, &format!("SET bucketsql.engine = {engine}")).await;
        assert_eq!(text_rows(&client, typed).await, expected, "on {engine}");
    }
    // In binary too (the extended protocol's results): the same column types and the same
    // bytes on both engines, whose text the rows above check.
    let mut binary = Vec::new();
    for engine in ["spark", "local"] {
        execute(&client, &format!("SET bucketsql.engine = {engine}")).await;
        let row = client.query_one(typed, &[]).await.unwrap();
        let columns: Vec<(u32, Option<Vec<u8>>)> =
            (0..row.len()).map(|i| (row.columns()[i].type_().oid(), row.get::<_, RawValue>(i).0)).collect();
        binary.push(columns);
    }
    assert_eq!(binary[0], binary[1], "binary results on Spark, then here");
    assert_eq!(binary[0][5].1, None, "the NULL column");
    // The setting is listed, and RESET takes it back to `local`.
    let all = text_rows(&client, "SHOW ALL").await;
    assert!(all.iter().any(|row| row[0] == "bucketsql.engine" && row[1] == "local"), "{all:?}");
    execute(&client, "SET bucketsql.engine = spark; RESET bucketsql.engine").await;
    assert_eq!(text_rows(&client, "SHOW bucketsql.engine").await, [["bucketsql.engine", "local"]]);
    execute(&client, "SET bucketsql.engine = spark").await;
    // EXPLAIN's other modes are Spark's too.
    let extended = text_rows(&client, &format!("EXPLAIN EXTENDED {JOIN}")).await.concat().concat();
    for section in ["== Parsed Logical Plan ==", "== Analyzed Logical Plan ==", "== Optimized Logical Plan =="] {
        assert!(extended.contains(section), "{extended}");
    }
    assert!(extended.contains("spark_catalog.default.a") && extended.contains("== Engine ==\nSpark Connect at"));
    let cost = text_rows(&client, &format!("EXPLAIN COST {JOIN}")).await.concat().concat();
    assert!(cost.contains("Statistics(sizeInBytes="), "{cost}");
    // Two plain sides both shuffle.
    let both_plain = plan(&client, "SELECT count(*) FROM c x JOIN c y ON x.k = y.k").await;
    assert_eq!(both_plain.matches("Exchange hashpartitioning(k#").count(), 2, "{both_plain}");

    // Writes on Spark: Spark writes the files, bucketed its way, and they commit here as
    // one write. Read here, they join `a` bucket to bucket: any row in another bucket than
    // this server's hash gives it would miss its match.
    execute(
        &client,
        "CREATE TABLE s USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS AS SELECT k, w FROM b",
    )
    .await;
    execute(&client, "INSERT INTO s SELECT k + 1, w FROM b WHERE k < 100").await;
    execute(&client, "SET bucketsql.engine = local").await;
    let keys = (0..20_000i64).filter(|k| k % 2 == 0).chain((1..100).step_by(2));
    let (count, v) = keys.fold((0, 0), |(n, v), k| (n + 1, v + k % 7));
    let join_s = "SELECT count(*), sum(v) FROM a JOIN s ON a.k = s.k";
    assert_eq!(text_rows(&client, join_s).await, [[count.to_string(), v.to_string()]]);
    let local_plan = plan(&client, join_s).await;
    assert!(!local_plan.contains("Exchange hashpartitioning"), "{local_plan}");
    assert_eq!(local_plan.matches("Bucketed: true").count(), 2, "{local_plan}");
    // A write that fails on Spark commits nothing and leaves no staging files.
    execute(&client, "SET bucketsql.engine = spark").await;
    let error = failure(&client, "INSERT INTO s SELECT CAST(concat('x', k) AS INT), w FROM b").await;
    assert_eq!(sqlstate(&error), "22018", "{error:?}");
    assert_eq!(text_rows(&client, "SELECT count(*) FROM s").await, [[count.to_string()]]);
    assert_eq!(staging_dirs(server.data_dir()), Vec::<PathBuf>::new());
    // OPTIMIZE leaves one sorted file per bucket of what Spark wrote.
    execute(&client, "OPTIMIZE s").await;
    let buckets = text_rows(&client, "SHOW BUCKETS s").await;
    assert_eq!(buckets.len(), 8, "{buckets:?}");
    for bucket in buckets {
        assert!(bucket[1] == "1" && bucket[6] == "t", "{bucket:?}");
    }

    // On a partitioned table: a static partition overwritten on Spark replaces that partition
    // only, and a write on Spark inside a block that rolls back leaves nothing.
    execute(&client, "CREATE TABLE p (k INT, d STRING) USING parquet PARTITIONED BY (d)").await;
    execute(&client, "INSERT INTO p PARTITION (d = 'x') SELECT k FROM b WHERE k < 10").await;
    execute(&client, "INSERT INTO p SELECT k, 'y' FROM b WHERE k < 4").await;
    execute(&client, "INSERT OVERWRITE p PARTITION (d = 'x') SELECT 9").await;
    execute(&client, "BEGIN; INSERT INTO p SELECT k, 'z' FROM b WHERE k < 100; ROLLBACK").await;
    let partitions = "SELECT d, count(*), sum(k) FROM p GROUP BY d ORDER BY d";
    assert_eq!(text_rows(&client, partitions).await, [["x", "1", "9"], ["y", "2", "2"]]);
    assert_eq!(staging_dirs(server.data_dir()), Vec::<PathBuf>::new());

    // Writes here are read there: the registration follows the table's files and its DDL.
    execute(&client, "SET bucketsql.engine = local; INSERT INTO a VALUES (20000, 100); SET bucketsql.engine = spark")
        .await;
    assert_eq!(text_rows(&client, "SELECT count(*), max(v) FROM a").await, [["20001", "100"]]);
    execute(&client, "DROP TABLE c; CREATE TABLE c (s STRING) USING parquet; INSERT INTO c VALUES ('x')").await;
    assert_eq!(text_rows(&client, "SELECT * FROM c").await, [["x"]]);
    execute(&client, "DROP TABLE c").await;
    assert_eq!(sqlstate(&failure(&client, "SELECT * FROM c").await), "42P01");

    // Spark's errors keep their SQLSTATE, and the session goes on.
    let error = failure(&client, "SELECT 1 / 0").await;
    assert_eq!(sqlstate(&error), "22012", "{error:?}");
    assert_eq!(text_rows(&client, "SELECT 1").await, [["1"]]);

    // Catalog queries stay here whatever the engine: drivers ask them about this server.
    let version = text_rows(&client, "SELECT version()").await;
    assert!(version[0][0].contains("bucketsql"), "{version:?}");

    // A statement timeout and a cancel interrupt the operation on Spark.
    let endless = "SELECT count(*) FROM range(1000000000000)";
    execute(&client, "SET statement_timeout = '3s'").await;
    assert_eq!(sqlstate(&failure(&client, endless).await), "57014");
    execute(&client, "RESET statement_timeout").await;
    let cancel = client.cancel_token();
    let watcher = server.connect().await;
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        // While it runs, pg_stat_activity shows the statement waiting for Spark.
        let waits = text_rows(
            &watcher,
            "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%range(1000000000000)%'",
        )
        .await;
        cancel.cancel_query(tokio_postgres::NoTls).await.unwrap();
        waits
    });
    assert_eq!(sqlstate(&failure(&client, endless).await), "57014");
    assert_eq!(canceller.await.unwrap(), [["Extension", "SparkConnect"]]);
    assert_eq!(text_rows(&client, "SELECT 2").await, [["2"]]);
    // And so does the web UI's Cancel, on the statement's page.
    let from_ui = "SELECT count(*) FROM range(1000000000001)";
    let cancelled = tokio::spawn({
        let client = server.connect().await;
        async move {
            execute(&client, "SET bucketsql.engine = spark").await;
            client.simple_query(from_ui).await.map(|_| ())
        }
    });
    let find_link = format!(
        "[...document.querySelectorAll('td.sql a')].find(a => a.textContent === {})?.getAttribute('href') ?? null",
        json!(from_ui)
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let link = loop {
        page.goto(&format!("http://127.0.0.1:{ui}/queries")).await.unwrap();
        if let Some(link) = page.eval(&find_link).await.unwrap().as_str() {
            break link.to_string();
        }
        assert!(Instant::now() < deadline, "the statement on Spark is not in the web UI's list");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    page.goto(&format!("http://127.0.0.1:{ui}{link}")).await.unwrap();
    page.wait_for("document.getElementById('cancel') !== null", Duration::from_secs(30)).await.unwrap();
    page.click_and_wait_for_load("#cancel").await.unwrap();
    let error = tokio::time::timeout(Duration::from_secs(60), cancelled).await.unwrap().unwrap().unwrap_err();
    assert_eq!(sqlstate(&error), "57014", "{error:?}");
    // Each of the three interrupted its own job on Spark.
    let deadline = Instant::now() + Duration::from_secs(30);
    while spark.log().matches("SPARK_JOB_CANCELLED").count() < 3 {
        assert!(Instant::now() < deadline, "Spark's jobs were not cancelled:\n{}", spark.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Under `auto`, the metastore's sizes decide, and EXPLAIN says so.
    execute(&client, "SET bucketsql.engine = auto; SET bucketsql.engine.autoThresholdBytes = 1").await;
    assert!(plan(&client, JOIN).await.contains("== Engine ==\nSpark Connect at"));
    execute(&client, "RESET bucketsql.engine.autoThresholdBytes").await;
    let local = plan(&client, JOIN).await;
    assert!(local.contains("== Engine ==\nbucketsql (bucketsql.engine = auto: its tables hold"), "{local}");
    assert!(local.contains("within bucketsql.engine.autoThresholdBytes (10737418240)"), "{local}");

    // Spark going away breaks the statement running there; local statements go on, and
    // once Spark is back the next statement finds it, its catalog registered again.
    execute(&client, "SET bucketsql.engine = spark").await;
    let running = tokio::spawn({
        let client = server.connect().await;
        async move {
            execute(&client, "SET bucketsql.engine = spark").await;
            client.simple_query(endless).await.map(|_| ())
        }
    });
    // A write that Spark runs when it goes away commits nothing.
    let writing = tokio::spawn({
        let client = server.connect().await;
        async move {
            execute(&client, "SET bucketsql.engine = spark").await;
            client.simple_query("INSERT INTO p SELECT id, 'w' FROM range(1000000000000)").await.map(|_| ())
        }
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    spark.stop();
    let lost = running.await.unwrap().expect_err("the statement on Spark outlived Spark");
    assert!(["08006", "08001"].contains(&sqlstate(&lost).as_str()), "{lost:?}");
    let lost_write = writing.await.unwrap().expect_err("the write on Spark outlived Spark");
    assert!(["08006", "08001"].contains(&sqlstate(&lost_write).as_str()), "{lost_write:?}");
    assert_eq!(sqlstate(&failure(&client, JOIN).await), "08001");
    execute(&client, "SET bucketsql.engine = local").await;
    assert_eq!(text_rows(&client, JOIN).await[0][0], "10000");
    assert_eq!(text_rows(&client, partitions).await, [["x", "1", "9"], ["y", "2", "2"]]);
    assert_eq!(staging_dirs(server.data_dir()), Vec::<PathBuf>::new());
    let _spark = SparkConnectServer::start(&temp.path().join("spark-again"), spark_port);
    execute(&client, "SET bucketsql.engine = spark").await;
    assert_eq!(text_rows(&client, "SELECT count(*) FROM a").await, [["20001"]]);

    // `bench --spark-connect` times the join there too, and fails unless Spark's answer is
    // this server's.
    let bench = Command::new(env!("CARGO_BIN_EXE_bucketsql"))
        .args(["bench", "--rows", "20000", "--buckets", "4", "--runs", "1", "--spark-connect", &spark.url()])
        .arg("--data-dir")
        .arg(temp.path().join("bench"))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&bench.stdout);
    assert!(bench.status.success(), "{report}\n{}", String::from_utf8_lossy(&bench.stderr));
    for layout in ["bucketed", "plain"] {
        let row = report
            .lines()
            .find(|l| l.starts_with("join count/sum") && l.contains(&format!(" {layout} ")) && l.contains(" spark "));
        assert!(row.is_some(), "no {layout} join on Spark in:\n{report}");
    }
}

/// Any value, as the bytes a binary result carries (`None` for NULL).
struct RawValue(Option<Vec<u8>>);

impl<'a> tokio_postgres::types::FromSql<'a> for RawValue {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawValue(Some(raw.to_vec())))
    }

    fn from_sql_null(_: &tokio_postgres::types::Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawValue(None))
    }

    fn accepts(_: &tokio_postgres::types::Type) -> bool {
        true
    }
}

#[tokio::test]
async fn without_spark_statements_fail_with_08001_and_local_ones_go_on() {
    let unreachable = format!("sc://127.0.0.1:{}", free_port());
    let server = TestServer::start_fresh(&["--spark-connect", &unreachable]);
    let client = server.connect().await;
    execute(&client, "CREATE TABLE t (k INT) USING parquet; INSERT INTO t VALUES (1), (2)").await;
    execute(&client, "SET bucketsql.engine = spark").await;
    let error = failure(&client, "SELECT count(*) FROM t").await;
    assert_eq!(sqlstate(&error), "08001", "{error:?}");
    assert!(message(&error).contains("could not connect to Spark Connect at sc://127.0.0.1:"), "{error:?}");
    execute(&client, "SET bucketsql.engine = local").await;
    assert_eq!(text_rows(&client, "SELECT count(*) FROM t").await, [["2"]]);

    let alone = TestServer::start();
    let client = alone.connect().await;
    execute(&client, "SET bucketsql.engine = auto").await;
    assert_eq!(text_rows(&client, "SELECT 1").await, [["1"]]);
    execute(&client, "SET bucketsql.engine = spark").await;
    let error = failure(&client, "SELECT 1").await;
    assert_eq!(sqlstate(&error), "08001");
    assert!(message(&error).contains("started without --spark-connect"), "{error:?}");
    assert_eq!(sqlstate(&failure(&client, "SET bucketsql.engine = cluster").await), "22023");
}

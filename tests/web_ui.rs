//! The web UI of a real server: pages rendered in headless Chromium (over the DevTools
//! protocol, `browser.rs`) after statements sent over the wire, the JSON API, and what it
//! answers to bad requests, strangers and other users.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::browser::{Browser, Page};
use crate::common::{CO_BUCKETED_TABLES, TestServer, free_port, sqlstate};

/// A server whose web UI listens on a port of its own; the UI's port.
fn start_with_ui(args: &[&str]) -> (TestServer, u16) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut all = vec!["--ui", address.as_str()];
    all.extend_from_slice(args);
    // The UI is bound before the SQL listener, which the start waits for.
    (TestServer::start_fresh(&all), port)
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// One HTTP/1.1 exchange over a fresh connection: `request` is the request line and headers.
async fn http_raw(port: u16, request: &str) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status in {head}"));
    Answer { status, head: head.to_string(), body: body.to_string() }
}

async fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    http_raw(port, &format!("{request}\r\n")).await
}

async fn get_json(port: u16, path: &str, headers: &[(&str, &str)]) -> Value {
    let answer = get(port, path, headers).await;
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", answer.body))
}

/// The id of the newest statement kept with this text.
async fn query_id(port: u16, sql: &str, headers: &[(&str, &str)]) -> u64 {
    let queries = get_json(port, "/api/v1/queries", headers).await;
    let found = queries.as_array().unwrap().iter().find(|q| q["sql"] == sql);
    found.unwrap_or_else(|| panic!("{sql} is not in {queries}"))["id"].as_u64().unwrap()
}

/// The operators drawn in one of the page's graphs: kind, name and output rows of each.
async fn drawn_nodes(page: &Page, graph: &str) -> Vec<Value> {
    let nodes = page
        .eval(&format!(
            "[...document.querySelectorAll('svg[data-graph={graph}] g.node')].map(n => ({{kind: n.dataset.kind, \
             name: n.dataset.name, rows: n.dataset.outputRows === undefined ? null : Number(n.dataset.outputRows)}}))"
        ))
        .await
        .unwrap();
    nodes.as_array().unwrap().clone()
}

/// Goes from the list of statements to the page of the newest with this text, as a user would;
/// the page's address.
pub async fn open_statement_page(page: &Page, ui: u16, sql: &str) -> String {
    page.goto(&format!("http://127.0.0.1:{ui}/queries")).await.unwrap();
    let link = page
        .eval(&format!(
            "[...document.querySelectorAll('td.sql a')].find(a => a.textContent === {}).getAttribute('href')",
            json!(sql)
        ))
        .await
        .unwrap();
    let address = format!("http://127.0.0.1:{ui}{}", link.as_str().unwrap());
    page.goto(&address).await.unwrap();
    address
}

fn of_kind<'a>(nodes: &'a [Value], kind: &str) -> Vec<&'a Value> {
    nodes.iter().filter(|n| n["kind"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_join_is_drawn_with_its_shuffles_and_a_bucketed_one_without() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE tx_plain (k BIGINT, amount BIGINT) USING parquet;
             INSERT INTO tx_plain SELECT id % 5000, id FROM range(20000);
             CREATE TABLE acc_plain (k BIGINT, name STRING) USING parquet;
             INSERT INTO acc_plain SELECT id, concat('a', id) FROM range(5000);
             CREATE TABLE tx_b (k BIGINT, amount BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
             INSERT INTO tx_b SELECT * FROM tx_plain;
             CREATE TABLE acc_b (k BIGINT, name STRING) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
             INSERT INTO acc_b SELECT * FROM acc_plain;
             SET spark.sql.autoBroadcastJoinThreshold = -1;",
        )
        .await
        .unwrap();
    let plain = "SELECT t.k, t.amount, a.name FROM tx_plain t JOIN acc_plain a ON t.k = a.k";
    let bucketed = "SELECT t.k, t.amount, a.name FROM tx_b t JOIN acc_b a ON t.k = a.k";
    // Every transaction's key is an account's: the join returns each of the 20,000.
    for sql in [plain, bucketed] {
        assert_eq!(client.query(sql, &[]).await.unwrap().len(), 20_000);
    }

    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page().await.unwrap();
    for (sql, shuffles, bucketed_scans) in [(plain, 2, 0), (bucketed, 0, 2)] {
        open_statement_page(&page, ui, sql).await;
        assert_eq!(page.last_status().await, Some(200));
        let nodes = drawn_nodes(&page, "final").await;
        assert_eq!(of_kind(&nodes, "shuffle_exchange").len(), shuffles, "{sql}: {nodes:?}");
        assert_eq!(of_kind(&nodes, "bucketed_scan").len(), bucketed_scans, "{sql}: {nodes:?}");
        let edges = page.eval("document.querySelectorAll('svg[data-graph=final] path.edge.shuffle').length").await;
        assert_eq!(edges.unwrap(), json!(shuffles));
        let join = nodes.iter().find(|n| n["name"].as_str().unwrap().starts_with("SortMergeJoin")).unwrap();
        assert_eq!(join["rows"], json!(20_000), "{sql}: {nodes:?}");
        let scans: Vec<_> = nodes.iter().filter(|n| n["kind"].as_str().unwrap().ends_with("scan")).collect();
        let scanned: i64 = scans.iter().map(|n| n["rows"].as_i64().unwrap()).sum();
        assert_eq!(scanned, 25_000, "{sql}: {nodes:?}");
        let text = page.eval("document.body.innerText").await.unwrap();
        let text = text.as_str().unwrap();
        if shuffles == 0 {
            assert!(text.contains("No exchange"), "{text}");
        } else {
            // Each shuffle's reason sits beside it.
            let notes = page
                .eval(
                    "[...document.querySelectorAll('svg[data-graph=final] g.note')].map(n => ({for: n.dataset.for, \
                     text: [...n.querySelectorAll('text')].map(t => t.textContent).join(' ')}))",
                )
                .await
                .unwrap();
            let notes = notes.as_array().unwrap();
            let exchanges: Vec<_> = nodes.iter().filter(|n| n["kind"] == "shuffle_exchange").collect();
            assert_eq!(notes.len(), exchanges.len(), "{notes:?}");
            assert!(notes.iter().any(|n| n["text"].as_str().unwrap().contains("tx_plain (not bucketed)")), "{notes:?}");
            let png = page.screenshot_png(1400, 1000).await.unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
            std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-ui-query.png"), png).unwrap();
        }
        // The FORMATTED text is one click away.
        page.click_and_wait_for_load("#formatted").await.unwrap();
        let formatted = page.eval("document.body.innerText").await.unwrap();
        assert!(formatted.as_str().unwrap().starts_with("== Physical Plan =="), "{formatted}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_statement_shows_its_progress_and_is_cancelled_from_its_page() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    // Minutes of work: 50 rows against each of two billion.
    let slow = "SELECT count(*) FROM range(50) a CROSS JOIN range(2000000000) b WHERE a.id + b.id = 7";
    let running = tokio::spawn(async move {
        let result = client.query_one(slow, &[]).await;
        (client, result)
    });
    let id = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let queries = get_json(ui, "/api/v1/queries", &[]).await;
            if let Some(q) = queries.as_array().unwrap().iter().find(|q| q["sql"] == slow) {
                return q["id"].as_u64().unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the statement shows in the list");

    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page().await.unwrap();
    page.goto(&format!("http://127.0.0.1:{ui}/queries/{id}")).await.unwrap();
    assert_eq!(page.eval("document.getElementById('state').textContent").await.unwrap(), json!("running"));
    // The page reloads itself while the statement runs, and the rows the operators have
    // produced grow.
    let most_rows =
        "Math.max(0, ...[...document.querySelectorAll('g.node')].map(n => Number(n.dataset.outputRows || 0)))";
    page.wait_for(&format!("{most_rows} > 0"), Duration::from_secs(30)).await.unwrap();
    let first = page.eval(most_rows).await.unwrap().as_f64().unwrap();
    page.wait_for(&format!("{most_rows} > {first}"), Duration::from_secs(30)).await.unwrap();
    assert!(page.eval("document.querySelector('meta[http-equiv=refresh]') !== null").await.unwrap() == json!(true));

    page.wait_for("document.getElementById('cancel') !== null", Duration::from_secs(10)).await.unwrap();
    page.click_and_wait_for_load("#cancel").await.unwrap();
    let (client, result) = tokio::time::timeout(Duration::from_secs(30), running).await.unwrap().unwrap();
    let error = result.unwrap_err();
    assert_eq!(sqlstate(&error), "57014", "{error}");
    // The connection carries on.
    assert_eq!(client.query_one("SELECT 41 + 1", &[]).await.unwrap().get::<_, i32>(0), 42);

    page.wait_for("document.getElementById('state').textContent === 'failed'", Duration::from_secs(10)).await.unwrap();
    let text = page.eval("document.body.innerText").await.unwrap();
    assert!(text.as_str().unwrap().contains("57014"), "{text}");
    let detail = get_json(ui, &format!("/api/v1/queries/{id}"), &[]).await;
    assert_eq!((detail["state"].as_str(), detail["sqlstate"].as_str()), (Some("failed"), Some("57014")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_page_draws_one_bar_per_bucket_with_its_rows() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    // Half the rows share one key, so one bucket holds more than half of them.
    client
        .batch_execute(
            "CREATE TABLE hot (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 6 BUCKETS;
             INSERT INTO hot SELECT CASE WHEN id % 2 = 0 THEN 7 ELSE id END, id FROM range(30000);",
        )
        .await
        .unwrap();
    // Rows per bucket from the files on disk: the bucket in each file's name, the rows in its footer.
    let mut expected = vec![0i64; 6];
    for file in crate::common::parquet_files(&server.data_dir().join("warehouse/default/hot")) {
        let name = file.file_name().unwrap().to_str().unwrap();
        let bucket = bucketsql::storage::file_naming::bucket_id_of(name).unwrap() as usize;
        let reader = datafusion::parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&file).unwrap());
        expected[bucket] +=
            datafusion::parquet::file::reader::FileReader::metadata(&reader.unwrap()).file_metadata().num_rows();
    }
    assert_eq!(expected.iter().sum::<i64>(), 30_000);

    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page().await.unwrap();
    page.goto(&format!("http://127.0.0.1:{ui}/tables")).await.unwrap();
    page.click_and_wait_for_load("a[href='/tables/default/hot']").await.unwrap();
    let bars = page
        .eval("[...document.querySelectorAll('rect.bucket-bar')].map(b => [Number(b.dataset.bucket), Number(b.dataset.rows), b.getAttribute('fill')])")
        .await
        .unwrap();
    let bars = bars.as_array().unwrap();
    assert_eq!(bars.len(), 6, "{bars:?}");
    for (bucket, bar) in bars.iter().enumerate() {
        assert_eq!(bar[0], json!(bucket));
        assert_eq!(bar[1], json!(expected[bucket]), "bucket {bucket}");
    }
    // The bucket holding key 7 stands out in red; the others do not.
    let hot = expected.iter().enumerate().max_by_key(|(_, rows)| **rows).unwrap().0;
    for (bucket, bar) in bars.iter().enumerate() {
        assert_eq!(bar[2] == json!("#c62828"), bucket == hot, "{bars:?}");
    }
    let detail = get_json(ui, "/api/v1/tables/default/hot", &[]).await;
    let api_rows: Vec<i64> =
        detail["buckets"].as_array().unwrap().iter().map(|b| b["rows"].as_i64().unwrap()).collect();
    assert_eq!(api_rows, expected);
    assert_eq!(detail["bucket_columns"], json!(["k"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_serves_queries_plans_tables_and_settings() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO t SELECT id FROM range(1000);
             SET spark.sql.shuffle.partitions = 7;",
        )
        .await
        .unwrap();
    let sql = "SELECT k % 10 AS g, count(*) FROM t GROUP BY k % 10";
    assert_eq!(client.query(sql, &[]).await.unwrap().len(), 10);
    let error = client.query("SELECT missing FROM t", &[]).await.unwrap_err();
    assert_eq!(sqlstate(&error), "42703");

    let id = query_id(ui, sql, &[]).await;
    let detail = get_json(ui, &format!("/api/v1/queries/{id}"), &[]).await;
    assert_eq!((detail["state"].as_str(), detail["rows"].as_u64()), (Some("finished"), Some(10)));
    let plan = &detail["plan"];
    assert_eq!(plan["adaptive"], "final");
    assert!(plan["formatted"].as_str().unwrap().contains("Arguments: isFinalPlan=true"));
    fn nodes(node: &Value, out: &mut Vec<Value>) {
        out.push(node.clone());
        node["children"].as_array().unwrap().iter().for_each(|c| nodes(c, out));
    }
    let mut all = Vec::new();
    nodes(&plan["root"], &mut all);
    let exchange = all.iter().find(|n| n["kind"] == "shuffle_exchange").expect("the GROUP BY shuffles");
    assert!(exchange["summary"].as_str().unwrap().contains(", 7)"), "{exchange}");
    let shuffled = exchange["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "rows shuffled").unwrap();
    assert!(shuffled["value"].as_u64().unwrap() > 0 && shuffled["unit"] == "count");
    assert_eq!(exchange["notes"].as_array().unwrap().len(), 1, "{exchange}");

    let failed = query_id(ui, "SELECT missing FROM t", &[]).await;
    let failed = get_json(ui, &format!("/api/v1/queries/{failed}"), &[]).await;
    assert_eq!((failed["state"].as_str(), failed["sqlstate"].as_str()), (Some("failed"), Some("42703")));

    let tables = get_json(ui, "/api/v1/tables", &[]).await;
    assert_eq!(tables[0]["name"], "t");
    assert_eq!((tables[0]["num_buckets"].as_u64(), tables[0]["rows"].as_u64()), (Some(4), Some(1000)));

    let connections = get_json(ui, "/api/v1/connections", &[]).await;
    let pid = connections[0]["pid"].as_i64().unwrap();
    assert_eq!(detail["connection"].as_i64(), Some(pid));
    let settings = get_json(ui, &format!("/api/v1/connections/{pid}/settings"), &[]).await;
    let setting = |key: &str| settings.as_array().unwrap().iter().find(|s| s["key"] == key).unwrap().clone();
    let partitions = setting("spark.sql.shuffle.partitions");
    assert_eq!((partitions["value"].as_str(), partitions["default"].as_str()), (Some("7"), Some("200")));
    assert_eq!(partitions["overridden"], true);
    let adaptive = setting("spark.sql.adaptive.enabled");
    assert_eq!((adaptive["value"].as_str(), adaptive["overridden"].as_bool()), (Some("true"), Some(false)));
    let page = get(ui, &format!("/connections/{pid}/settings"), &[]).await;
    assert!(page.status == 200 && page.body.contains("<td class=\"override\">spark.sql.shuffle.partitions</td>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_and_the_sql_server_carries_on() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    client.batch_execute("SELECT 1").await.unwrap();
    let id = query_id(ui, "SELECT 1", &[]).await;

    for (path, status) in [
        ("/queries/123456789", 404),
        ("/queries/not-a-number", 400),
        ("/queries/-1", 400),
        ("/queries/99999999999999999999999", 400),
        ("/api/v1/queries/123456789", 404),
        ("/api/v1/nothing/here", 404),
        ("/connections/77/settings", 404),
        ("/tables/default/missing", 404),
        ("/tables/..%2F..%2Fetc/passwd", 404),
        ("/no/such/page", 404),
        ("/queries/1/plan.txt/extra", 404),
    ] {
        assert_eq!(get(ui, path, &[]).await.status, status, "{path}");
    }
    let huge_query = format!("/queries?{}", "a".repeat(5000));
    assert_eq!(get(ui, &huge_query, &[]).await.status, 414);
    let huge_path = format!("/queries/{}", "9".repeat(100_000));
    assert!((400..500).contains(&get(ui, &huge_path, &[]).await.status));
    let huge_header = "x".repeat(100_000);
    assert!((400..500).contains(&get(ui, "/queries", &[("X-Filler", &huge_header)]).await.status));
    assert_eq!(http_raw(ui, "NONSENSE\r\n\r\n").await.status, 400);
    // Only a form of the UI itself may cancel, and only a running statement.
    let post = |origin: &str, path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{ui}\r\nOrigin: {origin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    };
    assert_eq!(http_raw(ui, &post("http://evil.example", &format!("/queries/{id}/cancel"))).await.status, 403);
    assert_eq!(
        http_raw(ui, &post(&format!("http://127.0.0.1:{ui}"), &format!("/queries/{id}/cancel"))).await.status,
        409
    );
    assert_eq!(http_raw(ui, &post(&format!("http://127.0.0.1:{ui}"), "/queries/424242/cancel")).await.status, 404);
    assert_eq!(get(ui, &format!("/queries/{id}/cancel"), &[]).await.status, 405);
    // A client that opens connections and sends nothing holds no page from anyone else.
    let _idle: Vec<_> =
        futures::future::join_all((0..20).map(|_| tokio::net::TcpStream::connect(("127.0.0.1", ui)))).await;

    assert_eq!(client.query_one("SELECT 6 * 7", &[]).await.unwrap().get::<_, i32>(0), 42);
    let page = get(ui, &format!("/queries/{id}"), &[]).await;
    assert_eq!(page.status, 200);
    assert!(page.head.to_ascii_lowercase().contains("content-security-policy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_users_file_each_user_sees_only_their_own_statements() {
    let users = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(users.path(), "alice:wonderland\nbob:builder\nroot:superuser\n").unwrap();
    let users_file = users.path().to_str().unwrap();
    let (server, ui) = start_with_ui(&["--users-file", users_file, "--ui-admin", "root"]);
    for (user, password, marker) in [("alice", "wonderland", "alice-secret"), ("bob", "builder", "bob-secret")] {
        let url = format!("host=127.0.0.1 port={} user={user} password={password} dbname=postgres", server.port);
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(&format!("SELECT '{marker}'")).await.unwrap();
        // Kept open, so that the connection is listed.
        std::mem::forget(client);
    }
    let basic = |user: &str, password: &str| {
        use base64::Engine as _;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
    };
    let alice = basic("alice", "wonderland");
    let as_alice = [("Authorization", alice.as_str())];

    let anonymous = get(ui, "/queries", &[]).await;
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.head.contains("WWW-Authenticate: Basic") || anonymous.head.contains("www-authenticate: Basic"));
    assert!(!anonymous.body.contains("secret"));
    let wrong = basic("alice", "builder");
    assert_eq!(get(ui, "/api/v1/queries", &[("Authorization", wrong.as_str())]).await.status, 401);

    let page = get(ui, "/queries", &as_alice).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("alice-secret") && !page.body.contains("bob-secret"), "{}", page.body);
    let listed = get_json(ui, "/api/v1/queries", &as_alice).await;
    assert!(listed.as_array().unwrap().iter().all(|q| q["user"] == "alice"), "{listed}");
    let connections = get_json(ui, "/api/v1/connections", &as_alice).await;
    assert!(connections.as_array().unwrap().iter().all(|c| c["user"] == "alice"), "{connections}");
    assert!(!get(ui, "/connections", &as_alice).await.body.contains("bob"));

    let root = basic("root", "superuser");
    let as_root = [("Authorization", root.as_str())];
    let bobs = query_id(ui, "SELECT 'bob-secret'", &as_root).await;
    assert_eq!(get(ui, &format!("/queries/{bobs}"), &as_alice).await.status, 404);
    assert_eq!(get(ui, &format!("/api/v1/queries/{bobs}"), &as_alice).await.status, 404);
    let bob = get_json(ui, &format!("/api/v1/queries/{bobs}"), &as_root).await;
    assert_eq!(bob["user"], "bob");
    let everyone = get_json(ui, "/api/v1/connections", &as_root).await;
    let bob_pid = everyone.as_array().unwrap().iter().find(|c| c["user"] == "bob").unwrap()["pid"].as_i64().unwrap();
    assert_eq!(get(ui, &format!("/connections/{bob_pid}/settings"), &as_alice).await.status, 404);
    assert_eq!(get(ui, &format!("/connections/{bob_pid}/settings"), &as_root).await.status, 200);

    // pg_stat_statements' page: both ran `SELECT $1`, each sees their own line.
    let users_of = |statements: Value| {
        let lines = statements.as_array().unwrap().clone();
        let mut users: Vec<String> = lines
            .iter()
            .filter(|s| s["query"] == "SELECT $1")
            .map(|s| format!("{} {}", s["user"].as_str().unwrap(), s["calls"]))
            .collect();
        users.sort();
        users
    };
    assert_eq!(users_of(get_json(ui, "/api/v1/statements", &as_alice).await), ["alice 1"]);
    assert_eq!(users_of(get_json(ui, "/api/v1/statements", &as_root).await), ["alice 1", "bob 1"]);
    let page = get(ui, "/statements", &as_alice).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<td class=\"sql\">SELECT $1</td>") && !page.body.contains("bob"), "{}", page.body);
    assert_eq!(get(ui, "/statements", &[]).await.status, 401);
}

/// Every series of `/metrics` as Prometheus' own text parser (the Python client's) reads it:
/// family name to its type, help and samples.
async fn scrape(ui: u16, headers: &[(&str, &str)]) -> Value {
    let answer = get(ui, "/metrics", headers).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{}", answer.head);
    let python = crate::clients::python_env("python-clients", "requirements.txt");
    let mut parser = std::process::Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/parse_metrics.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    parser.stdin.take().unwrap().write_all(answer.body.as_bytes()).unwrap();
    let parsed = parser.wait_with_output().unwrap();
    assert!(parsed.status.success(), "the text format did not parse:\n{}", answer.body);
    serde_json::from_slice(&parsed.stdout).unwrap()
}

/// The value of the sample `name` whose labels include `labels` (0 when there is none).
fn sample(families: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    families
        .as_object()
        .unwrap()
        .values()
        .flat_map(|family| family["samples"].as_array().unwrap())
        .filter(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][k] == *v))
        .map(|s| s["value"].as_f64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text_ask_for_the_password_and_count_what_ran() {
    let args = ["--password", "secret", "--memory-limit", "256MiB", "--max-connections", "1"];
    let (server, ui) = start_with_ui(&args);
    assert_eq!(get(ui, "/metrics", &[]).await.status, 401);
    let auth = [("Authorization", "Basic cG9zdGdyZXM6c2VjcmV0")];
    let url = format!("{} password=secret", server.connection_string());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(CO_BUCKETED_TABLES).await.unwrap();

    let before = scrape(ui, &auth).await;
    for family in before.as_object().unwrap().values() {
        assert!(!family["help"].as_str().unwrap().is_empty(), "a series without help: {family}");
    }
    // Co-bucketed: the sort-merge join reads both sides by bucket, with no exchange below it.
    let joined = client.simple_query("SELECT count(*) FROM a JOIN b ON a.k = b.k").await.unwrap();
    assert!(matches!(&joined[1], tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some("1000")));
    assert!(client.simple_query("SELECT 1 / 0").await.is_err());
    client.batch_execute("INSERT INTO a VALUES (5000, 1)").await.unwrap();
    let after = scrape(ui, &auth).await;

    // Adaptive execution, as Spark's would: a grouping of a few rows reads its 200 shuffle
    // partitions coalesced into one, and a join of small plain tables becomes a broadcast once
    // its stages have run (with keys in most shuffle partitions: a side mostly of empty ones
    // is not broadcast, by `spark.sql.adaptive.nonEmptyPartitionRatioForBroadcastJoin`).
    client
        .batch_execute(
            "CREATE TABLE p (k BIGINT, v BIGINT) USING parquet;
             CREATE TABLE q (k BIGINT, w BIGINT) USING parquet;
             INSERT INTO p SELECT id % 1000, id FROM range(2000);
             INSERT INTO q SELECT id, id FROM range(1000);
             SET spark.sql.adaptive.autoBroadcastJoinThreshold = 10MB;",
        )
        .await
        .unwrap();
    let adaptive_before = scrape(ui, &auth).await;
    client.batch_execute("SELECT k, count(*) FROM p GROUP BY k").await.unwrap();
    client.batch_execute("SELECT count(*) FROM p JOIN q ON p.k = q.k").await.unwrap();
    let adaptive_after = scrape(ui, &auth).await;
    let adapted = |name: &str| sample(&adaptive_after, name, &[]) - sample(&adaptive_before, name, &[]);
    assert_eq!(adapted("bucketsql_adaptive_runtime_broadcasts_total"), 1.0);
    assert!(adapted("bucketsql_adaptive_partitions_coalesced_total") >= 199.0);
    assert_eq!(adapted("bucketsql_adaptive_skew_splits_total"), 0.0);
    assert_eq!(adapted("bucketsql_exchanges_avoided_total"), 0.0, "plain tables are shuffled");

    // A client past --max-connections is refused; an overwrite's replaced file is deleted.
    let refused = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.err().expect("refused past the limit");
    assert_eq!(sqlstate(&refused), "53300");
    client.batch_execute("INSERT OVERWRITE TABLE q SELECT id, id FROM range(10)").await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let cleaned = loop {
        let now = scrape(ui, &auth).await;
        let janitor = "bucketsql_janitor_files_removed_total";
        let removed = sample(&now, janitor, &[]) - sample(&adaptive_after, janitor, &[]);
        if removed >= 1.0 || std::time::Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let moved_since = |name: &str| sample(&cleaned, name, &[]) - sample(&adaptive_after, name, &[]);
    assert_eq!(moved_since("bucketsql_connections_refused_total"), 1.0);
    assert!(moved_since("bucketsql_janitor_files_removed_total") >= 1.0);

    let moved = |name: &str, labels: &[(&str, &str)]| sample(&after, name, labels) - sample(&before, name, labels);
    let ok_select = [("kind", "SELECT"), ("outcome", "ok"), ("sqlstate_class", "00")];
    assert_eq!(moved("bucketsql_statements_total", &ok_select), 1.0);
    let divided = [("kind", "SELECT"), ("outcome", "error"), ("sqlstate_class", "22")];
    assert_eq!(moved("bucketsql_statements_total", &divided), 1.0);
    assert_eq!(moved("bucketsql_statements_total", &[("kind", "INSERT")]), 1.0);
    assert_eq!(moved("bucketsql_statement_duration_seconds_count", &[]), 3.0);
    assert_eq!(moved("bucketsql_exchanges_avoided_total", &[]), 2.0);
    assert_eq!(moved("bucketsql_rows_read_total", &[]), 2000.0);
    assert!(moved("bucketsql_bytes_read_total", &[]) > 0.0);
    assert_eq!(moved("bucketsql_commits_total", &[]), 1.0);
    assert_eq!(sample(&after, "bucketsql_connections_open", &[]), 1.0);
    assert_eq!(sample(&after, "bucketsql_memory_pool_limit_bytes", &[]), 256.0 * 1024.0 * 1024.0);
    assert_eq!(after["bucketsql_statement_duration_seconds"]["type"], "histogram");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_serves_tls_with_the_servers_certificate_and_moves_past_a_taken_port() {
    use pgwire::tokio::tokio_rustls::TlsConnector;
    use pgwire::tokio::tokio_rustls::rustls::pki_types::ServerName;
    use pgwire::tokio::tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let dir = tempfile::tempdir().unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    // The port asked for is taken: the UI takes the next one, as Spark's does.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let asked = taken.local_addr().unwrap().port();
    let address = format!("127.0.0.1:{asked}");
    let _server = TestServer::start_fresh(&[
        "--ui",
        &address,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);

    let mut roots = RootCertStore::empty();
    roots.add(generated.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(pgwire::tokio::tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = TlsConnector::from(std::sync::Arc::new(config));
    // The first of the next ports that answers TLS with the server's certificate (a port
    // right after the taken one may be another test's).
    let mut found = None;
    for port in asked + 1..=asked + 16 {
        let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { continue };
        if let Ok(tls) = connector.connect(ServerName::try_from("127.0.0.1").unwrap(), tcp).await {
            found = Some((port, tls));
            break;
        }
    }
    let (port, mut tls) = found.expect("the web UI on one of the 16 ports after the taken one, over TLS");
    tls.write_all(format!("GET /tables HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("<h1>Tables</h1>"));
}

#[test]
fn a_web_ui_beyond_loopback_needs_a_password() {
    let data = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bucketsql"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--ui", &format!("0.0.0.0:{}", free_port()), "--data-dir"])
        .arg(data.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("web UI") && stderr.contains("--password"), "{stderr}");
}

#[tokio::test]
async fn statements_show_the_transaction_block_they_ran_in() {
    let (server, ui) = start_with_ui(&[]);
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (k BIGINT) USING parquet").await.unwrap();
    for sql in ["BEGIN", "INSERT INTO t VALUES (1)", "SELECT count(*) FROM t", "COMMIT", "SELECT 42"] {
        client.simple_query(sql).await.unwrap();
    }
    let queries = get_json(ui, "/api/v1/queries", &[]).await;
    let transaction_of = |sql: &str| {
        let query = queries.as_array().unwrap().iter().find(|q| q["sql"] == sql).unwrap_or_else(|| panic!("{sql}"));
        query["transaction"].clone()
    };
    let block = transaction_of("INSERT INTO t VALUES (1)");
    assert!(block.is_u64(), "{queries}");
    assert_eq!(transaction_of("SELECT count(*) FROM t"), block);
    assert_eq!(transaction_of("COMMIT"), block);
    assert_eq!(transaction_of("SELECT 42"), Value::Null);
    assert_eq!(transaction_of("CREATE TABLE t (k BIGINT) USING parquet"), Value::Null);

    let list = get(ui, "/queries", &[]).await;
    assert!(list.body.contains("<th>Transaction</th>"), "{}", list.body);
    let id = query_id(ui, "SELECT count(*) FROM t", &[]).await;
    let page = get(ui, &format!("/queries/{id}"), &[]).await;
    assert!(page.body.contains(&format!("<td id=\"transaction\">block {block}</td>")), "{}", page.body);
}

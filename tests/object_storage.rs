//! Tables on object storage: a real S3-compatible server (moto's server mode, from PyPI, on
//! 127.0.0.1) with a bucket made here, and `bucketsql serve --warehouse s3://…` over the wire.
//! What the bucket holds is read back with an S3 client of the test's own; the rows expected
//! are worked out from how the tables were filled.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bucketsql::storage::bucket_hash::bucket_ids;
use bucketsql::storage::file_naming::bucket_id_of;
use bytes::Bytes;
use datafusion::arrow::array::{Array, ArrayRef, Int64Array};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::browser::Browser;
use crate::clients::python_env;
use crate::common::{TestServer, free_port, sqlstate, text_rows};
use crate::web_ui::open_statement_page;

const BUCKET: &str = "lake";
const CREDENTIALS: [(&str, &str); 3] =
    [("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1")];

/// moto's S3 server, its objects in memory, stopped when dropped.
struct S3Server {
    child: Child,
    port: u16,
}

impl S3Server {
    fn start() -> Self {
        Self::start_with_env(&[])
    }

    /// A server with `env` set: moto checks credentials past the first
    /// `INITIAL_NO_AUTH_ACTION_COUNT` requests, and knows none but its IAM users'.
    fn start_with_env(env: &[(&str, &str)]) -> Self {
        let python = python_env("python-s3", "s3-requirements.txt");
        let port = free_port();
        let child = Command::new(&python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto's server starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto's server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let server = S3Server { child, port };
        let create = format!(
            "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:{port}', region_name='us-east-1', \
             aws_access_key_id='test', aws_secret_access_key='test').create_bucket(Bucket='{BUCKET}')"
        );
        crate::clients::run(Command::new(&python).args(["-c", &create]));
        server
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A client of the bucket that is not the server's.
    fn bucket(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve`'s arguments for a warehouse in the bucket, reached at `endpoint`.
fn warehouse_args(endpoint: &str) -> Vec<String> {
    ["--warehouse", &format!("s3://{BUCKET}/warehouse"), "--s3-endpoint", endpoint, "--s3-allow-http"]
        .map(String::from)
        .to_vec()
}

fn start_bucketsql(data_dir: &std::path::Path, endpoint: &str) -> TestServer {
    let mut args = warehouse_args(endpoint);
    args.extend(["--allow-location".to_string(), format!("s3://{BUCKET}/external")]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    TestServer::start_with_env(data_dir, &args, &CREDENTIALS)
}

/// The store's path of a key, as the key is (`%XX` escapes and all).
fn object_key(key: &str) -> ObjectPath {
    ObjectPath::parse(key).unwrap()
}

/// Every object under `prefix`, by key, with its size.
async fn objects(bucket: &AmazonS3, prefix: &str) -> BTreeMap<String, u64> {
    let listed: Vec<_> = bucket.list(Some(&object_key(prefix))).try_collect().await.unwrap();
    listed.into_iter().map(|o| (o.location.to_string(), o.size)).collect()
}

/// Waits for the objects under `prefix` to be those `wanted` says (the janitor deletes in the
/// background), and gives them.
async fn objects_until(
    bucket: &AmazonS3,
    prefix: &str,
    wanted: impl Fn(&BTreeMap<String, u64>) -> bool,
) -> BTreeMap<String, u64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = objects(bucket, prefix).await;
        if wanted(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "the objects under {prefix} stayed {found:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The keys of the multipart uploads the bucket holds open: their parts are out of every
/// listing of objects. Asked of moto unsigned, as it checks no credentials here.
async fn open_uploads(port: u16) -> Vec<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = format!("GET /{BUCKET}?uploads HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.lines().next().is_some_and(|status| status.contains(" 200 ")), "{answer}");
    answer.split("<Key>").skip(1).map(|rest| rest.split("</Key>").next().unwrap().to_string()).collect()
}

/// Spark's name for a data file: `part-<task>-<write id>[_<bucket>].c000.snappy.parquet`.
fn is_sparks_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("part-").and_then(|r| r.strip_suffix(".c000.snappy.parquet")) else {
        return false;
    };
    let (task, id) = rest.split_at(5.min(rest.len()));
    task.chars().all(|c| c.is_ascii_digit()) && id.starts_with('-') && id.len() >= 37
}

/// Every object of a bucketed table holds only rows of the Spark bucket its name gives,
/// sorted on `key`; the keys of each bucket.
async fn bucket_layout(bucket: &AmazonS3, prefix: &str, key: &str, buckets: u32) -> BTreeMap<u32, Vec<i64>> {
    let mut rows = BTreeMap::new();
    for name in objects(bucket, prefix).await.keys() {
        let file = name.rsplit('/').next().unwrap();
        assert!(is_sparks_name(file), "{name} is not named as Spark names its files");
        let id = bucket_id_of(file).unwrap_or_else(|| panic!("{name} names no bucket"));
        let bytes: Bytes = bucket.get(&object_key(name)).await.unwrap().bytes().await.unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap().build().unwrap();
        let mut keys = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let column = batch.column_by_name(key).unwrap().as_any().downcast_ref::<Int64Array>().unwrap().clone();
            keys.extend(column.iter().map(Option::unwrap));
        }
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{name} is not sorted on {key}");
        let array: ArrayRef = Arc::new(Int64Array::from(keys.clone()));
        assert!(bucket_ids(&[array], keys.len(), buckets).unwrap().iter().all(|b| *b == id), "{name}: other buckets");
        rows.entry(id).or_insert_with(Vec::new).extend(keys);
    }
    rows
}

fn row_count(layout: &BTreeMap<u32, Vec<i64>>) -> usize {
    layout.values().map(Vec::len).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_live_in_an_s3_warehouse_in_sparks_layout() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut server = start_bucketsql(&data_dir, &s3.endpoint());
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS;
             INSERT INTO t SELECT id * 7 % 10007, id FROM range(20000);
             CREATE TABLE u USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 8 BUCKETS AS
                 SELECT id AS k, id * 2 AS w FROM range(10007);
             CREATE TABLE p (v BIGINT, d STRING) USING parquet PARTITIONED BY (d);
             INSERT INTO p SELECT id, CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END FROM range(1000);
             CREATE TABLE plain (k BIGINT, s STRING) USING parquet;
             SET spark.sql.autoBroadcastJoinThreshold = -1;",
        )
        .await
        .unwrap();
    let sink = client.copy_in("COPY plain FROM STDIN").await.unwrap();
    let rows: String = (0..500).map(|i| format!("{i}\tr{i}\n")).collect();
    futures::pin_mut!(sink);
    futures::SinkExt::send(&mut sink, Bytes::from(rows)).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 500);

    // Every object is where Spark looks for it, named as Spark names it, holding its bucket.
    let t_layout = bucket_layout(&bucket, "warehouse/default/t", "k", 8).await;
    assert_eq!(row_count(&t_layout), 20000);
    let u_layout = bucket_layout(&bucket, "warehouse/default/u", "k", 8).await;
    assert_eq!(u_layout.len(), 8);

    // SHOW BUCKETS reads each object's footer: its bucket's rows, range and declared order.
    let shown = text_rows(&client, "SHOW BUCKETS u").await;
    let expected: Vec<Vec<String>> = u_layout
        .iter()
        .map(|(id, keys)| {
            let (min, max) = (keys.iter().min().unwrap(), keys.iter().max().unwrap());
            vec![id.to_string(), "1".into(), keys.len().to_string(), min.to_string(), max.to_string(), "t".into()]
        })
        .collect();
    let without_bytes: Vec<Vec<String>> = shown.into_iter().map(|r| [&r[0..3], &r[4..]].concat()).collect();
    assert_eq!(without_bytes, expected);
    let partitions: Vec<String> = objects(&bucket, "warehouse/default/p")
        .await
        .keys()
        .map(|k| k.split('/').nth(3).unwrap().to_string())
        .collect();
    assert!(partitions.iter().all(|p| p == "d=even" || p == "d=odd") && partitions.len() >= 2, "{partitions:?}");
    assert!(!objects(&bucket, "warehouse/default/plain").await.is_empty());

    // The co-bucketed join reads bucket by bucket from the store, with no exchange.
    let join = "SELECT count(*), sum(v + w) FROM t JOIN u ON t.k = u.k";
    let expected_sum: i64 = (0..20000i64).map(|id| id + 2 * (id * 7 % 10007)).sum();
    assert_eq!(text_rows(&client, join).await, vec![vec!["20000".to_string(), expected_sum.to_string()]]);
    let plan = text_rows(&client, &format!("EXPLAIN {join}")).await.concat().join("\n");
    assert!(!plan.contains("Exchange hashpartitioning"), "{plan}");
    assert_eq!(
        text_rows(&client, "SELECT d, count(*), sum(v) FROM p GROUP BY d ORDER BY d").await,
        [["even", "500", "249500"], ["odd", "500", "250000"]]
    );
    assert_eq!(text_rows(&client, "SELECT count(*), sum(k), max(s) FROM plain").await, [["500", "124750", "r99"]]);
    // External tables over objects another writer put there, read by their names and footers.
    for object in objects(&bucket, "warehouse/default/u").await.keys() {
        let name = object.rsplit('/').next().unwrap();
        bucket.copy(&object_key(object), &object_key(&format!("external/ev/{name}"))).await.unwrap();
    }
    client
        .batch_execute(
            "CREATE TABLE ev (k BIGINT, w BIGINT) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS
             LOCATION 's3a://lake/external/ev'",
        )
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*), sum(w) FROM ev").await, [["10007", "100130042"]]);
    let one = objects(&bucket, "external/ev").await.into_keys().next().unwrap();
    let copy = one.replace("part-", "part-9");
    bucket.copy(&object_key(&one), &object_key(&copy)).await.unwrap();
    let one_bucket = text_rows(&client, "SELECT count(*) FROM ev").await;
    assert_eq!(one_bucket, [["10007"]], "an object not refreshed is not read");
    client.batch_execute("REFRESH TABLE ev").await.unwrap();
    let refreshed: i64 = text_rows(&client, "SELECT count(*) FROM ev").await[0][0].parse().unwrap();
    assert!(refreshed > 10007, "{refreshed}");
    // Another session's write under way has its objects at their final keys already: a table
    // registered over the prefix, or refreshed, leaves them out until they commit.
    let writer = server.connect().await;
    writer.batch_execute("BEGIN; INSERT INTO ev SELECT id, id FROM range(100)").await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE ev2 (k BIGINT, w BIGINT) USING parquet CLUSTERED BY (k) INTO 8 BUCKETS
             LOCATION 's3://lake/external/ev';
             REFRESH TABLE ev",
        )
        .await
        .unwrap();
    let counted = |table: &'static str| {
        let client = &client;
        async move { text_rows(client, &format!("SELECT count(*) FROM {table}")).await[0][0].parse::<i64>().unwrap() }
    };
    assert_eq!((counted("ev").await, counted("ev2").await), (refreshed, refreshed));
    writer.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!((counted("ev").await, counted("ev2").await), (refreshed, refreshed));
    for object in objects(&bucket, "warehouse/default/p").await.keys() {
        let relative = object.strip_prefix("warehouse/default/p/").unwrap();
        bucket.copy(&object_key(object), &object_key(&format!("external/pe/{relative}"))).await.unwrap();
    }
    client
        .batch_execute(
            "CREATE TABLE pe (v BIGINT, d STRING) USING parquet PARTITIONED BY (d) LOCATION 's3://lake/external/pe';
             MSCK REPAIR TABLE pe",
        )
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM pe WHERE d = 'odd'").await, [["500", "250000"]]);
    // A partition value Spark escapes (`:` as `%3A`) is the key as Spark writes it, and reads
    // back as written, here and over the same objects registered again.
    client
        .batch_execute(
            "CREATE TABLE q (v BIGINT, s STRING) USING parquet PARTITIONED BY (s); INSERT INTO q VALUES (1, 'a:b')",
        )
        .await
        .unwrap();
    let q_keys: Vec<String> = objects(&bucket, "warehouse/default/q").await.into_keys().collect();
    assert!(q_keys.iter().all(|k| k.starts_with("warehouse/default/q/s=a%3Ab/")), "{q_keys:?}");
    for object in &q_keys {
        let relative = object.strip_prefix("warehouse/default/q/").unwrap();
        bucket.copy(&object_key(object), &object_key(&format!("external/qe/{relative}"))).await.unwrap();
    }
    client
        .batch_execute(
            "CREATE TABLE qe (v BIGINT, s STRING) USING parquet PARTITIONED BY (s) LOCATION 's3://lake/external/qe';
             MSCK REPAIR TABLE qe; REFRESH TABLE q",
        )
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT s, v FROM q").await, [["a:b", "1"]]);
    assert_eq!(text_rows(&client, "SELECT s, v FROM qe").await, [["a:b", "1"]]);

    let outside = client.batch_execute("CREATE TABLE x (k BIGINT) USING parquet LOCATION 's3://lake/elsewhere'").await;
    assert_eq!(sqlstate(&outside.unwrap_err()), "42501");

    let described = text_rows(&client, "DESCRIBE TABLE EXTENDED t").await;
    assert!(described.iter().any(|r| r[0] == "Location" && r[1] == format!("s3://{BUCKET}/warehouse/default/t")));

    // An overwrite publishes new objects; the old ones go once no statement reads them.
    let before = objects(&bucket, "warehouse/default/t").await;
    client.batch_execute("INSERT OVERWRITE t SELECT id, id FROM range(100)").await.unwrap();
    let after = objects_until(&bucket, "warehouse/default/t", |now| now.keys().all(|k| !before.contains_key(k))).await;
    assert!(!after.is_empty());
    assert_eq!(row_count(&bucket_layout(&bucket, "warehouse/default/t", "k", 8).await), 100);

    // OPTIMIZE rewrites each bucket's objects into one, sorted; the old ones go.
    client.batch_execute("INSERT INTO t SELECT id, id FROM range(100, 200)").await.unwrap();
    let mut appended = bucket_layout(&bucket, "warehouse/default/t", "k", 8).await;
    assert!(objects(&bucket, "warehouse/default/t").await.len() > appended.len(), "one object per bucket already");
    appended.values_mut().for_each(|keys| keys.sort_unstable());
    client.batch_execute("OPTIMIZE t").await.unwrap();
    objects_until(&bucket, "warehouse/default/t", |now| now.len() == appended.len()).await;
    assert_eq!(bucket_layout(&bucket, "warehouse/default/t", "k", 8).await, appended);

    // A restart reads every table from the store as it was.
    drop(client);
    server.terminate(Duration::from_secs(30));
    let server = start_bucketsql(&data_dir, &s3.endpoint());
    let client = server.connect().await;
    assert_eq!(text_rows(&client, "SELECT count(*), sum(k) FROM t").await, [["200", "19900"]]);

    // Each scan tells the requests it made and the bytes they fetched; footers, once read,
    // come from the cache.
    let scan_figures = |analyzed: Vec<Vec<String>>| -> (u64, u64) {
        let text = analyzed.concat().join("\n");
        let figure = |name: &str| -> u64 {
            let at = text.find(name).unwrap_or_else(|| panic!("no {name} in\n{text}")) + name.len();
            text[at..].trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
        };
        (figure("read requests"), figure("bytes fetched"))
    };
    let cold = scan_figures(text_rows(&client, "EXPLAIN ANALYZE SELECT sum(w) FROM u").await);
    let warm = scan_figures(text_rows(&client, "EXPLAIN ANALYZE SELECT sum(w) FROM u").await);
    assert!(cold.0 >= 16 && cold.1 > 0, "8 footers and 8 column chunks at least: {cold:?}");
    assert_eq!(warm.0, cold.0 - 8, "the 8 footers are cached: {cold:?} then {warm:?}");
    assert_eq!(text_rows(&client, "SELECT count(*) FROM u").await, [["10007"]]);
    assert_eq!(text_rows(&client, "SELECT count(*) FROM p WHERE d = 'odd'").await, [["500"]]);

    // A rename copies the objects under the new name's prefix and retires the old ones; a
    // prefix that holds objects already is refused.
    let names = |objects: BTreeMap<String, u64>| -> Vec<String> {
        objects.into_keys().map(|k| k.rsplit('/').next().unwrap().to_string()).collect()
    };
    let before = names(objects(&bucket, "warehouse/default/u").await);
    client.batch_execute("ALTER TABLE u RENAME TO v").await.unwrap();
    assert_eq!(names(objects(&bucket, "warehouse/default/v").await), before);
    objects_until(&bucket, "warehouse/default/u/", BTreeMap::is_empty).await;
    assert_eq!(text_rows(&client, "SELECT count(*), sum(w) FROM v").await, [["10007", "100130042"]]);
    bucket.put(&object_key("warehouse/default/taken/x"), Bytes::from_static(b"x").into()).await.unwrap();
    let taken = client.batch_execute("ALTER TABLE v RENAME TO taken").await.expect_err("the prefix is taken");
    assert_eq!(sqlstate(&taken), "42710", "{taken}");

    // DROP leaves nothing of a managed table in the bucket.
    client.batch_execute("DROP TABLE t; DROP TABLE p").await.unwrap();
    objects_until(&bucket, "warehouse/default/t/", BTreeMap::is_empty).await;
    objects_until(&bucket, "warehouse/default/p/", BTreeMap::is_empty).await;
    assert_eq!(text_rows(&client, "SELECT count(*) FROM v").await, [["10007"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_killed_before_its_commit_leaves_no_object_after_a_restart() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    {
        let server = start_bucketsql(&data_dir, &s3.endpoint());
        let client = server.connect().await;
        client
            .batch_execute(
                "CREATE TABLE t (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
                 INSERT INTO t SELECT id, id FROM range(1000)",
            )
            .await
            .unwrap();
    }
    let committed = objects(&bucket, "warehouse/default/t").await;
    assert_eq!(committed.len(), 4);

    // Stopped after its objects are uploaded and before the metastore commits them, then
    // killed there.
    let log_path = temp.path().join("paused.log");
    let args = warehouse_args(&s3.endpoint());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = CREDENTIALS.to_vec();
    env.push(("BUCKETSQL_PAUSE_AT", "staged"));
    let mut paused =
        TestServer::start_logging_with_env(&data_dir, &args, &env, std::fs::File::create(&log_path).unwrap());
    let client = paused.connect().await;
    let write = tokio::spawn(async move { client.batch_execute("INSERT INTO t SELECT id, id FROM range(5000)").await });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log_path).unwrap().contains("paused at a commit step") {
        assert!(Instant::now() < deadline, "the write did not reach its commit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let uploaded = objects(&bucket, "warehouse/default/t").await;
    assert!(uploaded.len() > committed.len(), "the write uploaded nothing before its commit: {uploaded:?}");
    paused.kill();
    assert!(write.await.unwrap().is_err());

    // The next start deletes what the killed write uploaded, and nothing the table lists.
    let server = start_bucketsql(&data_dir, &s3.endpoint());
    let left = objects_until(&bucket, "warehouse/default/t", |now| now.len() == committed.len()).await;
    assert_eq!(left, committed);
    let client = server.connect().await;
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM t").await, [["1000", "499500"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_killed_mid_upload_leaves_no_parts_after_a_restart() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let relay = Relay::start(s3.port).await;
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    // Row groups of a few MiB under this limit, so that each file goes up part by part as it
    // is written.
    let mut args = warehouse_args(&relay.endpoint());
    args.extend(["--memory-limit".to_string(), "64MiB".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = TestServer::start_with_env(&data_dir, &args, &CREDENTIALS);
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE wide (id BIGINT, a INT, b INT, c INT, d INT) USING parquet").await.unwrap();
    // Hashes do not compress: each file passes a part's 10 MiB early on.
    let write = tokio::spawn(async move {
        client
            .batch_execute(
                "INSERT INTO wide SELECT id, hash(id), hash(id, 1), hash(id, 2), hash(id, 3) FROM range(20000000)",
            )
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    while open_uploads(s3.port).await.is_empty() {
        assert!(Instant::now() < deadline, "no multipart upload started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Killed with parts on their way.
    relay.set(Passage::Stalled);
    server.kill();
    assert!(write.await.unwrap().is_err());
    let left = open_uploads(s3.port).await;
    assert!(!left.is_empty(), "the write's uploads ended before the kill");
    assert!(left.iter().all(|key| key.starts_with("warehouse/default/wide/")), "{left:?}");

    // The dead server's requests still held in the relay never reach the store, as a crashed
    // machine's would not: delivered late, a request to start an upload would open one after
    // the next start's recovery had looked.
    relay.set(Passage::Cut);
    // The next start aborts the uploads and deletes any object the write completed.
    let server = start_bucketsql(&data_dir, &s3.endpoint());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !open_uploads(s3.port).await.is_empty() {
        assert!(Instant::now() < deadline, "uploads stayed open: {:?}", open_uploads(s3.port).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    objects_until(&bucket, "warehouse/default/wide/", BTreeMap::is_empty).await;
    let client = server.connect().await;
    assert_eq!(text_rows(&client, "SELECT count(*) FROM wide").await, [["0"]]);
}

/// Virtual-hosted-style addressing: each bucket is a host name under the endpoint's
/// (`lake.s3.test`). No resolver here knows such names, so the server reaches them through an
/// HTTP proxy (`HTTP_PROXY`, which S3 clients honour), a relay to moto, which takes the bucket
/// from the Host header. Addressed path-style, the same requests would name bucket `s3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_addressed_as_host_names_hold_the_tables() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let proxy = Relay::start(s3.port).await;
    let temp = tempfile::tempdir().unwrap();
    let args = [
        "--warehouse",
        &format!("s3://{BUCKET}/warehouse"),
        "--s3-endpoint",
        "http://s3.test",
        "--s3-allow-http",
        "--s3-virtual-hosted-style",
    ];
    let proxy_url = proxy.endpoint();
    let mut env = CREDENTIALS.to_vec();
    env.extend([("HTTP_PROXY", proxy_url.as_str()), ("http_proxy", proxy_url.as_str())]);
    env.extend([("NO_PROXY", ""), ("no_proxy", "")]);
    let server = TestServer::start_with_env(&temp.path().join("data"), &args, &env);
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO t SELECT id, id * 2 FROM range(1000)",
        )
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM t").await, [["1000", "999000"]]);
    let layout = bucket_layout(&bucket, "warehouse/default/t/", "k", 4).await;
    assert_eq!(layout.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(row_count(&layout), 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_ui_shows_an_s3_tables_location_buckets_and_requests() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let temp = tempfile::tempdir().unwrap();
    let ui = free_port();
    let mut args = warehouse_args(&s3.endpoint());
    args.extend(["--ui".to_string(), format!("127.0.0.1:{ui}")]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::start_with_env(&temp.path().join("data"), &args, &CREDENTIALS);
    let client = server.connect().await;
    let scan = "SELECT sum(v) FROM hot WHERE v >= 0";
    client
        .batch_execute(&format!(
            "CREATE TABLE hot (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) SORTED BY (k) INTO 6 BUCKETS;
             INSERT INTO hot SELECT CASE WHEN id % 2 = 0 THEN 7 ELSE id END, id FROM range(30000);
             {scan}"
        ))
        .await
        .unwrap();
    // Rows per bucket as the objects hold them.
    let layout = bucket_layout(&bucket, "warehouse/default/hot/", "k", 6).await;
    let objects = objects(&bucket, "warehouse/default/hot/").await;

    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page().await.unwrap();
    page.goto(&format!("http://127.0.0.1:{ui}/tables")).await.unwrap();
    page.click_and_wait_for_load("a[href='/tables/default/hot']").await.unwrap();
    let text = page.eval("document.body.innerText").await.unwrap();
    assert!(text.as_str().unwrap().contains(&format!("s3://{BUCKET}/warehouse/default/hot")), "{text}");
    let bars = page
        .eval("[...document.querySelectorAll('rect.bucket-bar')].map(b => [Number(b.dataset.bucket), Number(b.dataset.rows)])")
        .await
        .unwrap();
    let expected: Vec<_> = (0..6).map(|b| json!([b, layout.get(&b).map_or(0, Vec::len)])).collect();
    assert_eq!(bars, json!(expected));

    // The scan's box in the statement's plan counts the requests it made to the store.
    open_statement_page(&page, ui, scan).await;
    let figures = page
        .eval(
            "[...document.querySelectorAll('svg[data-graph=final] g.node')].filter(n => n.dataset.kind.endsWith('scan'))\
             .flatMap(n => [...n.querySelectorAll('text.metric')].map(t => t.textContent))",
        )
        .await
        .unwrap();
    let figures: Vec<&str> = figures.as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let figure = |name: &str| {
        let line = figures.iter().find(|f| f.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {figures:?}"));
        line[name.len()..].trim_start_matches(':').trim().to_string()
    };
    // A range of data from each object at least.
    let requests: usize = figure("read requests").replace(',', "").parse().unwrap();
    assert!(requests >= objects.len(), "{requests} requests for {} objects: {figures:?}", objects.len());
    assert!(!figure("bytes fetched").starts_with('0'), "{figures:?}");
}

/// What a [`Relay`] does with connections to the S3 server.
#[derive(Clone, Copy, PartialEq)]
#[repr(u8)]
enum Passage {
    Open,
    /// Every connection cut and new ones refused, as when the store stops.
    Cut,
    /// Connections held open with nothing passing either way, as when the store hangs.
    Stalled,
}

/// A TCP relay to the S3 server whose [`Passage`] the test sets.
struct Relay {
    port: u16,
    passage: Arc<AtomicU8>,
}

impl Relay {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let passage = Arc::new(AtomicU8::new(Passage::Open as u8));
        let gate = Arc::clone(&passage);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let gate = Arc::clone(&gate);
                tokio::spawn(async move {
                    let now = || gate.load(Ordering::SeqCst);
                    while now() == Passage::Stalled as u8 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if now() == Passage::Cut as u8 {
                        return;
                    }
                    let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await else { return };
                    let relay = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                    let closed = async {
                        while now() == Passage::Open as u8 {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    };
                    tokio::select! { _ = relay => return, () = closed => {} }
                    // A stalled connection stays open, silent, until the store is back; then
                    // it ends, and the client opens another.
                    while now() == Passage::Stalled as u8 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                });
            }
        });
        Relay { port, passage }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn set(&self, passage: Passage) {
        self.passage.store(passage as u8, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_stops_mid_write_fails_the_write_and_publishes_nothing() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let relay = Relay::start(s3.port).await;
    let temp = tempfile::tempdir().unwrap();
    let local = temp.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let mut args = warehouse_args(&relay.endpoint());
    args.extend(["--allow-location".to_string(), local.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::start_with_env(&temp.path().join("data"), &args, &CREDENTIALS);
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE t (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
             INSERT INTO t SELECT id, id FROM range(1000);
             CREATE TABLE here (k BIGINT) USING parquet LOCATION '{}';
             INSERT INTO here VALUES (1), (2)",
            local.join("here").display()
        ))
        .await
        .unwrap();
    let committed = objects(&bucket, "warehouse/default/t").await;

    // The store goes away while the write uploads.
    let cut = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        relay.set(Passage::Cut);
    };
    let write = client.batch_execute("INSERT INTO t SELECT id, id FROM range(3000000)");
    let (result, ()) = tokio::join!(write, cut);
    let error = result.expect_err("a write to a store that stopped fails");
    assert_eq!(sqlstate(&error), "58030", "{error}");

    // The connection stays usable and tables elsewhere still serve.
    assert_eq!(text_rows(&client, "SELECT sum(k) FROM here").await, [["3"]]);
    let unreachable = client.simple_query("SELECT sum(v) FROM t").await.expect_err("the store is unreachable");
    assert_eq!(sqlstate(&unreachable), "58030", "{unreachable}");

    // Back again: the table reads as before, and the write left nothing behind.
    relay.set(Passage::Open);
    assert_eq!(text_rows(&client, "SELECT count(*), sum(v) FROM t").await, [["1000", "499500"]]);
    objects_until(&bucket, "warehouse/default/t", |now| *now == committed).await;

    // A store that hangs holds a statement only until its statement_timeout.
    relay.set(Passage::Stalled);
    client.batch_execute("SET statement_timeout = '2s'").await.unwrap();
    let started = Instant::now();
    let hung = client.simple_query("SELECT sum(v) FROM t").await.expect_err("a hung store times out");
    assert_eq!(sqlstate(&hung), "57014", "{hung}");
    assert!(started.elapsed() < Duration::from_secs(20), "cancelled after {:?}", started.elapsed());
    relay.set(Passage::Open);
    client.batch_execute("RESET statement_timeout").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT sum(v) FROM t").await, [["499500"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_the_store_refuses_fail_the_write_with_42501() {
    let s3 = S3Server::start_with_env(&[("INITIAL_NO_AUTH_ACTION_COUNT", "1")]);
    let temp = tempfile::tempdir().unwrap();
    let server = start_bucketsql(&temp.path().join("data"), &s3.endpoint());
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE t (k BIGINT) USING parquet").await.unwrap();
    let refused = client.batch_execute("INSERT INTO t VALUES (1), (2)").await.expect_err("the keys are refused");
    assert_eq!(sqlstate(&refused), "42501", "{refused}");
    assert_eq!(text_rows(&client, "SELECT 1 + 1").await, [["2"]]);
    assert_eq!(text_rows(&client, "SELECT count(*) FROM t").await, [["0"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_writes_checks_and_times_its_tables_on_s3() {
    let s3 = S3Server::start();
    let bucket = s3.bucket();
    let temp = tempfile::tempdir().unwrap();
    let bench = Command::new(env!("CARGO_BIN_EXE_bucketsql"))
        .args(["bench", "--rows", "20000", "--buckets", "4", "--runs", "1", "--query-history", "0"])
        .args(warehouse_args(&s3.endpoint()))
        .arg("--data-dir")
        .arg(temp.path().join("bench"))
        .envs(CREDENTIALS)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&bench.stdout);
    assert!(bench.status.success(), "{report}\n{}", String::from_utf8_lossy(&bench.stderr));
    assert!(report.contains(&format!("write (s3://{BUCKET}/warehouse/default)")), "{report}");
    assert!(report.contains("layout: 4 files, 20000 rows, every row in its Spark bucket"), "{report}");
    // The bucketed table's objects are in the bucket, each holding its bucket's rows.
    let layout = bucket_layout(&bucket, "warehouse/default/tx", "account_id", 4).await;
    assert_eq!(row_count(&layout), 20000);
    // Each query's scans made requests to the store.
    let join = report.lines().find(|l| l.starts_with("join count/sum") && l.contains(" bucketed ")).unwrap();
    let requests: u64 = join.split_whitespace().nth(6).unwrap().parse().unwrap();
    assert!(requests > 0, "{join}");
}

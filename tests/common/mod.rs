//! A `bucketsql serve` process for one test.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

/// Two tables bucketed alike, 1,000 rows each on keys 0..999, and broadcasts off: their join
/// on `k` is a sort-merge join that reads both sides by bucket, with no exchange below it.
pub const CO_BUCKETED_TABLES: &str = "
    CREATE TABLE a (k BIGINT, v BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
    CREATE TABLE b (k BIGINT, w BIGINT) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS;
    INSERT INTO a SELECT id, id FROM range(1000);
    INSERT INTO b SELECT id, id FROM range(1000);
    SET spark.sql.autoBroadcastJoinThreshold = -1;";

pub struct TestServer {
    child: Child,
    pub port: u16,
    data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl TestServer {
    /// Starts a server on a fresh data directory.
    pub fn start() -> Self {
        Self::start_fresh(&[])
    }

    /// Starts a server on a fresh data directory with extra `serve` arguments.
    pub fn start_fresh(args: &[&str]) -> Self {
        let temp = tempfile::tempdir().expect("temp dir");
        let data_dir = temp.path().join("data");
        let mut server = Self::start_with_args(&data_dir, args);
        server._temp = Some(temp);
        server
    }

    /// Starts a server on an existing (or new) data directory; the caller keeps it alive.
    pub fn start_on(data_dir: &Path) -> Self {
        Self::start_with_args(data_dir, &[])
    }

    /// Starts a server with extra `serve` arguments (e.g. `--allow-location DIR`).
    pub fn start_with_args(data_dir: &Path, args: &[&str]) -> Self {
        Self::start_under(&[], data_dir, args)
    }

    /// Starts a server as the last argument of `wrapper` (e.g. `strace -f -o log`).
    pub fn start_under(wrapper: &[&str], data_dir: &Path, args: &[&str]) -> Self {
        Self::spawn(wrapper, data_dir, args, &[], Stdio::null(), "warn")
    }

    /// Starts a server with `env` set in its environment.
    pub fn start_with_env(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(&[], data_dir, args, env, Stdio::null(), "warn")
    }

    /// Starts a server on an existing (or new) data directory that writes its log lines
    /// (standard output) at the default level, `info`, to `log`.
    pub fn start_logging(data_dir: &Path, args: &[&str], log: std::fs::File) -> Self {
        Self::spawn(&[], data_dir, args, &[], Stdio::from(log), "info")
    }

    /// As [`Self::start_logging`], with `env` set in its environment.
    pub fn start_logging_with_env(data_dir: &Path, args: &[&str], env: &[(&str, &str)], log: std::fs::File) -> Self {
        Self::spawn(&[], data_dir, args, env, Stdio::from(log), "info")
    }

    /// As [`Self::start_logging`], with `BUCKETSQL_PAUSE_AT=step`: the server stops at that
    /// step of its next commit and logs that it did, for a test to kill it there.
    pub fn start_pausing_at(data_dir: &Path, step: &str, log: std::fs::File) -> Self {
        Self::spawn(&[], data_dir, &[], &[("BUCKETSQL_PAUSE_AT", step)], Stdio::from(log), "info")
    }

    fn spawn(wrapper: &[&str], data_dir: &Path, args: &[&str], env: &[(&str, &str)], log: Stdio, level: &str) -> Self {
        let port = free_port();
        let mut command = match wrapper {
            [program, wrapper_args @ ..] => {
                let mut command = Command::new(program);
                command.args(wrapper_args).arg(env!("CARGO_BIN_EXE_bucketsql"));
                command
            }
            [] => Command::new(env!("CARGO_BIN_EXE_bucketsql")),
        };
        let child = command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(args)
            // Tests run side by side: a web UI only where a test asks for one, on its own port.
            .args(if args.contains(&"--ui") { &[][..] } else { &["--ui", "off"][..] })
            .env("RUST_LOG", level)
            .envs(env.iter().copied())
            .stdout(log)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("bucketsql starts");
        let server = TestServer { child, port, data_dir: data_dir.to_path_buf(), _temp: None };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "bucketsql did not start listening on {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn connection_string(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port)
    }

    pub async fn connect(&self) -> Client {
        let (client, connection) = tokio_postgres::connect(&self.connection_string(), NoTls).await.expect("connects");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// The server's peak resident memory so far (`VmHWM`), in bytes; its process id is in the
    /// data directory's lock file.
    pub fn peak_memory(&self) -> u64 {
        let pid = std::fs::read_to_string(self.data_dir.join("bucketsql.lock")).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/<pid>/status");
        let kilobytes: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().unwrap();
        kilobytes * 1024
    }

    /// Sends SIGTERM, as a service manager stops a server, and waits up to `timeout` for the
    /// process to exit: its exit status, `None` (and killed) past the timeout.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(sent.success(), "kill -TERM failed");
        wait_with_timeout(&mut self.child, timeout)
    }

    /// Ends the process at once, as a crash or `kill -9` would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(error: &tokio_postgres::Error) -> String {
    error.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE in {error}"))
}

/// The SQLSTATE of the error `sql` fails with.
pub async fn error_code(client: &Client, sql: &str) -> String {
    sqlstate(&client.batch_execute(sql).await.expect_err(sql))
}

/// Rows of a simple-protocol query as text (NULL as "NULL").
pub async fn text_rows(client: &Client, sql: &str) -> Vec<Vec<String>> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => {
                Some((0..row.len()).map(|i| row.get(i).unwrap_or("NULL").to_string()).collect())
            }
            _ => None,
        })
        .collect()
}

/// Every Parquet file under `dir`, sorted.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(parquet_files(&path));
        } else if path.extension().is_some_and(|e| e == "parquet") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Waits for a child process; kills it and returns `None` past `timeout`.
pub fn wait_with_timeout(child: &mut std::process::Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `command` (stdin closed, stdout and stderr into one log file) for at most `timeout`:
/// its exit status, `None` past the timeout, and what it wrote. Past the timeout the processes
/// it started go too (it leads a process group of its own): a script's server left running
/// would take the cores of the tests after it.
pub fn run_logged(command: &mut Command, timeout: Duration) -> (Option<std::process::ExitStatus>, String) {
    use std::os::unix::process::CommandExt;
    let temp = tempfile::tempdir().expect("temp dir");
    let log_path = temp.path().join("output.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} did not start: {e}"));
    let status = wait_with_timeout(&mut child, timeout);
    if status.is_none() {
        let group = libc::pid_t::try_from(child.id()).expect("a process id");
        // SAFETY: kill only sends a signal, here to the group the child led.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    (status, std::fs::read_to_string(&log_path).unwrap_or_default())
}

//! What a client cannot do to the server or its files: names that would leave the
//! warehouse, a second server on a live data directory, partition directories that are not
//! valid escapes, external files of another type than declared, tables over shared files,
//! settings that bypass validation.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{TestServer, parquet_files, sqlstate, text_rows, wait_with_timeout};

#[tokio::test]
async fn table_names_never_become_paths() {
    let server = TestServer::start();
    let client = server.connect().await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    for name in
        [format!("\"{}\"", target.display()), "\"../..\"".to_string(), "\"a/b\"".to_string(), "\".\"".to_string()]
    {
        let err = client.batch_execute(&format!("CREATE TABLE {name} (a INT)")).await.unwrap_err();
        assert_eq!(sqlstate(&err), "42602", "{name}: {err:?}");
        let err = client.batch_execute(&format!("CREATE TABLE {name} AS SELECT 1 AS a")).await.unwrap_err();
        assert_eq!(sqlstate(&err), "42602", "{name}: {err:?}");
    }
    assert!(!target.exists());
    let warehouse = server.data_dir().join("warehouse");
    let entries: Vec<_> =
        std::fs::read_dir(warehouse.join("default")).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(entries.is_empty(), "{entries:?}");
    // The connection goes on, and ordinary names work.
    client.batch_execute("CREATE TABLE plain_name_1 (a INT); INSERT INTO plain_name_1 VALUES (1)").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT a FROM plain_name_1").await, vec![vec!["1"]]);
}

#[tokio::test]
async fn a_location_behind_a_symlink_is_resolved_before_the_check() {
    let temp = tempfile::tempdir().unwrap();
    let allowed = temp.path().join("lake");
    let outside = temp.path().join("outside");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
    let server =
        TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", allowed.to_str().unwrap()]);
    let client = server.connect().await;
    let through_link = allowed.join("link").join("t");
    let err = client
        .batch_execute(&format!("CREATE TABLE linked (a INT) USING parquet LOCATION '{}'", through_link.display()))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "42501", "{err:?}");
    assert!(!outside.join("t").exists());
}

#[tokio::test]
async fn a_second_server_on_a_live_data_directory_stops_and_touches_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    let first = TestServer::start_on(&data);
    let client = first.connect().await;
    client.batch_execute("CREATE TABLE kept (a BIGINT); INSERT INTO kept SELECT id FROM range(1000)").await.unwrap();
    // Something the first server owns that a second one's start-up would delete.
    let spill_marker = data.join("spill").join("in-use");
    std::fs::write(&spill_marker, b"x").unwrap();

    let port = crate::common::free_port();
    let mut second = Command::new(env!("CARGO_BIN_EXE_bucketsql"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_with_timeout(&mut second, Duration::from_secs(30)).expect("the second server exits");
    assert!(!status.success());
    let mut message = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut message).unwrap();
    assert!(message.contains("in use by another bucketsql server"), "{message}");
    assert!(spill_marker.exists(), "the second server deleted the first one's spill files");
    assert_eq!(text_rows(&client, "SELECT count(*) FROM kept").await, vec![vec!["1000"]]);
}

#[tokio::test]
async fn odd_partition_directories_read_as_text_without_a_panic() {
    let temp = tempfile::tempdir().unwrap();
    let lake = temp.path().join("lake");
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", lake.to_str().unwrap()]);
    let client = server.connect().await;
    let dir = lake.join("events");
    client
        .batch_execute(&format!(
            "CREATE TABLE writer (a INT, d STRING) USING parquet PARTITIONED BY (d) LOCATION '{}'; \
             INSERT INTO writer VALUES (1, 'x')",
            dir.display()
        ))
        .await
        .unwrap();
    // A directory written by another tool, whose name is not a valid escape.
    let file = parquet_files(&dir).pop().unwrap();
    let odd = dir.join("d=%aé");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::copy(&file, odd.join(file.file_name().unwrap())).unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE reader (a INT, d STRING) USING parquet PARTITIONED BY (d) LOCATION '{}'",
            dir.display()
        ))
        .await
        .unwrap();
    let rows = text_rows(&client, "SELECT d, a FROM reader ORDER BY d").await;
    assert_eq!(rows, vec![vec!["%aé", "1"], vec!["x", "1"]]);
}

#[tokio::test]
async fn external_files_of_another_type_than_declared_are_refused() {
    let temp = tempfile::tempdir().unwrap();
    let lake = temp.path().join("lake");
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", lake.to_str().unwrap()]);
    let client = server.connect().await;
    let dir = lake.join("ints");
    client
        .batch_execute(&format!(
            "CREATE TABLE writer (k INT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}'; \
             INSERT INTO writer VALUES (1, 'a'), (2, 'b')",
            dir.display()
        ))
        .await
        .unwrap();
    let err = client
        .batch_execute(&format!(
            "CREATE TABLE wider (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}'",
            dir.display()
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "42804", "{err:?}");
    let message = err.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
    assert!(message.contains("declared bigint"), "{message}");
    assert!(text_rows(&client, "SHOW TABLES").await.iter().all(|r| r[1] != "wider"));
    client
        .batch_execute(&format!(
            "CREATE TABLE same (k INT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS LOCATION '{}'",
            dir.display()
        ))
        .await
        .unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*) FROM same").await, vec![vec!["2"]]);
}

#[tokio::test]
async fn overwriting_one_table_keeps_the_files_another_table_lists() {
    let temp = tempfile::tempdir().unwrap();
    let lake = temp.path().join("lake");
    let server = TestServer::start_with_args(&temp.path().join("data"), &["--allow-location", lake.to_str().unwrap()]);
    let client = server.connect().await;
    let dir = lake.join("shared");
    client
        .batch_execute(&format!(
            "CREATE TABLE first_view USING parquet LOCATION '{}' AS SELECT id AS a FROM range(100)",
            dir.display()
        ))
        .await
        .unwrap();
    client
        .batch_execute(&format!("CREATE TABLE second_view (a BIGINT) USING parquet LOCATION '{}'", dir.display()))
        .await
        .unwrap();
    client.batch_execute("INSERT OVERWRITE TABLE first_view SELECT id FROM range(5)").await.unwrap();
    // Deleted files would go at the end of the statement that retired them; another
    // statement makes sure that moment has passed.
    assert_eq!(text_rows(&client, "SELECT count(*) FROM first_view").await, vec![vec!["5"]]);
    assert_eq!(text_rows(&client, "SELECT count(*), sum(a) FROM second_view").await, vec![vec!["100", "4950"]]);
    client.batch_execute("DROP TABLE first_view").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT count(*) FROM second_view").await, vec![vec!["100"]]);
}

#[tokio::test]
async fn set_config_validates_as_set_does() {
    let server = TestServer::start();
    let client = server.connect().await;
    for (name, value) in [("statement_timeout", "soon"), ("spark.sql.shuffle.partitions", "0")] {
        let err = client.batch_execute(&format!("SELECT set_config('{name}', '{value}', false)")).await.unwrap_err();
        assert_eq!(sqlstate(&err), "22023", "{name}: {err:?}");
        let err = client.batch_execute(&format!("SET {name} = '{value}'")).await.unwrap_err();
        assert_eq!(sqlstate(&err), "22023", "{name}: {err:?}");
    }
    assert_eq!(text_rows(&client, "SHOW statement_timeout").await, vec![vec!["statement_timeout", "0"]]);
    client.batch_execute("SELECT set_config('statement_timeout', '50ms', false)").await.unwrap();
    let err = client.batch_execute("SELECT count(*) FROM range(1000000000)").await.unwrap_err();
    assert_eq!(sqlstate(&err), "57014", "{err:?}");
}

/// A power loss must not lose an acknowledged write: every file is fsynced before it is
/// renamed into the table, every directory that changed is fsynced after the renames, and
/// only then does the metastore commit. Watched with strace (Debian's `strace`).
#[tokio::test]
async fn files_and_directories_are_synced_before_the_commit() {
    let temp = tempfile::tempdir().unwrap();
    let log = temp.path().join("syscalls.log");
    let log_arg = log.to_str().unwrap().to_string();
    let wrapper = [
        "strace",
        "-f",
        "-y",
        "-qq",
        "-e",
        "signal=none",
        "-e",
        "trace=fsync,fdatasync,rename,renameat,renameat2",
        "-o",
        &log_arg,
    ];
    let mut server = TestServer::start_under(&wrapper, &temp.path().join("data"), &[]);
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE synced (k BIGINT, d STRING) USING parquet PARTITIONED BY (d) CLUSTERED BY (k) INTO 4 BUCKETS",
        )
        .await
        .unwrap();
    client.batch_execute("INSERT INTO synced SELECT id, CAST(id % 3 AS STRING) FROM range(300)").await.unwrap();
    // The server itself (strace's tracee, whose process id the data directory's lock file
    // holds) ends first: a killed strace would leave it running untraced.
    let pid = std::fs::read_to_string(server.data_dir().join("bucketsql.lock")).unwrap();
    assert!(Command::new("kill").args(["-9", pid.trim()]).status().unwrap().success());
    server.kill();
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().map(|l| l.split_once(' ').map_or(l, |(_, call)| call.trim())).collect();
    let table = server.data_dir().canonicalize().unwrap().join("warehouse/default/synced");
    let position = |pred: &dyn Fn(&str) -> bool| calls.iter().position(|c| pred(c));
    let renames: Vec<(usize, String, String)> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.starts_with("rename") && c.contains("/_temporary/"))
        .map(|(i, c)| {
            let paths: Vec<&str> = c.split('"').skip(1).step_by(2).collect();
            (i, paths[0].to_string(), paths[paths.len() - 1].to_string())
        })
        .collect();
    assert_eq!(renames.len(), 12, "{calls:#?}");
    for (at, staged, target) in &renames {
        let synced = position(&|c| c.starts_with("fsync(") && c.contains(&format!("<{staged}>")));
        assert!(synced.is_some_and(|s| s < *at), "{staged} was not synced before its rename\n{calls:#?}");
        let dir = Path::new(target).parent().unwrap().to_str().unwrap().to_string();
        let dir_synced = calls
            .iter()
            .enumerate()
            .skip(*at)
            .find(|(_, c)| c.starts_with("fsync(") && c.contains(&format!("<{dir}>")));
        assert!(dir_synced.is_some(), "{dir} was not synced after the rename\n{calls:#?}");
    }
    let last_rename = renames.iter().map(|r| r.0).max().unwrap();
    let table_dir_synced =
        calls.iter().enumerate().skip(last_rename).position(|(_, c)| c.contains(&format!("<{}>", table.display())));
    let commit = calls.iter().enumerate().skip(last_rename).position(|(_, c)| c.contains("metastore.sqlite"));
    assert!(table_dir_synced.is_some() && commit.is_some(), "{calls:#?}");
    assert!(table_dir_synced < commit, "the metastore committed before the table directory was synced\n{calls:#?}");
}

//! Real client drivers against the server. The Python drivers are installed into a virtual
//! environment under Cargo's target directory on first use, so `cargo test` needs nothing
//! but Python 3 and access to PyPI.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::TestServer;

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
    let python = env.join("bin/python");
    let stamp = env.join("installed.txt");
    let requirements_file = clients_dir().join(requirements);
    let pinned = std::fs::read_to_string(&requirements_file).unwrap();
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(pinned.as_str()) {
        run(Command::new("python3").args(["-m", "venv"]).arg(&env));
        run(Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements_file));
        std::fs::write(&stamp, pinned).unwrap();
    }
    python
}

#[test]
fn psycopg3_and_asyncpg() {
    let python = python_env("python-clients", "requirements.txt");
    let server = TestServer::start();
    run(Command::new(python).arg(clients_dir().join("python_drivers.py")).arg(server.port.to_string()));
}

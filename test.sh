#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, then checks formatting and lints
# and runs every test. Run as root (or with sudo available for apt-get).
#
# Beyond the Rust toolchain the tests use: psql (tests/psql.rs, tests/security.rs), a JDK and
# Debian's pgjdbc jar (the pgjdbc client and pyspark), Node.js with npm (node-postgres),
# Python 3 with venv (the Python drivers, pyspark) and Chromium (the web UI, tests/web_ui.rs). The tests install the PyPI and npm
# packages themselves, under the cargo target directory. Only what is missing is installed.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v strace >/dev/null || missing+=(strace)
command -v chromium >/dev/null || missing+=(chromium)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test

//! bucketsql: a PostgreSQL-wire SQL server with Apache Spark's table bucketing, executing on
//! Apache DataFusion. The modules follow a statement's way down; an import may skip layers
//! but never points up (`tests/layers.rs` checks it).

pub mod bench; // `bucketsql bench`: the benchmark, a client of the layers below
pub mod catalog; // what exists: the SQLite metastore and column types
pub mod config; // Spark's settings with their defaults and validation
pub mod credentials; // the users' passwords, which the wire server and the web UI both check
pub mod demo; // `bucketsql demo`: the bucketing lesson, a client of the server over the wire
pub mod error; // errors with their SQLSTATEs
pub mod exec; // our operators: bucketed scan, Spark-hash exchanges, joins
pub mod explain; // Spark's EXPLAIN text for our physical plans
pub mod planner; // Spark's physical planning rules, one file per rule
pub mod progress; // progress bars (plain lines off a terminal) for bench and demo
pub mod server; // the PostgreSQL wire: connections, authentication, TLS, result encoding, COPY data
pub mod sql; // what was asked: dialect, sessions, statement dispatch, pg_catalog, table writes
pub mod storage; // table files: bucket hash, Parquet writer, commit protocol, janitor
pub mod ui; // the web UI: statements with their plans drawn, tables with their buckets, settings
pub mod workload; // the transactions and accounts bench and demo write

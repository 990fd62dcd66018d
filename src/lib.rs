//! bucketsql: a PostgreSQL-wire SQL server with Apache Spark's table bucketing, executing on
//! Apache DataFusion. The modules are listed in layer order, from the top: an import may skip
//! layers but never points up, and no files import each other in a circle (`tests/layers.rs`
//! checks both).

pub mod bench; // `bucketsql bench`: the benchmark, a client of the layers below
pub mod demo; // `bucketsql demo`: the bucketing lesson, a client of the server over the wire
pub(crate) mod progress; // progress bars (plain lines off a terminal) for bench and demo
pub(crate) mod workload; // the transactions and accounts bench and demo write
pub mod ui; // the web UI: statements with their plans drawn, tables with their buckets, settings
pub mod server; // the PostgreSQL wire: connections, authentication, TLS, result encoding, COPY data
pub mod credentials; // the users' passwords, which the wire server and the web UI both check
pub mod sql; // what was asked: dialect, sessions, statement dispatch, commands, pg_catalog, table writes
pub(crate) mod explain; // Spark's EXPLAIN text for our physical plans, and the advice after it
pub(crate) mod planner; // Spark's physical planning rules, one file per rule
pub mod exec; // our operators: bucketed scan, Spark-hash exchanges, joins, and the runtime they run on
pub mod storage; // table files: bucket hash, Parquet writer, commit protocol, janitor
pub mod catalog; // what exists: the SQLite metastore, table locations and column types
pub(crate) mod config; // Spark's settings with their defaults and validation
pub mod metrics; // the Prometheus series every layer counts into
pub mod error; // errors with their SQLSTATEs

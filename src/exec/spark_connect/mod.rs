//! Spark Connect: a Spark cluster that runs statements for the server, which keeps the
//! front door (the wire, EXPLAIN, the web UI) and the catalog.

mod client;
mod errors;
mod proto;
mod url;

pub use client::{Registration, SparkConnect, SparkRows};
pub use proto::ExplainMode as SparkExplainMode;
pub use url::SparkConnectUrl;

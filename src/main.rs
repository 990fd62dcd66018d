use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use bucketsql::engine::Engine;
use bucketsql::server::Server;

#[derive(Parser)]
#[command(name = "bucketsql", version, about = "A PostgreSQL-wire SQL server with Apache Spark's table bucketing")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve SQL over the PostgreSQL wire protocol.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:5433")]
        listen: String,
        /// Directory holding the metastore and the table files; created if missing.
        #[arg(long, default_value = "./bucketsql-data")]
        data_dir: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    match Cli::parse().command {
        Command::Serve { listen, data_dir } => {
            let engine = Engine::open(&data_dir)?;
            let server = Server::bind(&listen, engine).await?;
            tracing::info!(address = %server.local_addr()?, data_dir = %data_dir.display(), "bucketsql is listening");
            server.run().await?;
        }
    }
    Ok(())
}

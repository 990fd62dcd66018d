//! The PostgreSQL wire front end: accepts connections and gives each its own session.

pub mod auth;
pub mod cancel;
pub mod copy;
pub mod encoding;
pub mod handler;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use pgwire::tokio::TlsAcceptor;
use tokio::net::TcpListener;

use crate::sql::engine::Engine;
use crate::sql::session::Session;
use auth::Authenticator;
use handler::ConnectionHandlers;

/// A bound listener; `run` serves until the process ends.
pub struct Server {
    listener: TcpListener,
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
    tls: Option<TlsAcceptor>,
}

impl Server {
    /// `tls`: offer TLS to clients that ask for it.
    pub async fn bind(
        addr: &str,
        engine: Arc<Engine>,
        auth: Authenticator,
        tls: Option<TlsAcceptor>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Server { listener, engine, auth: Arc::new(auth), tls })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub async fn run(self) -> std::io::Result<()> {
        loop {
            let (socket, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Running out of descriptors must not end the server.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let engine = Arc::clone(&self.engine);
            let auth = Arc::clone(&self.auth);
            let tls = self.tls.clone();
            tokio::spawn(async move {
                let session = match Session::new(engine) {
                    Ok(session) => session,
                    Err(e) => {
                        tracing::error!(%peer, "could not start a session: {e}");
                        return;
                    }
                };
                tracing::debug!(%peer, "connection opened");
                let handlers = Arc::new(ConnectionHandlers::new(session, &auth));
                if let Err(e) = pgwire::tokio::process_socket(socket, tls, handlers).await {
                    tracing::debug!(%peer, "connection ended with an error: {e}");
                }
            });
        }
    }
}

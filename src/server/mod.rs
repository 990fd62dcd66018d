//! The PostgreSQL wire front end: accepts connections and gives each its own session.

pub mod auth;
pub(crate) mod cancel;
pub(crate) mod connection;
pub mod connection_limit;
pub(crate) mod copy;
pub(crate) mod encoding;
pub(crate) mod frame_guard;
pub(crate) mod handler;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use pgwire::tokio::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::metrics::METRICS;
use crate::sql::activity::Backend;
use crate::sql::engine::Engine;
use crate::sql::session::Session;
use auth::Authenticator;
use handler::ConnectionHandlers;

/// Stack of each thread that serves connections: statements parse there, and a parsed
/// statement is walked by recursion, as on the threads that plan and run it.
pub const WORKER_STACK_BYTES: usize = crate::exec::executor::THREAD_STACK_BYTES;

/// What one client, and all of them together, may take of the server.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// Clients served at once (`--max-connections`).
    pub max_connections: usize,
    /// Largest message a client may send (`--max-message-size`).
    pub max_message_bytes: usize,
}

/// A bound listener; `run` serves until the process ends.
pub struct Server {
    listener: TcpListener,
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
    tls: Option<TlsAcceptor>,
    /// One permit per client connection that may be open at once.
    connections: Arc<Semaphore>,
    max_message_bytes: usize,
}

impl Server {
    /// `tls`: offer TLS to clients that ask for it.
    pub async fn bind(
        addr: &str,
        engine: Arc<Engine>,
        auth: Authenticator,
        tls: Option<TlsAcceptor>,
        limits: ClientLimits,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let connections = Arc::new(Semaphore::new(limits.max_connections));
        Ok(Server {
            listener,
            engine,
            auth: Arc::new(auth),
            tls,
            connections,
            max_message_bytes: limits.max_message_bytes,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub async fn run(self) -> std::io::Result<()> {
        self.run_until(std::future::pending()).await
    }

    /// Serves until `shutdown` resolves, then accepts no more connections; those open go on
    /// (see [`Engine::finish_statements`]).
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = &mut shutdown => return Ok(()),
            };
            let (socket, peer) = match accepted {
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
            let connections = Arc::clone(&self.connections);
            let max_message_bytes = self.max_message_bytes;
            tokio::spawn(async move {
                if !connection_limit::sends_anything(&socket).await {
                    return;
                }
                let permit = connections.try_acquire_owned().ok();
                if permit.is_none() && !connection_limit::is_cancel_request(&socket).await {
                    METRICS.connections_refused.inc();
                    tracing::warn!(%peer, "connection refused: too many clients");
                    connection_limit::refuse(socket).await;
                    return;
                }
                let backend = Arc::new(Backend::new(Some(peer)));
                // Listed in `pg_stat_activity` until this task ends, however the connection ends.
                let _listed = engine.backends.register(Arc::clone(&backend));
                let session = match Session::new(engine, backend) {
                    Ok(session) => session,
                    Err(e) => {
                        tracing::error!(%peer, "could not start a session: {e}");
                        return;
                    }
                };
                tracing::debug!(%peer, "connection opened");
                let _open = OpenConnection::count();
                let handlers = ConnectionHandlers::new(session, &auth);
                if let Err(e) = connection::serve(socket, tls, handlers, max_message_bytes).await {
                    tracing::debug!(%peer, "connection ended with an error: {e}");
                }
                drop(permit);
            });
        }
    }
}

/// Counted among the open connections while it lives, and once among those accepted.
struct OpenConnection;

impl OpenConnection {
    fn count() -> Self {
        METRICS.connections_opened.inc();
        METRICS.connections_open.inc();
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        METRICS.connections_open.dec();
    }
}

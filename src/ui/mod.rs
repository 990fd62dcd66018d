//! The web UI, Spark's SQL tab for bucketsql: the statements run lately with their plans drawn
//! as graphs (every exchange in sight, what each operator measured, why each exchange is
//! there), `pg_stat_statements`, the tables with their buckets, and each connection's
//! settings; the same as JSON under `/api/v1/`, and the server's metrics at `/metrics`. Pages are rendered here, with no script; the UI only reads, except that
//! a running statement can be cancelled from its page, as a CancelRequest would.
//!
//! It asks for the SQL server's credentials where the server has any (HTTP Basic), serves TLS
//! with its certificate, and, when users have passwords of their own, shows each user only
//! their own statements and connections, unless they are the `--ui-admin`.

mod access;
mod api;
mod html;
mod pages;
mod plan_svg;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use pgwire::tokio::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::credentials::Passwords;
use crate::sql::engine::Engine;
pub use access::Access;
use state::UiState;

/// Spark's UI port, `spark.ui.port`.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:4040";
/// Ports tried past a taken one, as Spark's `spark.port.maxRetries`.
const PORT_RETRIES: u16 = 16;
/// Browser connections served at once; more wait for one to end.
const MAX_CONNECTIONS: usize = 64;
/// A request's line and headers, at most: a longer one is refused (414 or 431) unread.
const MAX_HEAD_BYTES: usize = 16 << 10;
/// A connection that completes no TLS handshake or request head for this long is closed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A bound web UI; `run` serves it until the process ends.
pub struct WebUi {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
}

impl WebUi {
    /// Binds `addr`, or, when its port is taken, the first free one of the next 16, as Spark
    /// does. `passwords`: the SQL server's; `admin`: the user who sees every user's
    /// statements when users have passwords of their own.
    pub async fn bind(
        addr: SocketAddr,
        engine: Arc<Engine>,
        passwords: Option<Arc<Passwords>>,
        admin: Option<String>,
        tls: Option<TlsAcceptor>,
    ) -> std::io::Result<WebUi> {
        let listener = bind_from(addr).await?;
        let access = Arc::new(Access::new(passwords, admin));
        Ok(WebUi { listener, tls, router: router(Arc::new(UiState { engine }), access) })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub async fn run(self) {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else { return };
            let (socket, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("web UI accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (router, tls) = (self.router.clone(), self.tls.clone());
            tokio::spawn(async move {
                let served = match tls {
                    Some(tls) => match tokio::time::timeout(REQUEST_TIMEOUT, tls.accept(socket)).await {
                        Ok(Ok(stream)) => serve_connection(stream, router).await,
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err("TLS handshake timed out".to_string()),
                    },
                    None => serve_connection(socket, router).await,
                };
                if let Err(e) = served {
                    tracing::debug!(%peer, "web UI connection ended with an error: {e}");
                }
                drop(permit);
            });
        }
    }
}

async fn bind_from(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let mut tried = addr;
    for _ in 0..=PORT_RETRIES {
        match TcpListener::bind(tried).await {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && addr.port() != 0 => {
                tracing::warn!("web UI could not bind {tried}: {e}; trying the next port");
                tried.set_port(tried.port().checked_add(1).ok_or(e)?);
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("ports {} to {} are all taken", addr.port(), tried.port().saturating_sub(1)),
    ))
}

async fn serve_connection<S>(stream: S, router: Router) -> Result<(), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        router.clone().oneshot(request.map(Body::new))
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    connection.await.map_err(|e| e.to_string())
}

fn router(state: Arc<UiState>, access: Arc<Access>) -> Router {
    let api = Router::new()
        .route("/queries", get(api::queries))
        .route("/queries/{id}", get(api::query))
        .route("/tables", get(api::tables))
        .route("/tables/{schema}/{name}", get(api::table))
        .route("/connections", get(api::connections))
        .route("/connections/{pid}/settings", get(api::settings))
        .route("/statements", get(api::statements))
        .fallback(api::not_found);
    Router::new()
        .route("/", get(|| async { axum::response::Redirect::to("/queries") }))
        .route("/queries", get(pages::queries))
        .route("/queries/{id}", get(pages::query))
        .route("/queries/{id}/plan.txt", get(pages::plan_text))
        .route("/queries/{id}/cancel", post(pages::cancel))
        .route("/statements", get(pages::statements))
        .route("/metrics", get(pages::metrics))
        .route("/tables", get(pages::tables))
        .route("/tables/{schema}/{name}", get(pages::table))
        .route("/connections", get(pages::connections))
        .route("/connections/{pid}/settings", get(pages::settings))
        .nest("/api/v1", api)
        .fallback(pages::not_found)
        .layer(middleware::from_fn_with_state(access, access::authenticate))
        .layer(middleware::from_fn(guard))
        .with_state(state)
}

/// Refuses long query strings before anything reads them, and marks every answer as not to be
/// framed, cached or run as script.
async fn guard(request: Request, next: Next) -> Response {
    const MAX_QUERY_BYTES: usize = 2048;
    if request.uri().query().is_some_and(|q| q.len() > MAX_QUERY_BYTES) {
        return html::error_page(StatusCode::URI_TOO_LONG, "The query string is too long.");
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}

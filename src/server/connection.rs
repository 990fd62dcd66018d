//! One client connection from TLS negotiation to close: pgwire's message dispatch, fed through
//! a [`FrameGuard`] so that only whole, well-formed messages reach pgwire's decoders.
//!
//! This is pgwire's `process_socket` loop with two changes: a message the guard refused is
//! answered with PostgreSQL's error for it (the connection goes on), and a stream that broke
//! (an unknown message type, an impossible length) ends with a FATAL `08P01` instead of a
//! silent close.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::TlsAcceptor;
use pgwire::tokio::server::{PgWireMessageServerCodec, negotiate_tls, process_error, process_message};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, FramedParts};

use super::frame_guard::{FrameGuard, Rejection, STARTUP_PACKET_BYTES};
use super::handler::ConnectionHandlers;
use crate::sql::activity::BackendState;
use crate::sql::output::Prepared;
use crate::storage::transaction::BlockStatus;

/// How long a client may take to negotiate TLS, start up and authenticate (pgwire's bound).
pub(super) const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the first four bytes may take once the first of them arrived.
const PARTIAL_LENGTH_TIMEOUT: Duration = Duration::from_secs(5);

type Socket = Framed<FrameGuard<pgwire::tokio::server::MaybeTls>, PgWireMessageServerCodec<Arc<Prepared>>>;

/// Serves one client until it leaves, its stream breaks, or the start-up times out.
pub async fn serve(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    handlers: ConnectionHandlers,
    max_message: usize,
) -> io::Result<()> {
    let startup_deadline = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(startup_deadline);
    let first_length = tokio::select! {
        _ = &mut startup_deadline => return Ok(()),
        length = peek_length(&tcp) => length?,
    };
    // pgwire waits for eight bytes before it reads the length; PostgreSQL reads the length
    // first and refuses an impossible one at once.
    if first_length.is_some_and(|length| !STARTUP_PACKET_BYTES.contains(&length)) {
        let mut tcp = tcp;
        tcp.write_all(&fatal_error_frame("08P01", "invalid length of startup packet")).await?;
        return tcp.shutdown().await;
    }
    let negotiated = tokio::select! {
        _ = &mut startup_deadline => return Ok(()),
        socket = negotiate_tls(tcp, tls) => socket?,
    };
    let Some(socket) = negotiated else {
        // Direct TLS from a client of a server without a certificate.
        return Ok(());
    };
    let parts = socket.into_parts();
    let mut guarded = FramedParts::new(FrameGuard::new(parts.io, parts.read_buf, max_message), parts.codec);
    guarded.write_buf = parts.write_buf;
    let mut socket: Socket = Framed::from_parts(guarded);

    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup | PgWireConnectionState::AuthenticationInProgress
        );
        // As PostgreSQL's, the timer runs only while the server waits for a query: not
        // during a COPY's data or between the messages of a pipeline.
        let idle_timeout = match (handlers.session.tables.status(), socket.state()) {
            (BlockStatus::Idle, _) => None,
            (_, PgWireConnectionState::ReadyForQuery) => handlers.session.idle_in_transaction_timeout(),
            _ => None,
        };
        let next = if starting {
            tokio::select! {
                _ = &mut startup_deadline => return Ok(()),
                next = socket.next() => next,
            }
        } else if let Some(timeout) = idle_timeout {
            match tokio::time::timeout(timeout, socket.next()).await {
                Ok(next) => next,
                // PostgreSQL ends the session; its transaction goes with it.
                Err(_) => {
                    let message = "terminating connection due to idle-in-transaction timeout".to_owned();
                    return close_with(&mut socket, ErrorInfo::new("FATAL".to_owned(), "25P03".to_owned(), message))
                        .await;
                }
            }
        } else {
            socket.next().await
        };
        let message = match next {
            Some(Ok(message)) => message,
            // pgwire's decoder refused a frame the guard let through (a start-up packet of
            // a protocol version it does not speak).
            Some(Err(e)) => return end_with(&mut socket, Rejection::protocol(e.to_string())).await,
            None => match socket.get_mut().take_fatal() {
                Some(rejection) => return end_with(&mut socket, rejection).await,
                None => return Ok(()),
            },
        };
        match message {
            // The client is leaving; some clients wait for the server to close.
            PgWireFrontendMessage::Terminate(_) => return Ok(()),
            // A password message outside authentication, which pgwire would ignore.
            PgWireFrontendMessage::PasswordMessageFamily(_) if !starting => {
                return end_with(&mut socket, Rejection::protocol("invalid frontend message type 112")).await;
            }
            PgWireFrontendMessage::Flush(_) => {
                if let Some(rejection) = socket.get_mut().take_rejection() {
                    match socket.state() {
                        // PostgreSQL reads and discards messages until the Sync.
                        PgWireConnectionState::AwaitingSync => {}
                        PgWireConnectionState::ReadyForQuery | PgWireConnectionState::QueryInProgress => {
                            let error =
                                ErrorInfo::new("ERROR".to_owned(), rejection.code.to_owned(), rejection.message);
                            process_error(&mut socket, PgWireError::UserError(Box::new(error)), rejection.extended)
                                .await?;
                        }
                        // During start-up or COPY a malformed message leaves nothing to go on.
                        _ => return end_with(&mut socket, rejection).await,
                    }
                    continue;
                }
            }
            _ => {}
        }
        let is_extended = match socket.state() {
            PgWireConnectionState::CopyInProgress(is_extended) => is_extended,
            _ => message.is_extended_query(),
        };
        let is_cancel = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        let ends_with_ready = ends_with_ready_for_query(&message);
        // The session's transaction block, not pgwire's bookkeeping, says what ReadyForQuery
        // reports: a failed COMMIT ends the block, ROLLBACK TO SAVEPOINT revives a failed one.
        socket.set_transaction_status(handlers.transaction_status());
        let handled = process_message(
            message,
            &mut socket,
            Arc::clone(&handlers.startup),
            Arc::clone(&handlers.handler),
            Arc::clone(&handlers.handler),
            Arc::clone(&handlers.copy),
            Arc::clone(&handlers.cancel),
        )
        .await;
        if let Err(error) = handled {
            let error = match error {
                // PostgreSQL's invalid_cursor_name; pgwire says 26000, a missing statement.
                PgWireError::PortalNotFound(name) => PgWireError::UserError(Box::new(ErrorInfo::new(
                    "ERROR".to_owned(),
                    "34000".to_owned(),
                    format!("portal \"{name}\" does not exist"),
                ))),
                other => other,
            };
            if error.is_fatal() {
                // PostgreSQL closes after a FATAL error, with no ReadyForQuery.
                return close_with(&mut socket, error.into()).await;
            }
            // Any error inside a transaction block fails the block.
            handlers.session.tables.fail();
            socket.set_transaction_status(handlers.transaction_status());
            if ends_with_ready {
                // Idle before the error goes out, for a client that looks as soon as it reads it.
                handlers.backend.ready(BackendState::idle(handlers.session.tables.status()));
            }
            process_error(&mut socket, error, is_extended).await?;
        }
        if is_cancel {
            return Ok(());
        }
        if ends_with_ready && matches!(socket.state(), PgWireConnectionState::ReadyForQuery) {
            handlers.backend.ready(BackendState::idle(handlers.session.tables.status()));
        }
    }
}

/// Messages whose handling ends with ReadyForQuery, when the connection is then ready: a
/// simple query, a Sync, the end of a COPY FROM STDIN. PostgreSQL's backend turns idle there,
/// so a statement of the extended protocol stays active from its Parse or Execute to the Sync.
fn ends_with_ready_for_query(message: &PgWireFrontendMessage) -> bool {
    matches!(
        message,
        PgWireFrontendMessage::Query(_)
            | PgWireFrontendMessage::Sync(_)
            | PgWireFrontendMessage::CopyDone(_)
            | PgWireFrontendMessage::CopyFail(_)
    )
}

/// The length word that starts the client's first packet, without consuming it; `None` when
/// the client leaves, or stops for long, before sending four bytes.
async fn peek_length(tcp: &TcpStream) -> io::Result<Option<usize>> {
    let mut word = [0u8; 4];
    Ok(peek_exact(tcp, &mut word, PARTIAL_LENGTH_TIMEOUT).await?.then(|| u32::from_be_bytes(word) as usize))
}

/// Fills `buf` from what the client sent, without consuming it: `false` when the client
/// closes first, or sends part of it and then nothing for `partial_timeout`. A peek returns
/// bytes already there whether or not the client has closed since, so a close is told by
/// the socket's read-closed readiness.
pub(super) async fn peek_exact(tcp: &TcpStream, buf: &mut [u8], partial_timeout: Duration) -> io::Result<bool> {
    let mut partial_since = None;
    loop {
        let peeked = tcp.peek(buf).await?;
        if peeked == buf.len() {
            return Ok(true);
        }
        if peeked == 0 || tcp.ready(Interest::READABLE).await?.is_read_closed() {
            return Ok(false);
        }
        if partial_since.get_or_insert_with(tokio::time::Instant::now).elapsed() > partial_timeout {
            return Ok(false);
        }
        // Peeking does not consume readiness: wait a little for the rest.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An ErrorResponse of severity FATAL, for a client before pgwire's framing is in place.
pub fn fatal_error_frame(code: &str, message: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (tag, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', code), (b'M', message)] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut frame = vec![b'E'];
    frame.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    frame.extend_from_slice(&fields);
    frame
}

/// Sends a FATAL error and closes, as PostgreSQL does when it cannot read a client's stream.
async fn end_with(socket: &mut Socket, rejection: Rejection) -> io::Result<()> {
    close_with(socket, ErrorInfo::new("FATAL".to_owned(), rejection.code.to_owned(), rejection.message)).await
}

/// Sends `error` (severity FATAL) and closes the connection.
async fn close_with(socket: &mut Socket, error: ErrorInfo) -> io::Result<()> {
    socket.send(PgWireBackendMessage::ErrorResponse(error.into())).await?;
    socket.close().await?;
    socket.get_mut().drain().await;
    Ok(())
}

//! `--max-connections`: past it a new client is told `53300` "sorry, too many clients
//! already", as PostgreSQL tells it, in answer to its startup packet, and the connection
//! closes. Cancel requests are served whatever the count, as PostgreSQL serves them: they are
//! how a client stops a query on a server that is full.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// PostgreSQL's default `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 100;

use super::connection::{self, fatal_error_frame};
use super::frame_guard::{CANCEL_REQUEST_CODE, STARTUP_PACKET_BYTES};

const SSL_REQUEST: u32 = 80877103;
const GSSENC_REQUEST: u32 = 80877104;
/// How long a refused client may take to send its startup packet.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the client sends anything before it leaves or the start-up time runs out. A slot is
/// taken only then: PostgreSQL counts a client once its startup packet arrives, so a probe that
/// connects and closes (a health check, a port scan) never holds one.
pub async fn sends_anything(socket: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    let peeked = tokio::time::timeout(connection::STARTUP_TIMEOUT, socket.peek(&mut first)).await;
    matches!(peeked, Ok(Ok(1)))
}

/// Whether the client's first packet is a CancelRequest, read without consuming it.
pub async fn is_cancel_request(socket: &TcpStream) -> bool {
    let mut header = [0u8; 8];
    let peeked = tokio::time::timeout(STARTUP_TIMEOUT, connection::peek_exact(socket, &mut header, STARTUP_TIMEOUT));
    matches!(peeked.await, Ok(Ok(true)))
        && u32::from_be_bytes([header[4], header[5], header[6], header[7]]) == CANCEL_REQUEST_CODE
}

/// Answers the client's startup packet with the 53300 error and closes the connection. TLS and
/// GSS encryption requests are declined first, as a server without them declines them.
pub async fn refuse(socket: TcpStream) {
    let _ = tokio::time::timeout(STARTUP_TIMEOUT, refuse_within(socket)).await;
}

async fn refuse_within(mut socket: TcpStream) -> io::Result<()> {
    loop {
        let length = socket.read_u32().await? as usize;
        if !STARTUP_PACKET_BYTES.contains(&length) {
            return Ok(());
        }
        let code = socket.read_u32().await?;
        let mut rest = vec![0; length - 8];
        socket.read_exact(&mut rest).await?;
        if code != SSL_REQUEST && code != GSSENC_REQUEST {
            break;
        }
        socket.write_all(b"N").await?;
    }
    socket.write_all(&fatal_error_frame("53300", "sorry, too many clients already")).await?;
    socket.shutdown().await
}

//! Malformed protocol messages, sent as raw frames: each gets PostgreSQL's answer (an error
//! with its SQLSTATE, FATAL where PostgreSQL closes the connection), nothing hidden inside a
//! message runs, and the server goes on serving.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::TestServer;

/// A client that writes frames by hand and reads the server's messages.
struct RawClient {
    socket: TcpStream,
}

/// One backend message: its type byte and body.
type Message = (u8, Vec<u8>);

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn query(sql: &[u8]) -> Vec<u8> {
    frame(b'Q', &[sql, b"\0"].concat())
}

fn startup_packet(version: u32, parameters: &[u8]) -> Vec<u8> {
    let mut out = (parameters.len() as u32 + 8).to_be_bytes().to_vec();
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(parameters);
    out
}

const PROTOCOL_3_0: u32 = 0x0003_0000;

impl RawClient {
    /// Connects without starting up.
    fn open(server: &TestServer) -> Self {
        let socket = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        RawClient { socket }
    }

    /// Connects and starts up as `postgres` (the test server trusts loopback clients).
    fn connect(server: &TestServer) -> Self {
        let mut client = Self::open(server);
        client.send(&startup_packet(PROTOCOL_3_0, b"user\0postgres\0database\0postgres\0\0"));
        let messages = client.until_ready();
        assert_eq!(messages.first().map(|m| m.0), Some(b'R'), "authentication ok first");
        client
    }

    fn send(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).unwrap();
    }

    /// The next message, or `None` when the server closed the connection.
    fn next(&mut self) -> Option<Message> {
        let mut header = [0u8; 5];
        match self.socket.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading from the server: {e}"),
        }
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0; length - 4];
        self.socket.read_exact(&mut body).unwrap();
        Some((header[0], body))
    }

    /// Messages up to and including ReadyForQuery.
    fn until_ready(&mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        loop {
            let message = self.next().unwrap_or_else(|| panic!("connection closed after {messages:?}"));
            let ready = message.0 == b'Z';
            messages.push(message);
            if ready {
                return messages;
            }
        }
    }

    /// Messages until the server closes the connection.
    fn until_closed(&mut self) -> Vec<Message> {
        std::iter::from_fn(|| self.next()).collect()
    }

    /// Runs `SELECT 1` and checks its one row.
    fn select_one(&mut self) {
        self.send(&query(b"SELECT 1"));
        let types: Vec<u8> = self.until_ready().iter().map(|m| m.0).collect();
        assert_eq!(types, b"TDCZ", "the connection still answers");
    }
}

/// An ErrorResponse's fields by their tag: `S` severity, `C` SQLSTATE, `M` message.
fn error_fields(message: &Message) -> HashMap<char, String> {
    assert_eq!(message.0, b'E', "an ErrorResponse, got {:?}", String::from_utf8_lossy(&message.1));
    message
        .1
        .split(|b| *b == 0)
        .filter(|field| !field.is_empty())
        .map(|field| (field[0] as char, String::from_utf8_lossy(&field[1..]).into_owned()))
        .collect()
}

/// The only error among `messages`, as (severity, SQLSTATE, message).
fn the_error(messages: &[Message]) -> (String, String, String) {
    let errors: Vec<_> = messages.iter().filter(|m| m.0 == b'E').map(error_fields).collect();
    assert_eq!(errors.len(), 1, "one error in {messages:?}");
    let fields = &errors[0];
    (fields[&'S'].clone(), fields[&'C'].clone(), fields[&'M'].clone())
}

/// A query string that holds no statement (only a comment, only semicolons) is answered with
/// EmptyQueryResponse, as PostgreSQL answers it, and the connection goes on.
#[test]
fn a_query_of_only_a_comment_gets_an_empty_query_response() {
    let server = TestServer::start();
    let mut client = RawClient::connect(&server);
    for (sql, expected) in [("-- only a comment", b"IZ".as_slice()), (";", b"IZ"), ("/* nothing */ ;", b"IZ")] {
        client.send(&query(sql.as_bytes()));
        let types: Vec<u8> = client.until_ready().iter().map(|m| m.0).collect();
        assert_eq!(types, expected, "{sql}");
    }
    client.select_one();
}

/// A Query message is its declared length, not its first NUL: a second message carried
/// after the NUL is refused with its carrier, and never runs.
#[tokio::test]
async fn a_message_smuggled_inside_a_query_never_runs() {
    let server = TestServer::start();
    let mut client = RawClient::connect(&server);
    let mut carrier = b"SELECT 1\0".to_vec();
    carrier.extend(query(b"CREATE TABLE smuggled (a INT) USING parquet"));
    client.send(&frame(b'Q', &carrier));
    let (severity, code, message) = the_error(&client.until_ready());
    assert_eq!((severity.as_str(), code.as_str(), message.as_str()), ("ERROR", "08P01", "invalid message format"));
    client.select_one();
    let tables = server.connect().await.query("SHOW TABLES", &[]).await.unwrap();
    assert!(tables.is_empty(), "the smuggled CREATE TABLE ran");
}

/// NUL bytes inside a query and text that is not UTF-8 are errors, as in PostgreSQL, and the
/// connection goes on.
#[test]
fn nul_bytes_and_invalid_utf8_in_a_query_are_errors() {
    let server = TestServer::start();
    let mut client = RawClient::connect(&server);
    for (body, expected_code) in [
        (b"SELECT \0\0\0\0 1\0".as_slice(), "08P01"),
        (b"SELECT 1\0 junk", "08P01"),
        (b"SELECT 'caf\xc3'\0", "22021"),
        (b"SELECT 'no terminator'", "08P01"),
    ] {
        client.send(&frame(b'Q', body));
        let (severity, code, message) = the_error(&client.until_ready());
        assert_eq!((severity.as_str(), code.as_str()), ("ERROR", expected_code), "{message}");
        client.select_one();
    }
}

/// Malformed extended-protocol messages are answered with 08P01 (22023 for a format code
/// that does not exist); the server then skips to the next Sync, as PostgreSQL does, and
/// the connection goes on.
#[test]
fn malformed_extended_messages_are_errors_until_the_next_sync() {
    let server = TestServer::start();
    let mut client = RawClient::connect(&server);
    let sync = frame(b'S', b"");
    let parse = frame(b'P', b"\0SELECT 1\0\0\0");
    for (malformed, expected_code) in [
        (frame(b'E', b""), "08P01"),
        (frame(b'B', b"\0\0\0\0\0\x01\x7f\xff\xff\xff\0\0"), "08P01"),
        (frame(b'B', b"\0\0\0\0\0\x01\xff\xff\xff\xfb\0\0"), "08P01"),
        (frame(b'B', b"\0\0\0\x01\0\x09\0\0\0\0"), "22023"),
        (frame(b'D', b"X\0"), "08P01"),
        (frame(b'C', b"S"), "08P01"),
        (frame(b'P', b"\0SELECT $1\0\0\x05\0\0\0\x17"), "08P01"),
    ] {
        // A message after the malformed one is skipped with it, up to the Sync.
        client.send(&[parse.clone(), malformed, frame(b'H', b""), frame(b'E', b"\0\0\0\0\0"), sync.clone()].concat());
        let messages = client.until_ready();
        let (_, code, message) = the_error(&messages);
        assert_eq!(code, expected_code, "{message}");
        assert_eq!(messages.iter().map(|m| m.0).collect::<Vec<_>>(), b"1EZ", "ParseComplete, the error, ready");
    }
    client.send(&[parse, frame(b'B', b"\0\0\0\0\0\0\0\0"), frame(b'E', b"\0\0\0\0\0"), sync].concat());
    let types: Vec<u8> = client.until_ready().iter().map(|m| m.0).collect();
    assert_eq!(types, b"12DCZ", "a well-formed statement runs after them");
}

/// Past an unknown message type or an impossible length the stream cannot be read on: the
/// connection ends with a FATAL 08P01, as in PostgreSQL, and the server serves everyone else.
#[test]
fn a_broken_stream_ends_its_connection_with_a_fatal_error() {
    let server = TestServer::start_fresh(&["--max-message-size", "1MiB"]);
    let mut bystander = RawClient::connect(&server);
    let large_query = [b"SELECT '".as_slice(), &vec![b'x'; 2 << 20], b"'"].concat();
    for (bytes, expected_message) in [
        (b"\x01\0\0\0\x04".to_vec(), "invalid frontend message type 1"),
        (b"Q\0\0\0\x02".to_vec(), "invalid message length"),
        (b"E\0\x10\0\0".to_vec(), "invalid message length"),
        (query(&large_query), "larger than the server's limit of 1048576 bytes (--max-message-size)"),
    ] {
        let mut client = RawClient::connect(&server);
        client.send(&bytes);
        let messages = client.until_closed();
        let (severity, code, message) = the_error(&messages);
        assert_eq!((severity.as_str(), code.as_str()), ("FATAL", "08P01"));
        assert!(message.contains(expected_message), "{message}");
        bystander.select_one();
    }
    let mut client = RawClient::connect(&server);
    client.send(&query(&[b"SELECT '".as_slice(), &vec![b'x'; 512 << 10], b"'"].concat()));
    assert!(client.until_ready().iter().any(|m| m.0 == b'D'), "a query under the limit runs");
}

/// Start-up packets PostgreSQL refuses get its FATAL 08P01 before the connection closes.
#[test]
fn malformed_startup_packets_get_a_fatal_error() {
    let server = TestServer::start();
    for (packet, expected_message) in [
        (startup_packet(0x0004_0000, b"user\0postgres\0\0"), "unsupported frontend protocol 4.0"),
        (startup_packet(PROTOCOL_3_0, b"user\0postgres\0"), "invalid startup packet layout"),
        (startup_packet(PROTOCOL_3_0, b"user\0postgres\0\0junk"), "invalid startup packet layout"),
        (b"\0\0\0\x03".to_vec(), "invalid length of startup packet"),
    ] {
        let mut client = RawClient::open(&server);
        client.send(&packet);
        let (severity, code, message) = the_error(&client.until_closed());
        assert_eq!((severity.as_str(), code.as_str()), ("FATAL", "08P01"));
        assert!(message.contains(expected_message), "{message}");
    }
    RawClient::connect(&server).select_one();
}

/// A client that leaves inside its startup packet is let go at once, though the byte it sent
/// is still unread: with one connection allowed, the next client gets in (it would get 53300
/// while the server waited for the rest of the packet).
#[tokio::test]
async fn a_client_that_leaves_mid_startup_frees_its_slot_at_once() {
    let server = TestServer::start_fresh(&["--max-connections", "1"]);
    let mut half = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    half.write_all(&[0]).unwrap();
    drop(half);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let client = server.connect().await;
    assert_eq!(crate::common::text_rows(&client, "SELECT 1").await, vec![vec!["1"]]);
}

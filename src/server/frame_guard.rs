//! Checks every frame a client sends before pgwire decodes it.
//!
//! PostgreSQL reads each message as exactly its declared length and checks its layout against
//! that length (`pq_getmessage`, `pq_getmsgend`). pgwire's decoders read a message's fields
//! from the connection's whole input buffer instead: a Query is read up to its first NUL, and
//! whatever follows inside the same message is decoded as the next message (a second statement
//! smuggled inside the first); a short Execute or Bind body panics the connection's task; and
//! invalid UTF-8 becomes U+FFFD.
//!
//! [`FrameGuard`] sits between the socket (after TLS) and pgwire's codec. It cuts the input
//! into whole frames and checks each against the protocol's layout before a byte of it reaches
//! the decoder, answering as PostgreSQL does:
//! - a message whose body is malformed is replaced by a Flush, and its error (`08P01` invalid
//!   message format, `22021` invalid UTF-8) waits in [`FrameGuard::take_rejection`] for the
//!   connection loop to send in that Flush's place; the connection goes on, still in step;
//! - an unknown message type, a length out of bounds or a malformed startup packet ends the
//!   connection with a FATAL `08P01` ([`FrameGuard::take_fatal`]): past it the byte stream
//!   cannot be split into messages any more.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// PostgreSQL's limit for messages other than queries, statements, parameters and COPY data
/// (`PQ_SMALL_MESSAGE_LIMIT`); pgwire refuses larger ones too.
const SMALL_MESSAGE_BYTES: usize = 10_000;
/// pgwire's (and PostgreSQL's) largest message: one byte short of 1 GiB.
pub const LARGEST_MESSAGE_BYTES: usize = 0x3fff_fffe;
/// The start-up packet's bounds (PostgreSQL's `MAX_STARTUP_PACKET_LENGTH`).
pub const STARTUP_PACKET_BYTES: std::ops::RangeInclusive<usize> = 8..=10_000;
pub const CANCEL_REQUEST_CODE: u32 = 80_877_102;
/// A cancel request carries the process id and a key of 4 (protocol 3.0) to 256 bytes.
const CANCEL_REQUEST_BYTES: std::ops::RangeInclusive<usize> = 16..=268;
/// Read from the socket this much at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;
const FLUSH_FRAME: &[u8] = b"H\0\0\0\x04";
/// How long a connection that ends with an error keeps reading what the client still sends.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What the client is told about a message that was not passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: &'static str,
    pub message: String,
    /// An extended-protocol message: after its error the server skips to the next Sync.
    pub extended: bool,
}

impl Rejection {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Rejection { code, message: message.into(), extended: false }
    }

    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new("08P01", message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The next frame is the start-up packet (or a cancel request): a length, no type byte.
    Startup,
    /// Typed messages.
    Messages,
    /// After a cancel request nothing more is read.
    Closed,
}

/// What [`check_frame`] made of the start of the unchecked input.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Not a whole frame yet.
    Incomplete,
    /// A well-formed frame of `len` bytes.
    Pass { len: usize, next: Phase },
    /// A frame of `len` bytes whose body PostgreSQL refuses; the connection goes on.
    Reject { len: usize, rejection: Rejection },
    /// The stream cannot be read on from here.
    Fatal(Rejection),
}

/// The socket as pgwire's codec sees it: only whole, checked frames come through.
pub struct FrameGuard<IO> {
    io: IO,
    unchecked: BytesMut,
    checked: BytesMut,
    phase: Phase,
    /// Largest query, statement, Bind or COPY data message accepted.
    max_message: usize,
    /// One entry per Flush frame handed on, in order: `None` for the client's own Flush,
    /// the error to send for a frame that was replaced.
    flushes: VecDeque<Option<Rejection>>,
    fatal: Option<Rejection>,
    client_closed: bool,
}

impl<IO> FrameGuard<IO> {
    /// `buffered`: bytes already read from `io` (during TLS negotiation), not yet decoded.
    pub fn new(io: IO, buffered: BytesMut, max_message: usize) -> Self {
        FrameGuard {
            io,
            unchecked: buffered,
            checked: BytesMut::new(),
            phase: Phase::Startup,
            max_message: max_message.min(LARGEST_MESSAGE_BYTES),
            flushes: VecDeque::new(),
            fatal: None,
            client_closed: false,
        }
    }

    /// For each Flush message pgwire decodes: the error to answer instead, if it stands in
    /// for a refused frame.
    pub fn take_rejection(&mut self) -> Option<Rejection> {
        self.flushes.pop_front().flatten()
    }

    /// Why the input ended, when the guard ended it.
    pub fn take_fatal(&mut self) -> Option<Rejection> {
        self.fatal.take()
    }

    /// Reads and drops what the client still sends, for a while: a client whose connection
    /// closes with its input unread may lose the error sent just before (the close resets the
    /// connection).
    pub async fn drain(&mut self)
    where
        IO: AsyncRead + Unpin,
    {
        let mut sink = vec![0u8; READ_CHUNK_BYTES];
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while matches!(tokio::io::AsyncReadExt::read(&mut self.io, &mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
    }

    /// Moves whole frames from `unchecked` to `checked`; true when any moved.
    fn cut_frames(&mut self) -> bool {
        let mut moved = false;
        while self.fatal.is_none() && self.phase != Phase::Closed {
            match check_frame(self.phase, &self.unchecked, self.max_message) {
                Verdict::Incomplete => break,
                Verdict::Pass { len, next } => {
                    let kind = (self.phase == Phase::Messages).then(|| self.unchecked[0]);
                    if kind == Some(b'H') {
                        self.flushes.push_back(None);
                    }
                    let mut frame = self.unchecked.split_to(len);
                    if kind == Some(b'E') {
                        bound_execute_rows(&mut frame);
                    }
                    self.checked.extend_from_slice(&frame);
                    self.phase = next;
                }
                Verdict::Reject { len, rejection } => {
                    self.unchecked.advance(len);
                    self.checked.extend_from_slice(FLUSH_FRAME);
                    self.flushes.push_back(Some(rejection));
                }
                Verdict::Fatal(rejection) => {
                    self.fatal = Some(rejection);
                    self.unchecked.clear();
                }
            }
            moved = true;
        }
        moved
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for FrameGuard<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.checked.is_empty() {
                let n = this.checked.len().min(buf.remaining());
                buf.put_slice(&this.checked.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.cut_frames() {
                continue;
            }
            // End of input: the client closed (a partial frame is dropped with it), the
            // stream broke, or a cancel request was read.
            if this.client_closed || this.fatal.is_some() || this.phase == Phase::Closed {
                return Poll::Ready(Ok(()));
            }
            this.unchecked.reserve(READ_CHUNK_BYTES);
            let read = ready!(tokio_util::io::poll_read_buf(Pin::new(&mut this.io), cx, &mut this.unchecked))?;
            this.client_closed = read == 0;
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FrameGuard<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

fn check_frame(phase: Phase, input: &[u8], max_message: usize) -> Verdict {
    match phase {
        Phase::Startup => check_startup(input),
        Phase::Messages => check_message(input, max_message),
        Phase::Closed => Verdict::Incomplete,
    }
}

fn check_startup(input: &[u8]) -> Verdict {
    if input.len() < 4 {
        return Verdict::Incomplete;
    }
    let len = be_u32(input) as usize;
    if !STARTUP_PACKET_BYTES.contains(&len) {
        return Verdict::Fatal(Rejection::protocol("invalid length of startup packet"));
    }
    if input.len() < len {
        return Verdict::Incomplete;
    }
    let code = be_u32(&input[4..]);
    let (major, minor) = (code >> 16, code & 0xffff);
    if code == CANCEL_REQUEST_CODE {
        return if CANCEL_REQUEST_BYTES.contains(&len) {
            Verdict::Pass { len, next: Phase::Closed }
        } else {
            Verdict::Fatal(Rejection::protocol("invalid length of cancel request packet"))
        };
    }
    if major != 3 {
        return Verdict::Fatal(Rejection::protocol(format!(
            "unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.2"
        )));
    }
    if !startup_parameters_are_well_formed(&input[8..len]) {
        return Verdict::Fatal(Rejection::protocol("invalid startup packet layout: expected terminator as last byte"));
    }
    Verdict::Pass { len, next: Phase::Messages }
}

/// Name and value strings in pairs (a value may be empty, a name may not), then one NUL that
/// ends the packet.
fn startup_parameters_are_well_formed(body: &[u8]) -> bool {
    let mut strings = body.split(|b| *b == 0);
    loop {
        match strings.next() {
            // The empty name is the terminator: the packet must end right there, and
            // `split` then yields the empty piece after it and nothing more.
            Some([]) => return strings.next() == Some(&[]) && strings.next().is_none(),
            Some(_name) => match strings.next() {
                Some(_value) if strings.clone().next().is_some() => {}
                _ => return false,
            },
            None => return false,
        }
    }
}

fn check_message(input: &[u8], max_message: usize) -> Verdict {
    if input.len() < 5 {
        return Verdict::Incomplete;
    }
    let kind = input[0];
    let limit = match kind {
        b'Q' | b'P' | b'B' | b'd' | b'F' => max_message,
        b'E' | b'D' | b'C' | b'H' | b'S' | b'X' | b'c' | b'f' | b'p' => SMALL_MESSAGE_BYTES,
        _ => return Verdict::Fatal(Rejection::protocol(format!("invalid frontend message type {kind}"))),
    };
    let len = be_u32(&input[1..]) as usize;
    if len < 4 {
        return Verdict::Fatal(Rejection::protocol("invalid message length"));
    }
    if len > limit {
        let message = if limit == max_message {
            format!("message of {len} bytes is larger than the server's limit of {limit} bytes (--max-message-size)")
        } else {
            "invalid message length".to_owned()
        };
        return Verdict::Fatal(Rejection::protocol(message));
    }
    let Some(body) = input.get(5..len + 1) else {
        return Verdict::Incomplete;
    };
    match check_body(kind, body) {
        Ok(()) => Verdict::Pass { len: len + 1, next: Phase::Messages },
        Err(mut rejection) => {
            rejection.extended = matches!(kind, b'P' | b'B' | b'E' | b'D' | b'C' | b'H' | b'S');
            Verdict::Reject { len: len + 1, rejection }
        }
    }
}

/// Rows one Execute may ask for before the portal is suspended. pgwire sets aside room for as
/// many rows as a client asks for, so `2147483647` (or a negative count, read unsigned) would
/// end the process; a client asking for more gets them in turns, after PortalSuspended.
const MAX_ROWS_PER_EXECUTE: i32 = 1 << 16;

/// Rewrites an Execute frame's row limit within [`MAX_ROWS_PER_EXECUTE`]; zero or less is
/// "all rows", as in PostgreSQL.
fn bound_execute_rows(frame: &mut [u8]) {
    let at = frame.len() - 4;
    let requested = i32::from_be_bytes([frame[at], frame[at + 1], frame[at + 2], frame[at + 3]]);
    let bounded = if requested <= 0 { 0 } else { requested.min(MAX_ROWS_PER_EXECUTE) };
    frame[at..].copy_from_slice(&bounded.to_be_bytes());
}

/// A message body read as PostgreSQL's `pq_getmsg*` functions read it.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Rejection> {
        if n > self.0.len() {
            return Err(Rejection::protocol("insufficient data left in message"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn string(&mut self) -> Result<&'a str, Rejection> {
        let end =
            self.0.iter().position(|b| *b == 0).ok_or_else(|| Rejection::protocol("invalid string in message"))?;
        let text = self.take(end + 1)?;
        utf8(&text[..end])
    }

    fn byte(&mut self) -> Result<u8, Rejection> {
        Ok(self.take(1)?[0])
    }

    fn count(&mut self) -> Result<usize, Rejection> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]) as usize)
    }

    fn int32(&mut self) -> Result<i32, Rejection> {
        Ok(be_u32(self.take(4)?) as i32)
    }

    fn format_codes(&mut self, count: usize) -> Result<(), Rejection> {
        for _ in 0..count {
            let code = i16::from_be_bytes(self.take(2)?.try_into().expect("two bytes"));
            if !(0..=1).contains(&code) {
                return Err(Rejection::new("22023", format!("unsupported format code: {code}")));
            }
        }
        Ok(())
    }

    fn end(self) -> Result<(), Rejection> {
        if self.0.is_empty() { Ok(()) } else { Err(Rejection::protocol("invalid message format")) }
    }
}

/// PostgreSQL's words for text that is not UTF-8, naming the offending bytes.
fn utf8(bytes: &[u8]) -> Result<&str, Rejection> {
    std::str::from_utf8(bytes).map_err(|e| {
        let start = e.valid_up_to();
        let len = e.error_len().unwrap_or(bytes.len() - start);
        let shown: Vec<String> = bytes[start..start + len].iter().map(|b| format!("0x{b:02x}")).collect();
        Rejection::new("22021", format!("invalid byte sequence for encoding \"UTF8\": {}", shown.join(" ")))
    })
}

/// The layout of each message type's body.
fn check_body(kind: u8, body: &[u8]) -> Result<(), Rejection> {
    let mut body = Body(body);
    match kind {
        b'Q' | b'f' => {
            body.string()?;
        }
        b'P' => {
            body.string()?;
            body.string()?;
            let types = body.count()?;
            body.take(types * 4)?;
        }
        b'B' => {
            body.string()?;
            body.string()?;
            let formats = body.count()?;
            body.format_codes(formats)?;
            let parameters = body.count()?;
            if formats > 1 && formats != parameters {
                return Err(Rejection::protocol(format!(
                    "bind message has {formats} parameter formats but {parameters} parameters"
                )));
            }
            for _ in 0..parameters {
                match body.int32()? {
                    -1 => {}
                    len => {
                        body.take(
                            usize::try_from(len)
                                .map_err(|_| Rejection::protocol("insufficient data left in message"))?,
                        )?;
                    }
                }
            }
            let result_formats = body.count()?;
            body.format_codes(result_formats)?;
        }
        b'E' => {
            body.string()?;
            body.int32()?;
        }
        b'D' | b'C' => {
            let target = body.byte()?;
            if target != b'S' && target != b'P' {
                let what = if kind == b'D' { "DESCRIBE" } else { "CLOSE" };
                return Err(Rejection::protocol(format!("invalid {what} message subtype {target}")));
            }
            body.string()?;
        }
        b'H' | b'S' | b'X' | b'c' => {}
        b'F' => return Err(Rejection::new("0A000", "function call messages are not supported")),
        // COPY data and authentication responses are bytes; their readers check them.
        _ => return Ok(()),
    }
    body.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn startup(body: &[u8]) -> Vec<u8> {
        let mut out = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&0x0003_0000u32.to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn verdict(input: &[u8]) -> Verdict {
        check_frame(Phase::Messages, input, 1 << 20)
    }

    fn rejected(input: &[u8]) -> (&'static str, String) {
        match verdict(input) {
            Verdict::Reject { len, rejection } => {
                assert_eq!(len, input.len());
                (rejection.code, rejection.message)
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_query_passes_whole_and_only_whole() {
        let query = frame(b'Q', b"SELECT 1\0");
        assert_eq!(verdict(&query), Verdict::Pass { len: query.len(), next: Phase::Messages });
        assert_eq!(verdict(&query[..query.len() - 1]), Verdict::Incomplete);
        assert_eq!(verdict(&query[..3]), Verdict::Incomplete);
    }

    #[test]
    fn a_message_smuggled_after_a_querys_nul_is_refused_with_its_carrier() {
        let mut body = b"SELECT 1\0".to_vec();
        body.extend(frame(b'Q', b"DROP TABLE t\0"));
        assert_eq!(rejected(&frame(b'Q', &body)), ("08P01", "invalid message format".to_owned()));
        assert_eq!(rejected(&frame(b'Q', b"SELECT \0\0\0\0 1\0")).0, "08P01");
        assert_eq!(rejected(&frame(b'Q', b"SELECT 1")), ("08P01", "invalid string in message".to_owned()));
    }

    #[test]
    fn invalid_utf8_is_22021_naming_the_bytes() {
        assert_eq!(
            rejected(&frame(b'Q', b"SELECT '\xc3\x28'\0")),
            ("22021", "invalid byte sequence for encoding \"UTF8\": 0xc3".to_owned())
        );
    }

    #[test]
    fn extended_messages_are_checked_field_by_field() {
        assert!(matches!(verdict(&frame(b'E', b"\0\0\0\0\0")), Verdict::Pass { .. }));
        let empty_execute = frame(b'E', b"");
        match verdict(&empty_execute) {
            Verdict::Reject { rejection, .. } => {
                assert_eq!(rejection.code, "08P01");
                assert!(rejection.extended, "the error skips to the next Sync");
            }
            other => panic!("{other:?}"),
        }
        // One parameter whose declared length runs past the message.
        let huge_parameter = frame(b'B', b"\0\0\0\0\0\x01\x7f\xff\xff\xff\0\0");
        assert_eq!(rejected(&huge_parameter), ("08P01", "insufficient data left in message".to_owned()));
        let negative_length = frame(b'B', b"\0\0\0\0\0\x01\xff\xff\xff\xfb\0\0");
        assert_eq!(rejected(&negative_length).0, "08P01");
        let null_parameter = frame(b'B', b"\0\0\0\0\0\x01\xff\xff\xff\xff\0\0");
        assert!(matches!(verdict(&null_parameter), Verdict::Pass { .. }));
        let bad_format = frame(b'B', b"\0\0\0\x01\0\x07\0\0\0\0");
        assert_eq!(rejected(&bad_format), ("22023", "unsupported format code: 7".to_owned()));
        let formats_mismatch = frame(b'B', b"\0\0\0\x02\0\0\0\0\0\x01\xff\xff\xff\xff\0\0");
        assert_eq!(rejected(&formats_mismatch).0, "08P01");
        assert_eq!(rejected(&frame(b'D', b"X\0")), ("08P01", "invalid DESCRIBE message subtype 88".to_owned()));
        assert_eq!(rejected(&frame(b'S', b"junk")).0, "08P01");
        let parse_short_types = frame(b'P', b"\0SELECT $1\0\0\x02\0\0\0\x17");
        assert_eq!(rejected(&parse_short_types).0, "08P01");
    }

    #[test]
    fn execute_row_limits_are_bounded_and_negative_ones_mean_all_rows() {
        for (requested, bounded) in [(0, 0), (-5, 0), (100, 100), (i32::MAX, MAX_ROWS_PER_EXECUTE)] {
            let mut execute = frame(b'E', &[b"\0".as_slice(), &requested.to_be_bytes()].concat());
            bound_execute_rows(&mut execute);
            assert_eq!(execute[execute.len() - 4..], bounded.to_be_bytes(), "{requested}");
        }
    }

    #[test]
    fn unknown_types_and_impossible_lengths_end_the_connection() {
        assert!(
            matches!(verdict(b"Z\0\0\0\x04"), Verdict::Fatal(r) if r.message == "invalid frontend message type 90")
        );
        assert!(matches!(verdict(b"Q\0\0\0\x02"), Verdict::Fatal(r) if r.code == "08P01"));
        assert!(matches!(verdict(b"Q\x7f\xff\xff\xff"), Verdict::Fatal(r) if r.message.contains("--max-message-size")));
        assert!(matches!(verdict(b"E\0\x01\0\0"), Verdict::Fatal(r) if r.message == "invalid message length"));
    }

    #[test]
    fn startup_packets_are_checked_before_pgwire_reads_them() {
        let check = |input: &[u8]| check_frame(Phase::Startup, input, 1 << 20);
        let good = startup(b"user\0bob\0database\0\0\0");
        assert_eq!(check(&good), Verdict::Pass { len: good.len(), next: Phase::Messages });
        for bad in [&b"user\0bob\0"[..], b"user\0\0", b"user\0bob\0\0junk", b""] {
            assert!(matches!(check(&startup(bad)), Verdict::Fatal(_)), "{bad:?}");
        }
        assert!(matches!(check(b"\0\0\0\x03"), Verdict::Fatal(r) if r.message == "invalid length of startup packet"));
        assert!(matches!(check(b"\x7f\0\0\0"), Verdict::Fatal(_)));
        let mut v4 = startup(b"user\0bob\0\0");
        v4[4..8].copy_from_slice(&0x0004_0000u32.to_be_bytes());
        assert!(matches!(check(&v4), Verdict::Fatal(r) if r.message.starts_with("unsupported frontend protocol 4.0")));
        let mut cancel = 16u32.to_be_bytes().to_vec();
        cancel.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
        cancel.extend_from_slice(&[0; 8]);
        assert_eq!(check(&cancel), Verdict::Pass { len: 16, next: Phase::Closed });
    }

    #[tokio::test]
    async fn the_decoder_sees_checked_frames_and_a_flush_in_place_of_a_refused_one() {
        use tokio::io::AsyncReadExt;
        let mut input = startup(b"user\0bob\0\0");
        input.extend(frame(b'Q', b"SELECT 1\0junk\0"));
        input.extend(frame(b'H', b""));
        input.extend(frame(b'Q', b"SELECT 2\0"));
        input.extend(b"Z\0\0\0\x04");
        input.extend(frame(b'Q', b"SELECT 3\0"));
        let (mut client, server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            // Split across small writes, as a slow client would.
            for piece in input.chunks(7) {
                client.write_all(piece).await.unwrap();
            }
            client
        });
        let mut guard = FrameGuard::new(server, BytesMut::new(), 1 << 20);
        let mut seen = Vec::new();
        guard.read_to_end(&mut seen).await.unwrap();
        let _client = writer.await.unwrap();
        let mut expected = startup(b"user\0bob\0\0");
        expected.extend(FLUSH_FRAME);
        expected.extend(FLUSH_FRAME);
        expected.extend(frame(b'Q', b"SELECT 2\0"));
        assert_eq!(seen, expected);
        assert_eq!(guard.take_rejection().map(|r| r.code), Some("08P01"));
        assert_eq!(guard.take_rejection(), None, "the client's own Flush");
        assert!(guard.take_fatal().unwrap().message.contains("message type 90"));
    }
}

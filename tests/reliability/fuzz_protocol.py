#!/usr/bin/env python3
"""Fuzz bucketsql's PostgreSQL v3 wire front end with hand-built frames over raw TCP.

What it does
------------
Starts ``BINARY serve --listen 127.0.0.1:PORT --data-dir TMP --memory-limit 1GiB`` on a free
port, then runs ``--frames N`` cases drawn at random (deterministically from ``--seed``) from
the case table below. Each case opens its own connection (most log in first as ``postgres``;
the server trusts loopback), writes its frames, and records what the server did: every
ErrorResponse (severity ``V``/``S``, SQLSTATE ``C``, message ``M``), whether the connection
ended with ReadyForQuery, was closed (with or without an ErrorResponse first), or went
silent; and, if it is still open, whether ``SELECT 1`` still gets its DataRow. After every
case a fresh connection must log in and answer ``SELECT 1``; cases that try to sneak a
statement past the server (smuggled after a Query's NUL, sent after an error before Sync,
cut off by a dropped connection) name a table whose absence is then checked on that fresh
connection. Last, the connection limit: hold ``max-connections - 1`` idle sessions, check one
more works, open ``--idle-connections`` more at once (each must get FATAL 53300), check a
CancelRequest is still served, close everything and check service resumes with every slot
free again. The server process must still be alive at the end and answer ``SELECT 1``.

The server runs under ``RLIMIT_DATA`` (``--server-data-limit``, 8 GiB) so that a runaway
allocation kills only it.

Expected behaviour is PostgreSQL 16's (``EXPECTED`` below; ``--list-cases`` prints it):

* a malformed message body: ErrorResponse ERROR 08P01 (protocol_violation), and the
  connection stays usable — after ReadyForQuery for a Query, after the next Sync in the
  extended protocol (messages between the error and the Sync are discarded unexecuted);
* invalid UTF-8 in a statement or a text parameter: ERROR 22021;
* an unknown message type: FATAL 08P01, then the server closes the connection;
* an invalid message length (< 4, negative, over the type's limit): the connection closes
  (PostgreSQL logs "invalid message length" and closes without a message; FATAL 08P01 first
  is accepted as well);
* a malformed startup packet: FATAL (08P01, or 0A000 for an unsupported protocol version)
  or a close without a message; never an internal error, never a hang.

A case fails on: an ErrorResponse with SQLSTATE class XX or without SQLSTATE; a close
without ErrorResponse where PostgreSQL sends one; an outcome other than the table's (wrong
SQLSTATE, ERROR where FATAL is due, connection closed where it must stay usable or left open
where it must close, a message answered by nothing); a smuggled or discarded statement that
ran; no answer within ``--timeout`` seconds (hang); the server dying; a fresh connection
refused; a server-side socket left in CLOSE_WAIT after the case's client closed (the server
keeps a connection slot for a client that has gone). Failures are grouped by case kind and symptom, each group with its shortest
reproduction (the exact bytes written).

Run
---
    python3 tests/reliability/fuzz_protocol.py --binary target/release/bucketsql \\
        --seed 1 --frames 10000

``--list-cases`` prints the case table; ``--kinds a,b`` limits the mix; ``--only-case I``
reruns case I of the seed's sequence alone. The last line of output is ``RESULT {json}``;
the exit status is 1 if anything failed.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import random
import re
import select
import selectors
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass, field

from fuzz_server import Server, print_panics, close_wait

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
# Message types a PostgreSQL backend accepts after startup; every other byte is unknown.
# ('p', the password family, is valid only during authentication; 'F' is FunctionCall.)
FRONTEND_TYPES = set(b"BCDEFHPQSXcdf")
SMALL_TYPES = b"CDEHSXcf"  # PostgreSQL caps these at PQ_SMALL_MESSAGE_LIMIT (10000 bytes)
LARGE_TYPES = b"BPQd"  # and these at PQ_LARGE_MESSAGE_LIMIT (0x3ffffffe)

# ---------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------


def i16(n: int) -> bytes:
    return struct.pack("!H", n & 0xFFFF)


def i32(n: int) -> bytes:
    return struct.pack("!I", n & 0xFFFFFFFF)


def cstr(s) -> bytes:
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def message(kind: bytes, body: bytes) -> bytes:
    return kind + i32(len(body) + 4) + body


def startup(params=None, version=PROTOCOL_3_0) -> bytes:
    if params is None:
        params = {"user": "postgres", "database": "postgres"}
    body = i32(version) + b"".join(cstr(k) + cstr(v) for k, v in params.items()) + b"\0"
    return i32(len(body) + 4) + body


def query(sql) -> bytes:
    return message(b"Q", cstr(sql))


def parse(name, sql, oids=()) -> bytes:
    return message(b"P", parse_body(name, sql, oids))


def parse_body(name, sql, oids=()) -> bytes:
    return cstr(name) + cstr(sql) + i16(len(oids)) + b"".join(i32(o) for o in oids)


def bind_body(portal, stmt, params=(), pformats=(), rformats=()) -> bytes:
    body = cstr(portal) + cstr(stmt) + i16(len(pformats)) + b"".join(i16(f) for f in pformats)
    body += i16(len(params))
    for p in params:
        body += i32(-1) if p is None else i32(len(p)) + p
    return body + i16(len(rformats)) + b"".join(i16(f) for f in rformats)


def bind(portal, stmt, params=(), pformats=(), rformats=()) -> bytes:
    return message(b"B", bind_body(portal, stmt, params, pformats, rformats))


def describe(kind: bytes, name) -> bytes:
    return message(b"D", kind + cstr(name))


def execute(portal, max_rows=0) -> bytes:
    return message(b"E", cstr(portal) + i32(max_rows))


def close_msg(kind: bytes, name) -> bytes:
    return message(b"C", kind + cstr(name))


SYNC = message(b"S", b"")
FLUSH = message(b"H", b"")
INT8_OID, TEXT_OID = 20, 25


def error_fields(body: bytes) -> dict:
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return fields


def data_row(body: bytes) -> list:
    (n,) = struct.unpack_from("!h", body, 0)
    pos, values = 2, []
    for _ in range(n):
        (length,) = struct.unpack_from("!i", body, pos)
        pos += 4
        if length < 0:
            values.append(None)
        else:
            values.append(body[pos : pos + length])
            pos += length
    return values


def show_bytes(data: bytes, limit: int = 400) -> str:
    text = repr(data)
    if len(text) > limit:
        text = text[: limit - 40] + f"…' ({len(data)} bytes)"
    return text


# ---------------------------------------------------------------------------------------
# A raw connection
# ---------------------------------------------------------------------------------------


class Wire:
    """A TCP connection that writes raw bytes and reads backend messages."""

    def __init__(self, port: int, connect_timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = b""
        self.eof = False
        self.reset = False
        self.send_failed = False

    def fileno(self):
        return self.sock.fileno()

    def send(self, data: bytes, deadline: float) -> bool:
        """Writes all of `data` unless the peer closes or `deadline` passes."""
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except BlockingIOError:
                if not self._wait(select.POLLOUT, deadline):
                    return False
            except OSError:
                self.send_failed = True
                return False
        return True

    def _wait(self, events: int, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        poller = select.poll()
        poller.register(self.sock, events)
        return bool(poller.poll(remaining * 1000))

    def fill(self, deadline: float) -> bool:
        """Reads what has arrived; False when nothing came before `deadline` or at EOF."""
        if self.eof:
            return False
        if not self._wait(select.POLLIN, deadline):
            return False
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return True
        except OSError as e:
            self.eof = True
            self.reset = e.errno in (errno.ECONNRESET, errno.EPIPE)
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def next_message(self, deadline: float):
        """(type, body) of the next backend message, or None at EOF / deadline."""
        while True:
            if len(self.buf) >= 5:
                (length,) = struct.unpack_from("!i", self.buf, 1)
                if length < 4:
                    raise ValueError(f"backend sent a message of length {length}: {self.buf[:16]!r}")
                if len(self.buf) >= 1 + length:
                    kind, body = self.buf[0:1], self.buf[5 : 1 + length]
                    self.buf = self.buf[1 + length :]
                    return kind, body
            if not self.fill(deadline):
                return None

    def read_byte(self, deadline: float):
        while not self.buf:
            if not self.fill(deadline):
                return None
        byte, self.buf = self.buf[:1], self.buf[1:]
        return byte

    def close(self, rst: bool = False):
        try:
            if rst:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
        except OSError:
            pass


def login(port: int, timeout: float, params=None):
    """A logged-in Wire, or raises RuntimeError with what the server said."""
    wire = Wire(port)
    deadline = time.monotonic() + timeout
    wire.send(startup(params), deadline)
    while True:
        msg = wire.next_message(deadline)
        if msg is None:
            wire.close()
            raise RuntimeError("closed during login" if wire.eof else "no ReadyForQuery within the time bound")
        if msg[0] == b"E":
            wire.close()
            f = error_fields(msg[1])
            raise RuntimeError(f"login refused: {f.get('V') or f.get('S')} {f.get('C')} {f.get('M')}")
        if msg[0] == b"Z":
            return wire


def simple_query(wire: Wire, sql: str, deadline: float):
    """Rows (lists of bytes) and error fields of one Query, or None on close / deadline."""
    if not wire.send(query(sql), deadline):
        return None
    rows, error = [], None
    while True:
        msg = wire.next_message(deadline)
        if msg is None:
            return None
        if msg[0] == b"D":
            rows.append(data_row(msg[1]))
        elif msg[0] == b"E":
            error = error_fields(msg[1])
        elif msg[0] == b"Z":
            return rows, error


# ---------------------------------------------------------------------------------------
# Cases and what PostgreSQL does with them
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    outcome: str  # error_usable | fatal_close | close | ok_usable | login_or_fatal | dropped
    codes: tuple = ()  # accepted SQLSTATEs (empty: any but class XX)
    postgres: str = ""  # what PostgreSQL 16 does


EXPECTED = {
    # before (or instead of) a valid startup packet
    "startup_short_length": Expect("close", ("08P01",), "length < 8 or negative: 'invalid length of startup packet' logged, closed silently"),
    "startup_huge_length": Expect("close", ("08P01",), "length > 10000: 'invalid length of startup packet' logged, closed silently"),
    "startup_bad_version": Expect("close", ("0A000", "08P01"), "protocol major version not 3: FATAL 0A000 'unsupported frontend protocol', closed"),
    "startup_future_minor": Expect("login_or_fatal", ("0A000", "08P01"), "3.x with a newer minor: NegotiateProtocolVersion, then a normal login"),
    "startup_missing_terminator": Expect("close", ("08P01",), "no final NUL: FATAL 08P01 'invalid startup packet layout', closed"),
    "startup_random_bytes": Expect("close", ("08P01", "0A000", "28000"), "garbage then EOF: FATAL or closed silently"),
    "startup_truncated": Expect("close", ("08P01",), "EOF inside the packet: closed silently ('incomplete startup packet')"),
    "startup_odd_params": Expect("login_or_fatal", (), "unknown/odd parameters: a login, or FATAL (e.g. 42704 unrecognized parameter)"),
    "ssl_then_garbage": Expect("close", ("08P01", "0A000"), "SSLRequest answered 'N', then garbage: FATAL or closed"),
    "cancel_random": Expect("close", (), "CancelRequest for an unknown backend: closed without a message"),
    "cancel_bad_length": Expect("close", ("08P01",), "CancelRequest of the wrong length: closed without a message"),
    "drop_mid_startup": Expect("dropped", (), "client goes away inside its startup packet: nothing to answer"),
    # after a valid login, simple query protocol
    "query_nul_inside": Expect("error_usable", ("08P01",), "Query string ends at the first NUL, bytes follow: ERROR 08P01 'invalid message format'"),
    "query_trailing_junk": Expect("error_usable", ("08P01",), "bytes after the Query's NUL: ERROR 08P01 'invalid message format'"),
    "query_smuggle": Expect("error_usable", ("08P01",), "a whole second message inside the Query body after its NUL: ERROR 08P01, nothing runs"),
    "query_no_terminator": Expect("error_usable", ("08P01",), "Query body without NUL: ERROR 08P01 'invalid string in message'"),
    "query_invalid_utf8": Expect("error_usable", ("22021",), "invalid UTF-8 in the query: ERROR 22021 'invalid byte sequence for encoding \"UTF8\"'"),
    "unknown_type": Expect("fatal_close", ("08P01",), "unknown message type: FATAL 08P01 'invalid frontend message type', closed"),
    "bad_length": Expect("close", ("08P01",), "length < 4, negative or over the type's limit: 'invalid message length' logged, closed silently"),
    "copy_outside_copy": Expect("ok_usable", (), "CopyData/CopyDone/CopyFail outside COPY: ignored; the Sync answers ReadyForQuery"),
    "split_valid_simple": Expect("ok_usable", (), "a valid Query written a few bytes at a time: answered normally"),
    "split_valid_extended": Expect("ok_usable", (), "Parse/Bind/Describe/Execute/Sync written a few bytes at a time: answered normally"),
    "split_startup": Expect("ok_usable", (), "startup packet and Query written a few bytes at a time: answered normally"),
    "drop_mid_message": Expect("dropped", (), "client goes away inside a message: the partial statement never runs"),
    # after a valid login, extended query protocol (each case ends with Sync)
    "truncated_parse": Expect("error_usable", ("08P01",), "Parse body cut short (length consistent): ERROR 08P01, usable after Sync"),
    "truncated_bind": Expect("error_usable", ("08P01",), "Bind body cut short: ERROR 08P01, usable after Sync"),
    "truncated_describe": Expect("error_usable", ("08P01",), "Describe body cut short: ERROR 08P01, usable after Sync"),
    "truncated_execute": Expect("error_usable", ("08P01",), "Execute body cut short: ERROR 08P01, usable after Sync"),
    "truncated_close": Expect("error_usable", ("08P01",), "Close body cut short: ERROR 08P01, usable after Sync"),
    "execute_empty_body": Expect("error_usable", ("08P01",), "Execute with an empty body: ERROR 08P01 'invalid string in message'"),
    "execute_max_rows": Expect("ok_usable", (), "valid Execute with any row limit (0/negative: all; else at most that many, then PortalSuspended): rows as asked"),
    "extended_trailing_junk": Expect("error_usable", ("08P01",), "bytes (maybe a whole Query) after a Parse/Bind/Describe/Execute/Close/Sync/Flush body: ERROR 08P01, nothing smuggled runs"),
    "parse_wrong_count": Expect("error_usable", ("08P01",), "Parse parameter-type count disagreeing with the OIDs sent: ERROR 08P01"),
    "bind_format_count": Expect("error_usable", ("08P01",), "Bind with n>1 parameter formats for m!=n parameters, or result formats != columns: ERROR 08P01"),
    "bind_param_count": Expect("error_usable", ("08P01",), "Bind supplying a different number of parameters than the statement has: ERROR 08P01"),
    "bind_bad_format_code": Expect("error_usable", ("22023", "08P01"), "format code other than 0/1: ERROR 22023 'unsupported format code'"),
    "bind_param_length": Expect("error_usable", ("08P01",), "parameter length 0x7fffffff, -5 or past the body: ERROR 08P01 'insufficient data left in message'"),
    "bind_binary_garbage": Expect("error_usable", ("22P03", "22P02", "22023", "08P01"), "binary parameter of the wrong size: ERROR 22P03 'incorrect binary data format'"),
    "describe_bad_kind": Expect("error_usable", ("08P01",), "Describe of a kind other than S/P: ERROR 08P01 'invalid DESCRIBE message subtype'"),
    "close_bad_kind": Expect("error_usable", ("08P01",), "Close of a kind other than S/P: ERROR 08P01 'invalid CLOSE message subtype'"),
    "describe_missing_statement": Expect("error_usable", ("26000",), "Describe of an unknown prepared statement: ERROR 26000"),
    "describe_missing_portal": Expect("error_usable", ("34000",), "Describe of an unknown portal: ERROR 34000"),
    "bind_missing_statement": Expect("error_usable", ("26000",), "Bind to an unknown statement: ERROR 26000"),
    "execute_missing_portal": Expect("error_usable", ("34000",), "Execute of an unknown portal: ERROR 34000"),
    "ignored_until_sync": Expect("error_usable", ("26000",), "after an error, Parse/Bind/Execute before Sync are discarded: one ERROR, then ReadyForQuery, nothing runs"),
    "parse_invalid_utf8": Expect("error_usable", ("22021",), "invalid UTF-8 in a Parse's query: ERROR 22021"),
    "bind_text_invalid_utf8": Expect("error_usable", ("22021",), "invalid UTF-8 in a text parameter: ERROR 22021"),
}


@dataclass
class Case:
    index: int
    kind: str
    note: str
    chunks: list  # writes, in order
    login: bool = True
    shut_wr: bool = False  # half-close after the writes (the server sees EOF)
    drop: str = ""  # 'fin' | 'rst': close right after the writes
    gap: float = 0.0  # pause between writes
    ssl_byte: bool = False  # the first answer is SSLRequest's one byte
    markers: tuple = ()  # tables that must not exist afterwards
    marker_values: tuple = ()  # DataRow values that must never come back
    expect_value: bytes | None = None  # the DataRow value a valid case returns

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def repro(self, limit: int = 400) -> str:
        prefix = "after a normal login, " if self.login else "on a new connection, "
        how = "write"
        if len(self.chunks) > 1 and self.kind.startswith("split"):
            how = f"write in {len(self.chunks)} pieces"
        tail = {"fin": ", then close", "rst": ", then reset"}.get(self.drop, "")
        if self.shut_wr:
            tail += ", then shut down writing"
        return f"{prefix}{how} {show_bytes(self.data, limit)}{tail}"


VALID_SQL = [b"SELECT 1", b"SELECT 'abc'", b"SELECT 2 + 3", b"SELECT count(*) FROM range(10)",
             b"SHOW TABLES", b"SELECT now()", b"SELECT 'x' AS y, 42 AS z"]
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc0\x80", b"\xc3", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
                b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\x80", b"\xc3\x28", b"\xe0\x80\xaf", b"\xf0\x9f\x98"]


def junk(rng: random.Random, lo: int = 1, hi: int = 40) -> bytes:
    return bytes(rng.randrange(256) for _ in range(rng.randint(lo, hi)))


def with_invalid_utf8(rng: random.Random, wrap=True) -> bytes:
    bad = rng.choice(INVALID_UTF8)
    return rng.choice([
        b"SELECT '" + bad + b"'",
        b"SELECT 'a" + bad + b"b' AS s",
        b"SELECT 1 -- " + bad,
        b"SELECT " + bad,
        b"SELECT 1 AS \"" + bad + b"\"",
        b"SELECT 1 /* " + bad + b" */",
    ])


def split_random(rng: random.Random, data: bytes, hi: int = 7) -> list:
    pieces, pos = [], 0
    while pos < len(data):
        n = rng.randint(1, hi)
        pieces.append(data[pos : pos + n])
        pos += n
    return pieces


def statement_with_param(rng):
    """(sql, oids, params, value) of a valid one-parameter statement and its answer."""
    n = rng.randint(-10**6, 10**6)
    return b"SELECT $1 AS v", (INT8_OID,), (str(n).encode(),), str(n).encode()


def gen_startup_short_length(rng, i):
    length = rng.choice([0, 1, 4, 7, -1, -8, -(2**31)])
    body = junk(rng, 0, 12)
    return Case(i, "startup_short_length", f"length {length}", [i32(length) + body], login=False, shut_wr=rng.random() < 0.5)


def gen_startup_huge_length(rng, i):
    length = rng.choice([10001, 65536, 1 << 20, 0x3FFFFFFF, 0x7FFFFFFF])
    return Case(i, "startup_huge_length", f"length {length}", [i32(length) + i32(PROTOCOL_3_0) + b"user\0postgres\0\0"], login=False)


def gen_startup_bad_version(rng, i):
    major, minor = rng.choice([(0, 0), (1, 0), (2, 0), (4, 0), (65535, 65535), (1234, 0), (2, 99), (7, 3)])
    return Case(i, "startup_bad_version", f"version {major}.{minor}", [startup(version=(major << 16) | minor)], login=False)


def gen_startup_future_minor(rng, i):
    minor = rng.choice([3, 4, 7, 99, 65535])
    return Case(i, "startup_future_minor", f"version 3.{minor}", [startup(version=(3 << 16) | minor)], login=False)


def gen_startup_missing_terminator(rng, i):
    variant = rng.choice(["no final NUL", "value without NUL", "key without value"])
    params = {"no final NUL": b"user\0postgres\0database\0postgres\0",
              "value without NUL": b"user\0postgres",
              "key without value": b"user\0postgres\0database"}[variant]
    body = i32(PROTOCOL_3_0) + params
    return Case(i, "startup_missing_terminator", variant, [i32(len(body) + 4) + body], login=False)


def gen_startup_random_bytes(rng, i):
    data = junk(rng, 1, 64)
    if rng.random() < 0.5 and len(data) >= 8:  # a plausible length, random rest
        data = i32(len(data)) + data[4:]
    return Case(i, "startup_random_bytes", f"{len(data)} random bytes", [data], login=False, shut_wr=True)


def gen_startup_truncated(rng, i):
    packet = startup()
    cut = rng.randint(1, len(packet) - 1)
    return Case(i, "startup_truncated", f"first {cut} of {len(packet)} bytes", [packet[:cut]], login=False, shut_wr=True)


def gen_startup_odd_params(rng, i):
    variant = rng.choice(["unknown parameter", "bad option", "long value", "invalid UTF-8 user",
                          "empty user", "no user", "unknown database", "replication", "many parameters"])
    params = {"user": "postgres", "database": "postgres"}
    if variant == "unknown parameter":
        params["no_such_parameter_" + str(rng.randrange(1000))] = "x"
    elif variant == "bad option":
        params["options"] = rng.choice(["-c statement_timeout=banana", "-c", "--", "-c no_such=1", "-c statement_timeout=5s"])
    elif variant == "long value":
        params["application_name"] = "a" * rng.choice([100, 1000, 9000])
    elif variant == "invalid UTF-8 user":
        params["user"] = b"post\xffgres"
    elif variant == "empty user":
        params["user"] = ""
    elif variant == "no user":
        del params["user"]
    elif variant == "unknown database":
        params["database"] = "nope_" + str(rng.randrange(1000))
    elif variant == "replication":
        params["replication"] = rng.choice(["database", "true", "banana"])
    else:
        for k in range(rng.randint(10, 200)):
            params[f"p{k}"] = "v"
    packet = startup(params)
    return Case(i, "startup_odd_params", variant, [packet], login=False)


def gen_ssl_then_garbage(rng, i):
    ssl = i32(8) + i32(SSL_REQUEST)
    return Case(i, "ssl_then_garbage", "SSLRequest + garbage", [ssl, junk(rng, 1, 32)], login=False, shut_wr=True, ssl_byte=True)


def gen_cancel_random(rng, i):
    pid, key = rng.randrange(1 << 31), rng.randrange(1 << 31)
    return Case(i, "cancel_random", f"pid {pid}", [i32(16) + i32(CANCEL_REQUEST) + i32(pid) + i32(key)], login=False)


def gen_cancel_bad_length(rng, i):
    length = rng.choice([8, 12, 20, 64])
    body = i32(CANCEL_REQUEST) + junk(rng, length - 8, length - 8) if length > 8 else i32(CANCEL_REQUEST)
    return Case(i, "cancel_bad_length", f"length {length}", [i32(length) + body], login=False, shut_wr=True)


def gen_drop_mid_startup(rng, i):
    packet = startup()
    cut = rng.randint(1, len(packet) - 1)
    return Case(i, "drop_mid_startup", f"first {cut} bytes", [packet[:cut]], login=False, drop=rng.choice(["fin", "rst"]))


def gen_query_nul_inside(rng, i):
    if rng.random() < 0.2:
        body = b"SELECT \0\0 1\0"
    else:
        sql = rng.choice(VALID_SQL)
        pos = rng.randint(0, len(sql) - 1)
        body = sql[:pos] + b"\0" * rng.randint(1, 3) + sql[pos:] + b"\0"
    return Case(i, "query_nul_inside", "", [message(b"Q", body)])


def gen_query_trailing_junk(rng, i):
    tail = junk(rng, 1, 40)
    return Case(i, "query_trailing_junk", f"{len(tail)} junk bytes", [message(b"Q", cstr(rng.choice(VALID_SQL)) + tail)])


def gen_query_smuggle(rng, i):
    table = f"smuggled_{i}"
    value = f"smuggled-{i}".encode()
    variant = rng.choice(["create", "select", "extended", "create+sync"])
    if variant == "create":
        inner = query(f"CREATE TABLE {table} (a INT)")
    elif variant == "select":
        inner = query(b"SELECT '" + value + b"' AS v")
    elif variant == "extended":
        inner = parse("", f"CREATE TABLE {table} (a INT)") + bind("", "") + execute("") + SYNC
    else:
        inner = query(f"CREATE TABLE {table} (a INT)") + SYNC
    outer = rng.choice([b"SELECT 1", b"", b"SELECT 'a'"])
    return Case(i, "query_smuggle", variant, [message(b"Q", cstr(outer) + inner)], markers=(table,), marker_values=(value,))


def gen_query_no_terminator(rng, i):
    sql = rng.choice([b""] + VALID_SQL)
    return Case(i, "query_no_terminator", f"{len(sql)}-byte body", [message(b"Q", sql)])


def gen_query_invalid_utf8(rng, i):
    return Case(i, "query_invalid_utf8", "", [query(with_invalid_utf8(rng))])


def gen_unknown_type(rng, i):
    kind = rng.choice([b for b in range(256) if b not in FRONTEND_TYPES])
    body = junk(rng, 0, 20)
    return Case(i, "unknown_type", f"type {bytes([kind])!r}", [message(bytes([kind]), body)])


def gen_bad_length(rng, i):
    kind = rng.choice(LARGE_TYPES + SMALL_TYPES)
    lengths = [0, 1, 2, 3, -1, -5, -(2**31), 0x7FFFFFFF, 0x3FFFFFFF]
    if kind in SMALL_TYPES:
        lengths += [10001, 65536, 1 << 20]
    length = rng.choice(lengths)
    return Case(i, "bad_length", f"type {bytes([kind])!r} length {length}", [bytes([kind]) + i32(length) + junk(rng, 0, 16)])


def gen_copy_outside_copy(rng, i):
    variant = rng.choice(["CopyData", "CopyDone", "CopyFail"])
    msg = {"CopyData": message(b"d", junk(rng, 0, 30)), "CopyDone": message(b"c", b""),
           "CopyFail": message(b"f", cstr("stop"))}[variant]
    return Case(i, "copy_outside_copy", variant, [msg + SYNC])


def gen_split_valid_simple(rng, i):
    n = rng.randint(-10**9, 10**9)
    data = query(f"SELECT {n} AS v")
    return Case(i, "split_valid_simple", "", split_random(rng, data), gap=rng.choice([0, 0, 0.001]), expect_value=str(n).encode())


def gen_split_valid_extended(rng, i):
    sql, oids, params, value = statement_with_param(rng)
    name = rng.choice(["", f"s{i}"])
    data = parse(name, sql, oids) + bind("", name, params) + describe(b"P", "") + execute("") + SYNC
    return Case(i, "split_valid_extended", f"statement {name!r}", split_random(rng, data), gap=rng.choice([0, 0, 0.001]), expect_value=value)


def gen_split_startup(rng, i):
    n = rng.randint(0, 10**6)
    data = startup() + query(f"SELECT {n} AS v")
    return Case(i, "split_startup", "", split_random(rng, data, 5), login=False, gap=rng.choice([0, 0.001]), expect_value=str(n).encode())


def gen_drop_mid_message(rng, i):
    table = f"dropped_{i}"
    variant = rng.choice(["query", "header", "extended"])
    if variant == "query":
        data = query(f"CREATE TABLE {table} (a INT)")
        data = data[: rng.randint(1, len(data) - 1)]
    elif variant == "header":
        data = b"Q" + i32(rng.randint(5, 1000))[: rng.randint(0, 4)]
    else:
        full = parse("", f"CREATE TABLE {table} (a INT)") + bind("", "") + execute("")
        data = full[: rng.randint(1, len(full) - 1)]
    return Case(i, "drop_mid_message", variant, [data], drop=rng.choice(["fin", "rst"]), markers=(table,))


def valid_extended_message(rng, kind: str, i: int):
    """A valid body of `kind` and the messages that must precede it."""
    sql, oids, params, _ = statement_with_param(rng)
    if kind == "parse":
        return b"", b"P", parse_body(f"s{i}", sql, oids)
    if kind == "bind":
        return parse(f"s{i}", sql, oids), b"B", bind_body("", f"s{i}", params, (0,), (0,))
    prelude = parse(f"s{i}", sql, oids) + bind("", f"s{i}", params)
    if kind == "describe":
        return prelude, b"D", rng.choice([b"S" + cstr(f"s{i}"), b"P\0"])
    if kind == "execute":
        return prelude, b"E", b"\0" + i32(0)
    return prelude, b"C", rng.choice([b"S" + cstr(f"s{i}"), b"P\0"])


def gen_truncated(kind):
    def gen(rng, i):
        prelude, t, body = valid_extended_message(rng, kind, i)
        cut = rng.randint(0, len(body) - 1)
        return Case(i, f"truncated_{kind}", f"body cut to {cut} of {len(body)} bytes",
                    [prelude + message(t, body[:cut]) + SYNC])
    return gen


def gen_execute_empty_body(rng, i):
    sql, oids, params, _ = statement_with_param(rng)
    prelude = rng.choice([b"", parse("", sql, oids) + bind("", "", params)])
    return Case(i, "execute_empty_body", "with a portal" if prelude else "alone", [prelude + message(b"E", b"") + SYNC])


def gen_execute_max_rows(rng, i):
    max_rows = rng.choice([1, 2, 3, 100, 65536, 1 << 24, 0x7FFFFFFF, -1, -5, -(2**31)])
    if rng.random() < 0.5:
        sql, oids, params, value = statement_with_param(rng)
    else:
        sql, oids, params, value = b"SELECT id FROM range(10) ORDER BY id", (), (), b"0"
    data = parse("", sql, oids) + bind("", "", params) + execute("", max_rows) + SYNC
    return Case(i, "execute_max_rows", f"max_rows {max_rows}", [data], expect_value=value)


def gen_extended_trailing_junk(rng, i):
    table, value = f"smuggled_{i}", f"smuggled-{i}".encode()
    kind = rng.choice(["parse", "bind", "describe", "execute", "close", "sync", "flush"])
    if kind == "sync":
        prelude, t, body = b"", b"S", b""
    elif kind == "flush":
        prelude, t, body = b"", b"H", b""
    else:
        prelude, t, body = valid_extended_message(rng, kind, i)
    tail = rng.choice([junk(rng, 1, 20), query(f"CREATE TABLE {table} (a INT)"), query(b"SELECT '" + value + b"'")])
    return Case(i, "extended_trailing_junk", f"{kind} + {len(tail)} bytes", [prelude + message(t, body + tail) + SYNC],
                markers=(table,), marker_values=(value,))


def gen_parse_wrong_count(rng, i):
    variant = rng.choice(["count > OIDs", "count < OIDs", "count 0xffff", "count 0x8000"])
    oids = [INT8_OID] * rng.randint(0, 3)
    count = {"count > OIDs": len(oids) + rng.randint(1, 5), "count < OIDs": max(len(oids) - 1, 0),
             "count 0xffff": 0xFFFF, "count 0x8000": 0x8000}[variant]
    if variant == "count < OIDs":
        oids.append(INT8_OID)
    body = cstr(f"s{i}") + cstr("SELECT $1 AS v") + i16(count) + b"".join(i32(o) for o in oids)
    return Case(i, "parse_wrong_count", variant, [message(b"P", body) + SYNC])


def gen_bind_format_count(rng, i):
    sql, oids, params, _ = statement_with_param(rng)
    variant = rng.choice(["3 formats, 1 parameter", "2 formats, 1 parameter", "result formats 3 for 1 column", "format count 0xffff"])
    prelude = parse(f"s{i}", sql, oids)
    if variant == "3 formats, 1 parameter":
        b = bind_body("", f"s{i}", params, (0, 0, 0))
    elif variant == "2 formats, 1 parameter":
        b = bind_body("", f"s{i}", params, (0, 1))
    elif variant == "result formats 3 for 1 column":
        b = bind_body("", f"s{i}", params, (), (0, 0, 0))
    else:
        b = cstr("") + cstr(f"s{i}") + i16(0xFFFF) + i16(0) + i16(0)
    return Case(i, "bind_format_count", variant, [prelude + message(b"B", b) + execute("") + SYNC])


def gen_bind_param_count(rng, i):
    sql, oids, params, _ = statement_with_param(rng)
    supplied = rng.choice([0, 2, 5])
    return Case(i, "bind_param_count", f"{supplied} for 1", [parse(f"s{i}", sql, oids) + bind("", f"s{i}", params * supplied if supplied else ()) + execute("") + SYNC])


def gen_bind_bad_format_code(rng, i):
    sql, oids, params, _ = statement_with_param(rng)
    code = rng.choice([2, 3, 7, -1, 0x7FFF, -32768])
    where = rng.choice(["parameter", "result"])
    b = bind("", f"s{i}", params, (code,), ()) if where == "parameter" else bind("", f"s{i}", params, (), (code,))
    return Case(i, "bind_bad_format_code", f"{where} format {code}", [parse(f"s{i}", sql, oids) + b + execute("") + SYNC])


def gen_bind_param_length(rng, i):
    sql, oids, _, _ = statement_with_param(rng)
    length = rng.choice([0x7FFFFFFF, -5, -2, -(2**31), 100, 0x10000])
    body = cstr("") + cstr(f"s{i}") + i16(0) + i16(1) + i32(length) + b"12" + i16(0)
    return Case(i, "bind_param_length", f"length {length}", [parse(f"s{i}", sql, oids) + message(b"B", body) + execute("") + SYNC])


def gen_bind_binary_garbage(rng, i):
    sql, oids, _, _ = statement_with_param(rng)
    value = junk(rng, 0, 7) if rng.random() < 0.8 else junk(rng, 9, 16)
    return Case(i, "bind_binary_garbage", f"{len(value)}-byte int8", [parse(f"s{i}", sql, oids) + bind("", f"s{i}", (value,), (1,)) + execute("") + SYNC])


def gen_describe_bad_kind(rng, i):
    kind = rng.choice([b for b in range(256) if b not in b"SP"])
    return Case(i, "describe_bad_kind", f"kind {bytes([kind])!r}", [describe(bytes([kind]), "") + SYNC])


def gen_close_bad_kind(rng, i):
    kind = rng.choice([b for b in range(256) if b not in b"SP"])
    return Case(i, "close_bad_kind", f"kind {bytes([kind])!r}", [close_msg(bytes([kind]), "") + SYNC])


def gen_describe_missing_statement(rng, i):
    return Case(i, "describe_missing_statement", "", [describe(b"S", rng.choice(["", f"nope_{i}"])) + SYNC])


def gen_describe_missing_portal(rng, i):
    return Case(i, "describe_missing_portal", "", [describe(b"P", rng.choice(["", f"nope_{i}"])) + SYNC])


def gen_bind_missing_statement(rng, i):
    sql, oids, params, _ = statement_with_param(rng)
    return Case(i, "bind_missing_statement", "", [bind("", f"nope_{i}", params) + execute("") + SYNC])


def gen_execute_missing_portal(rng, i):
    return Case(i, "execute_missing_portal", "", [execute(f"nope_{i}") + SYNC])


def gen_ignored_until_sync(rng, i):
    table = f"ignored_{i}"
    rest = parse("", f"CREATE TABLE {table} (a INT)") + bind("", "") + execute("")
    if rng.random() < 0.5:
        rest += FLUSH
    return Case(i, "ignored_until_sync", "", [bind("", f"nope_{i}") + rest + SYNC], markers=(table,))


def gen_parse_invalid_utf8(rng, i):
    return Case(i, "parse_invalid_utf8", "", [parse("", with_invalid_utf8(rng)) + bind("", "") + execute("") + SYNC])


def gen_bind_text_invalid_utf8(rng, i):
    value = b"a" + rng.choice(INVALID_UTF8) + b"z"
    return Case(i, "bind_text_invalid_utf8", "", [parse("", b"SELECT $1 AS v", (TEXT_OID,)) + bind("", "", (value,)) + execute("") + SYNC])


GENERATORS = {
    "startup_short_length": (gen_startup_short_length, 2),
    "startup_huge_length": (gen_startup_huge_length, 2),
    "startup_bad_version": (gen_startup_bad_version, 2),
    "startup_future_minor": (gen_startup_future_minor, 1),
    "startup_missing_terminator": (gen_startup_missing_terminator, 2),
    "startup_random_bytes": (gen_startup_random_bytes, 3),
    "startup_truncated": (gen_startup_truncated, 2),
    "startup_odd_params": (gen_startup_odd_params, 2),
    "ssl_then_garbage": (gen_ssl_then_garbage, 1),
    "cancel_random": (gen_cancel_random, 1),
    "cancel_bad_length": (gen_cancel_bad_length, 1),
    "drop_mid_startup": (gen_drop_mid_startup, 1),
    "query_nul_inside": (gen_query_nul_inside, 3),
    "query_trailing_junk": (gen_query_trailing_junk, 3),
    "query_smuggle": (gen_query_smuggle, 3),
    "query_no_terminator": (gen_query_no_terminator, 2),
    "query_invalid_utf8": (gen_query_invalid_utf8, 3),
    "unknown_type": (gen_unknown_type, 3),
    "bad_length": (gen_bad_length, 3),
    "copy_outside_copy": (gen_copy_outside_copy, 1),
    "split_valid_simple": (gen_split_valid_simple, 2),
    "split_valid_extended": (gen_split_valid_extended, 2),
    "split_startup": (gen_split_startup, 1),
    "drop_mid_message": (gen_drop_mid_message, 2),
    "truncated_parse": (gen_truncated("parse"), 2),
    "truncated_bind": (gen_truncated("bind"), 2),
    "truncated_describe": (gen_truncated("describe"), 1),
    "truncated_execute": (gen_truncated("execute"), 1),
    "truncated_close": (gen_truncated("close"), 1),
    "execute_empty_body": (gen_execute_empty_body, 2),
    "execute_max_rows": (gen_execute_max_rows, 1),
    "extended_trailing_junk": (gen_extended_trailing_junk, 3),
    "parse_wrong_count": (gen_parse_wrong_count, 2),
    "bind_format_count": (gen_bind_format_count, 2),
    "bind_param_count": (gen_bind_param_count, 2),
    "bind_bad_format_code": (gen_bind_bad_format_code, 2),
    "bind_param_length": (gen_bind_param_length, 2),
    "bind_binary_garbage": (gen_bind_binary_garbage, 1),
    "describe_bad_kind": (gen_describe_bad_kind, 1),
    "close_bad_kind": (gen_close_bad_kind, 1),
    "describe_missing_statement": (gen_describe_missing_statement, 1),
    "describe_missing_portal": (gen_describe_missing_portal, 1),
    "bind_missing_statement": (gen_bind_missing_statement, 1),
    "execute_missing_portal": (gen_execute_missing_portal, 1),
    "ignored_until_sync": (gen_ignored_until_sync, 2),
    "parse_invalid_utf8": (gen_parse_invalid_utf8, 2),
    "bind_text_invalid_utf8": (gen_bind_text_invalid_utf8, 1),
}
assert set(GENERATORS) == set(EXPECTED)


def generate(seed: int, count: int, kinds: list):
    """The seed's cases, one random generator per case (independent of the server)."""
    rng = random.Random(seed)
    weights = [GENERATORS[k][1] for k in kinds]
    for i in range(count):
        kind = rng.choices(kinds, weights)[0]
        case_rng = random.Random(rng.getrandbits(64))
        yield GENERATORS[kind][0](case_rng, i)


# ---------------------------------------------------------------------------------------
# Running a case
# ---------------------------------------------------------------------------------------


@dataclass
class Observation:
    errors: list = field(default_factory=list)  # ErrorResponse fields, in order
    types: list = field(default_factory=list)  # backend message types, in order
    values: list = field(default_factory=list)  # first column of every DataRow
    ended: str = ""  # 'ready' | 'closed' | 'silent' | 'hang' | 'login failed' | 'dropped'
    reset: bool = False
    ssl_answer: bytes | None = None
    usable: bool | None = None  # answered SELECT 1 afterwards
    probe_closed: bool = False
    malformed: str = ""  # the backend's own output could not be parsed
    elapsed: float = 0.0
    client_port: int = 0  # our end of the case's connection

    def describe(self) -> str:
        parts = []
        if self.ssl_answer is not None:
            parts.append(f"SSL answer {self.ssl_answer!r}")
        for e in self.errors[:2]:
            # Numbers in messages (names, values) vary from case to case.
            text = re.sub(r"\d{2,}", "N", e.get("M", ""))[:80]
            parts.append(f"{e.get('V') or e.get('S') or '?'} {e.get('C', 'no SQLSTATE')} \"{text}\"")
        if self.malformed:
            parts.append(f"malformed backend output ({self.malformed[:60]})")
        parts.append({"ready": "ReadyForQuery", "closed": "closed" + (" (reset)" if self.reset else ""),
                      "silent": "no answer", "hang": "no answer at all (hang)", "dropped": "dropped by the client",
                      }.get(self.ended, self.ended))
        if self.usable is True:
            parts.append("SELECT 1 works")
        elif self.usable is False:
            parts.append("SELECT 1 got " + ("a close" if self.probe_closed else "nothing"))
        return ", ".join(parts)


def collect(wire: Wire, obs: Observation, deadline: float, stop) -> str:
    """Reads messages into `obs` until `stop(msg)`, EOF or the deadline: 'stop'|'eof'|'timeout'."""
    while True:
        if time.monotonic() > deadline or len(obs.types) > 100_000:
            return "timeout"  # also when the server floods us without end
        try:
            msg = wire.next_message(deadline)
        except ValueError as e:
            obs.malformed = str(e)
            return "eof"
        if msg is None:
            obs.reset = obs.reset or wire.reset
            return "eof" if wire.eof else "timeout"
        kind, body = msg
        obs.types.append(kind.decode("latin-1"))
        try:
            if kind == b"E":
                obs.errors.append(error_fields(body))
            elif kind == b"D":
                row = data_row(body)
                obs.values.append(row[0] if row else None)
        except struct.error as e:
            obs.malformed = f"{kind!r}: {e}"
        if stop(msg):
            return "stop"


def probe(wire: Wire, obs: Observation, deadline: float):
    """Sends SELECT <marker> and waits for its row and ReadyForQuery; sets obs.usable."""
    marker = b"4242"
    seen = {"row": False, "err": False}
    if not wire.send(query(b"SELECT " + marker), deadline):
        obs.usable, obs.probe_closed = False, True
        return

    def stop(msg):
        if msg[0] == b"D" and obs.values and obs.values[-1] == marker:
            seen["row"] = True
        if msg[0] == b"E":
            seen["err"] = True
        return msg[0] == b"Z" and (seen["row"] or seen["err"])

    status = collect(wire, obs, deadline, stop)
    obs.usable = status == "stop" and seen["row"]
    obs.probe_closed = status == "eof"
    if status == "timeout" and obs.ended == "silent":
        obs.ended = "hang"


def run_case(case: Case, port: int, timeout: float, quiet: float) -> Observation:
    obs = Observation()
    started = time.monotonic()
    try:
        wire = login(port, timeout) if case.login else Wire(port)
    except (RuntimeError, OSError) as e:
        obs.ended = "login failed"
        obs.malformed = str(e)
        return obs
    seen = {"value": case.expect_value is None}
    obs.client_port = wire.sock.getsockname()[1]

    def answered(msg):
        # ReadyForQuery ends the case once the expected row (if any) or an error came;
        # after a FATAL error only the close does.
        if msg[0] == b"D" and obs.values and obs.values[-1] == case.expect_value:
            seen["value"] = True
        if any((e.get("V") or e.get("S")) == "FATAL" for e in obs.errors):
            return False
        return msg[0] == b"Z" and (seen["value"] or bool(obs.errors))

    try:
        deadline = time.monotonic() + timeout
        for n, chunk in enumerate(case.chunks):
            if n and case.gap:
                time.sleep(case.gap)
            if not wire.send(chunk, deadline):
                break
            if case.ssl_byte and n == 0:
                obs.ssl_answer = wire.read_byte(deadline)
        if case.drop:
            wire.close(rst=case.drop == "rst")
            obs.ended = "dropped"
            return obs
        if case.shut_wr:
            try:
                wire.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        status = collect(wire, obs, min(deadline, time.monotonic() + quiet), answered)
        obs.ended = {"stop": "ready", "eof": "closed"}.get(status, "silent")
        if obs.ended == "silent" and (case.shut_wr or not case.login):
            # Before login there is nothing to probe with: half-close (the server sees
            # EOF) and wait the rest of the bound for the close.
            if not case.shut_wr:
                try:
                    wire.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            status = collect(wire, obs, deadline, answered)
            obs.ended = {"stop": "ready", "eof": "closed" if case.shut_wr else "closed after EOF"}.get(status, "hang")
        elif obs.ended in ("ready", "silent"):
            probe(wire, obs, time.monotonic() + timeout)
        return obs
    finally:
        obs.elapsed = time.monotonic() - started
        wire.close()


def judge(case: Case, obs: Observation) -> list:
    """Symptoms that make this case a failure (empty: it passed)."""
    exp = EXPECTED[case.kind]
    fails = []
    for e in obs.errors:
        code = e.get("C")
        if not code:
            fails.append("ErrorResponse without SQLSTATE")
        elif code.startswith("XX"):
            fails.append(f"internal error {code}")
    if obs.malformed and obs.ended != "login failed":
        fails.append("malformed backend message")
    fatal_at = next((n for n, e in enumerate(obs.errors) if (e.get("V") or e.get("S")) == "FATAL"), None)
    if fatal_at is not None:
        after = obs.types[[n for n, t in enumerate(obs.types) if t == "E"][fatal_at] + 1 :]
        if after:
            fails.append(f"messages after FATAL ({''.join(after)[:10]})")
    if obs.ended == "login failed":
        return [f"could not log in: {obs.malformed}"]
    if obs.ended == "hang":
        return fails + ["hang: no answer within the time bound"]
    leaked = [v for v in obs.values if v in case.marker_values]
    if leaked:
        fails.append("smuggled statement ran (its row came back)")
    first = obs.errors[0] if obs.errors else None
    severity = (first.get("V") or first.get("S")) if first else None
    code = first.get("C") if first else None
    code_ok = first is not None and (not exp.codes or code in exp.codes)
    expected_codes = "/".join(exp.codes) or "any"
    if exp.outcome == "error_usable":
        if first is None:
            if obs.ended == "closed":
                fails.append("closed without ErrorResponse")
            elif obs.ended == "silent":
                fails.append("no answer to the message (ignored)")
            else:
                fails.append("accepted without ErrorResponse")
        else:
            if severity != "ERROR":
                fails.append(f"{severity} instead of ERROR")
            if not code_ok:
                fails.append(f"SQLSTATE {code} instead of {expected_codes}")
            if obs.ended == "closed":
                fails.append("connection closed after the error")
            elif obs.ended == "silent":
                fails.append("no ReadyForQuery after the error")
        if obs.ended != "closed" and obs.usable is False:
            fails.append("connection unusable afterwards")
        before_sync = obs.types[: obs.types.index("Z")] if "Z" in obs.types else obs.types
        if case.kind == "ignored_until_sync" and any(t in ("1", "2", "C") for t in before_sync):
            fails.append("messages after the error ran before Sync")
    elif exp.outcome == "fatal_close":
        if first is None:
            fails.append("closed without ErrorResponse" if obs.ended == "closed" else "connection stayed open (message ignored)")
        else:
            if severity != "FATAL":
                fails.append(f"{severity} instead of FATAL")
            if not code_ok:
                fails.append(f"SQLSTATE {code} instead of {expected_codes}")
            if obs.ended != "closed":
                fails.append("connection stayed open after the error")
    elif exp.outcome == "close":
        if obs.ended == "closed after EOF":
            # Fewer than 8 bytes may leave a server waiting for the rest of the header.
            if len(case.data) >= 8:
                fails.append("no answer until the client half-closed")
        elif obs.ended != "closed":
            fails.append("connection stayed open" + (" and usable" if obs.usable else ""))
        if first is not None and severity != "FATAL":
            fails.append(f"{severity} before the close instead of FATAL")
        if first is not None and not code_ok:
            fails.append(f"SQLSTATE {code} instead of {expected_codes}")
    elif exp.outcome == "login_or_fatal":
        if first is not None:
            if severity != "FATAL":
                fails.append(f"{severity} instead of FATAL")
            if obs.ended != "closed":
                fails.append("connection stayed open after the error")
            if not code_ok:
                fails.append(f"SQLSTATE {code} instead of {expected_codes}")
        elif obs.ended in ("closed", "closed after EOF"):
            fails.append("closed without ErrorResponse")
        elif obs.usable is False:
            fails.append("logged in but unusable")
    elif exp.outcome == "ok_usable":
        if first is not None:
            fails.append(f"unexpected error {severity} {code}")
        if obs.ended == "closed":
            fails.append("connection closed")
        elif obs.ended == "silent":
            fails.append("no answer")
        if case.expect_value is not None and case.expect_value not in obs.values:
            fails.append("wrong or missing result")
        if obs.ended != "closed" and obs.usable is False:
            fails.append("connection unusable afterwards")
    if case.kind == "ssl_then_garbage" and obs.ssl_answer not in (b"N", b"S"):
        fails.append(f"SSLRequest answered {obs.ssl_answer!r}")
    return fails


def fresh_check(port: int, timeout: float, markers=()):
    """None if a new connection answers SELECT 1 (and no marker table exists), else why not."""
    try:
        wire = login(port, timeout)
    except (RuntimeError, OSError) as e:
        return f"fresh connection failed: {e}", None
    try:
        deadline = time.monotonic() + timeout
        answer = simple_query(wire, "SELECT 1", deadline)
        if answer is None or answer[0] != [[b"1"]]:
            return f"fresh connection: SELECT 1 answered {answer!r}", None
        found = []
        if markers:
            answer = simple_query(wire, "SHOW TABLES", deadline)
            if answer is None or answer[1]:
                return f"fresh connection: SHOW TABLES answered {answer!r}", None
            names = {row[1].decode() for row in answer[0] if len(row) > 1 and row[1]}
            found = [m for m in markers if m in names]
        return None, found
    finally:
        wire.close()


# ---------------------------------------------------------------------------------------
# The connection limit
# ---------------------------------------------------------------------------------------


def connection_limit_phase(port: int, max_connections: int, extra: int, timeout: float) -> tuple:
    """(report dict, failures) of holding every slot, then `extra` more connections."""
    report = {"held": 0, "last_slot_works": False, "refused_53300": 0, "refused_other": collections.Counter(),
              "cancel_while_full": "", "held_still_works": False, "resumed": False, "all_slots_again": False}
    fails = []
    held, refused = [], []
    try:
        deadline = time.monotonic() + 10
        while len(held) < max_connections - 1:
            try:
                held.append(login(port, timeout))
            except (RuntimeError, OSError) as e:
                if time.monotonic() > deadline:
                    fails.append(f"could not hold idle connection {len(held) + 1} of {max_connections - 1}: {e}")
                    break
                time.sleep(0.1)
        report["held"] = len(held)
        try:
            last = login(port, timeout)
            held.append(last)
            answer = simple_query(last, "SELECT 1", time.monotonic() + timeout)
            report["last_slot_works"] = answer is not None and answer[0] == [[b"1"]]
        except (RuntimeError, OSError) as e:
            report["last_slot_works"] = False
            report["last_slot_error"] = str(e)
        if not report["last_slot_works"]:
            fails.append(f"connection {max_connections} of {max_connections} did not answer SELECT 1")
        # `extra` more at once: connect them all, then send every startup packet, then read.
        for _ in range(extra):
            try:
                refused.append(Wire(port))
            except OSError as e:
                report["refused_other"][f"connect failed: {e.strerror}"] += 1
        deadline = time.monotonic() + timeout
        for w in refused:
            w.send(startup(), deadline)
        # Each must answer FATAL 53300 and close; read them all until EOF under one bound.
        sel = selectors.DefaultSelector()
        for w in refused:
            sel.register(w.sock, selectors.EVENT_READ, w)
        pending = set(refused)
        deadline = time.monotonic() + timeout + extra * 0.01
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                w = key.data
                w.fill(time.monotonic() + 0.01)
                if w.eof:
                    pending.discard(w)
                    sel.unregister(w.sock)
        sel.close()
        outcome = {}
        for w in refused:
            kinds, error = [], None
            try:
                while len(w.buf) >= 5:
                    msg = w.next_message(time.monotonic())
                    if msg is None:
                        break
                    kinds.append(msg[0])
                    if msg[0] == b"E" and error is None:
                        error = error_fields(msg[1])
            except ValueError:
                kinds.append(b"?")
            if b"Z" in kinds:
                outcome[w] = "accepted"
            elif error is not None:
                label = f"{error.get('V') or error.get('S')} {error.get('C')}"
                outcome[w] = "53300" if label == "FATAL 53300" and w.eof else label + ("" if w.eof else " (left open)")
            else:
                outcome[w] = "closed without ErrorResponse" if w.eof else "no answer"
        for result in outcome.values():
            if result == "53300":
                report["refused_53300"] += 1
            else:
                report["refused_other"][result] += 1
        if report["refused_53300"] != extra:
            fails.append(f"{extra - report['refused_53300']} of {extra} connections past the limit were not refused "
                         f"with FATAL 53300: {dict(report['refused_other'])}")
        # A CancelRequest is still served when full: closed without a 53300.
        try:
            w = Wire(port)
            w.send(i32(16) + i32(CANCEL_REQUEST) + i32(1) + i32(2), time.monotonic() + timeout)
            obs = Observation()
            status = collect(w, obs, time.monotonic() + timeout, lambda m: False)
            obs.ended = "closed" if status == "eof" else "hang"
            report["cancel_while_full"] = obs.describe()
            if status != "eof" or any(e.get("C") == "53300" for e in obs.errors):
                fails.append(f"CancelRequest while full: {report['cancel_while_full']}")
            w.close()
        except OSError as e:
            fails.append(f"CancelRequest while full: {e}")
        if held:
            answer = simple_query(held[0], "SELECT 1", time.monotonic() + timeout)
            report["held_still_works"] = answer is not None and answer[0] == [[b"1"]]
            if not report["held_still_works"]:
                fails.append("a held connection stopped answering while the server was full")
    finally:
        for w in held + refused:
            w.close()
    # Service resumes, and every slot comes back.
    deadline = time.monotonic() + max(timeout, 10)
    while time.monotonic() < deadline:
        err, _ = fresh_check(port, timeout)
        if err is None:
            report["resumed"] = True
            break
        time.sleep(0.2)
    if not report["resumed"]:
        fails.append("service did not resume after the connections closed")
        return report, fails
    again = []
    try:
        deadline = time.monotonic() + max(timeout, 10)
        while len(again) < max_connections and time.monotonic() < deadline:
            try:
                again.append(login(port, timeout))
            except (RuntimeError, OSError):
                time.sleep(0.1)
        report["all_slots_again"] = len(again) == max_connections
        if not report["all_slots_again"]:
            fails.append(f"only {len(again)} of {max_connections} slots free again after closing everything")
    finally:
        for w in again:
            w.close()
    # The server frees a slot when it sees the close, which a loaded machine may delay (as a
    # PostgreSQL backend's exit is): wait for one before the checks that follow log in.
    deadline = time.monotonic() + 10
    while True:
        try:
            login(port, timeout).close()
            break
        except (RuntimeError, OSError) as e:
            if time.monotonic() > deadline:
                fails.append(f"no slot free 10 s after closing every connection: {e}")
                break
            time.sleep(0.1)
    report["refused_other"] = dict(report["refused_other"])
    return report, fails


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def default_binary() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("BUCKETSQL_BINARY", os.path.join(root, "target", "release", "bucketsql"))


def print_cases():
    print(f"{'case':28} {'expected':15} {'SQLSTATE':22} PostgreSQL 16")
    for kind, exp in EXPECTED.items():
        print(f"{kind:28} {exp.outcome:15} {'/'.join(exp.codes) or '-':22} {exp.postgres}")
    print()
    print("expected outcomes:")
    print("  error_usable    ErrorResponse severity ERROR with that SQLSTATE, then ReadyForQuery; SELECT 1 then works")
    print("  fatal_close     ErrorResponse severity FATAL with that SQLSTATE, nothing after it, then the close")
    print("  close           the server closes, with at most a FATAL of that SQLSTATE first (no hang)")
    print("  login_or_fatal  a normal login (SELECT 1 works), or FATAL and the close")
    print("  ok_usable       no error, the expected row, ReadyForQuery; SELECT 1 then works")
    print("  dropped         nothing to check on the connection; the partial statement must not have run")
    print("always: no SQLSTATE class XX, no ErrorResponse without SQLSTATE, an answer within --timeout, and a")
    print("fresh connection answers SELECT 1 after every case.")
    print()
    print("connection limit (after the cases): max-connections - 1 idle sessions held, one more logs in and")
    print("answers SELECT 1, --idle-connections more each get FATAL 53300 and are closed, a CancelRequest is")
    print("still served (closed without 53300), a held session still answers, and after closing everything a")
    print("fresh connection works and max-connections sessions can be open at once again.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=default_binary(), help="the bucketsql executable")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--frames", type=int, default=500, help="number of fuzz cases")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds without an answer that count as a hang")
    ap.add_argument("--quiet", type=float, default=3.0,
                    help="seconds of silence after which a case's message counts as unanswered and SELECT 1 is sent")
    ap.add_argument("--max-connections", type=int, default=100, help="the server's --max-connections (passed on if not 100)")
    ap.add_argument("--idle-connections", type=int, default=900, help="connections opened past the limit at the end (0: skip)")
    ap.add_argument("--kinds", default="", help="comma-separated case kinds to draw from (default: all)")
    ap.add_argument("--only-case", type=int, default=None, help="run only case I of the seed's sequence")
    ap.add_argument("--list-cases", action="store_true", help="print the case table and exit")
    ap.add_argument("--server-data-limit", type=float, default=8.0,
                    help="GiB of data segment (RLIMIT_DATA) the server may map, to protect the host (0: no limit)")
    ap.add_argument("--max-deaths", type=int, default=1000, help="stop after the server died this many times")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and server log")
    ap.add_argument("--verbose", action="store_true", help="print every case's outcome")
    args = ap.parse_args()

    if args.list_cases:
        print_cases()
        return 0
    kinds = [k for k in args.kinds.split(",") if k] or list(GENERATORS)
    unknown = [k for k in kinds if k not in GENERATORS]
    if unknown:
        ap.error(f"unknown case kinds: {unknown}")
    if not os.access(args.binary, os.X_OK):
        ap.error(f"not an executable: {args.binary}")

    extra_args = [] if args.max_connections == 100 else ["--max-connections", str(args.max_connections)]
    server = Server(args.binary, "fuzz-protocol", extra_args, keep=args.keep, data_limit=int(args.server_data_limit * (1 << 30)))
    started = time.monotonic()
    failures = []  # Failure records, one per failing case (or check)
    behaviour = collections.Counter()  # (kind, what the server did) -> cases
    run_by_kind, failed_by_kind = collections.Counter(), collections.Counter()
    deaths = 0
    limit_report, panics, final_ok = {}, collections.Counter(), False
    try:
        server.start()
        print(f"server pid {server.pid} on 127.0.0.1:{server.port}, data {server.data_dir}", flush=True)
        print(f"binary {server.build}", flush=True)
        count = args.frames if args.only_case is None else args.only_case + 1
        for case in generate(args.seed, count, kinds):
            if args.only_case is not None and case.index != args.only_case:
                continue
            run_by_kind[case.kind] += 1
            obs = run_case(case, server.port, args.timeout, args.quiet)
            symptoms = judge(case, obs)
            detail = obs.describe()
            err, found = fresh_check(server.port, args.timeout, case.markers)
            if found:
                symptoms.append("smuggled statement ran (its table exists)")
            # The case's connection is closed on our side by now: the server must close its side
            # too, or it keeps a connection slot for a client that has gone.
            deadline = time.monotonic() + 1.0
            while obs.client_port in close_wait(server.port) and time.monotonic() < deadline:
                time.sleep(0.05)
            if obs.client_port in close_wait(server.port):
                symptoms.append("server kept the connection after the client left (CLOSE_WAIT)")
            if err:
                # Give a dying process a moment to be seen as dead.
                for _ in range(30):
                    if not server.alive():
                        break
                    time.sleep(0.1)
                if not server.alive():
                    deaths += 1
                    symptoms.append("server died")
                    err += f" (server {server.exit_status()})"
                else:
                    symptoms.append("fresh connection refused afterwards")
                detail += f"; then {err}; server log ends: {server.log_tail(300)!r}"
            behaviour[(case.kind, obs.describe())] += 1
            if symptoms:
                failed_by_kind[case.kind] += 1
                failures.append({"case": case, "kind": case.kind, "symptom": "; ".join(symptoms), "detail": detail})
            if args.verbose:
                print(f"#{case.index} {case.kind} {case.note}: {obs.describe()}" + (f"  FAIL: {symptoms}" if symptoms else ""))
            if err:
                if deaths > args.max_deaths:
                    print(f"the server died more than {args.max_deaths} times; stopping")
                    break
                server.restart()
                print(f"case #{case.index}: {symptoms[-1]}; restarted the server: pid {server.pid} on 127.0.0.1:{server.port}",
                      flush=True)
            if (case.index + 1) % 1000 == 0:
                print(f"... {case.index + 1} cases, {len(failures)} failed, {time.monotonic() - started:.0f}s", flush=True)
        if args.idle_connections and args.only_case is None:
            print(f"connection limit: holding {args.max_connections - 1}, then {args.idle_connections} more", flush=True)
            limit_report, limit_fails = connection_limit_phase(server.port, args.max_connections, args.idle_connections, args.timeout)
            for f in limit_fails:
                failures.append({"case": None, "kind": "connection_limit", "symptom": f, "detail": ""})
        alive = server.alive()
        err, _ = fresh_check(server.port, args.timeout) if alive else ("the server is not running", None)
        final_ok = alive and err is None
        if not final_ok:
            failures.append({"case": None, "kind": "final_check", "symptom": f"server alive={alive}: {err}", "detail": ""})
        panics = server.panics()
    except Exception as e:  # noqa: BLE001 - report what happened, then the summary
        traceback.print_exc()
        failures.append({"case": None, "kind": "fuzzer", "symptom": f"aborted: {type(e).__name__}: {e}", "detail": ""})
        panics = server.panics()
    finally:
        server.cleanup()

    # ---- summary
    elapsed = time.monotonic() - started
    cases_run = sum(run_by_kind.values())
    print()
    print(f"{cases_run} cases (seed {args.seed}) in {elapsed:.0f}s; server started {server.starts} time(s), died {deaths} time(s)")
    print()
    print("What the server did, by case (expected, then each observed behaviour and how often):")
    for kind, exp in EXPECTED.items():
        if not run_by_kind[kind]:
            continue
        status = "ok" if not failed_by_kind[kind] else f"{failed_by_kind[kind]} of {run_by_kind[kind]} FAILED"
        print(f"  {kind} [{status}]")
        print(f"      expected: {exp.outcome} {'/'.join(exp.codes)} ({exp.postgres})")
        for (k, seen), n in sorted(behaviour.items(), key=lambda x: -x[1]):
            if k == kind:
                print(f"      {n:5d}x {seen}")
    groups = collections.OrderedDict()
    for f in failures:
        g = groups.setdefault((f["kind"], f["symptom"]), {"count": 0, "example": None, "detail": f["detail"]})
        g["count"] += 1
        case = f["case"]
        if case and (g["example"] is None or len(case.data) < len(g["example"].data)):
            g.update(example=case, detail=f["detail"])
    print()
    if groups:
        print(f"FAILURES: {len(failures)} failed cases/checks in {len(groups)} groups (kind: symptoms)")
        for (kind, symptom), g in sorted(groups.items(), key=lambda x: (x[0][0], -x[1]["count"])):
            print(f"  [{g['count']}x] {kind}: {symptom}")
            case = g["example"]
            if case:
                print(f"      shortest: #{case.index} ({case.note}) {case.repro()}")
                print(f"      server did: {g['detail'][:500]}")
                print(f"      rerun: --seed {args.seed} --frames {args.frames} --only-case {case.index}")
            elif g["detail"]:
                print(f"      {g['detail'][:600]}")
    else:
        print("no failures")
    print_panics(panics, 20)
    if limit_report:
        print()
        print(f"connection limit: {json.dumps(limit_report, default=str)}")
    result = {
        "ok": not failures,
        "seed": args.seed,
        "binary": server.build,
        "frames": cases_run,
        "failed": len(failures),
        "groups": [{"kind": k, "symptom": s, "count": g["count"]} for (k, s), g in groups.items()],
        "server_deaths": deaths,
        "alive_and_serving_at_end": final_ok,
        "connection_limit": {k: v for k, v in limit_report.items() if k != "refused_other"},
        "server_panics": sum(panics.values()),
        "seconds": round(elapsed, 1),
    }
    print("RESULT " + json.dumps(result, default=str))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

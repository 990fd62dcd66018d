"""The server both fuzzers run: `bucketsql serve` on a fresh data directory and a free port,
from a private copy of the binary (a rebuild mid-run cannot change what restarts run), under
`RLIMIT_DATA`, checked to be the process that holds the listening socket; and what /proc and
its log tell about it (sockets, CPU time, resident memory, panics)."""

from __future__ import annotations

import collections
import hashlib
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_sockets(port: int):
    """(state, remote port, inode) of every socket bound to local `port`, from /proc/net/tcp{,6}."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if int(cols[1].rsplit(":", 1)[1], 16) == port:
                        yield cols[3], int(cols[2].rsplit(":", 1)[1], 16), cols[9]
        except OSError:
            pass


def listening_inodes(port: int) -> set:
    return {inode for state, _, inode in tcp_sockets(port) if state == "0A"}


def close_wait(port: int) -> set:
    """Client ports of the server's sockets on `port` whose client has closed but the server
    has not (state CLOSE_WAIT)."""
    return {client for state, client, _ in tcp_sockets(port) if state == "08"}


def owns_listener(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on `port` (not another server)."""
    inodes = listening_inodes(port)
    if not inodes:
        return not os.path.exists("/proc/net/tcp")
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    except OSError:
        return False
    return False


class Server:
    """One `bucketsql serve` on a fresh data directory; `restart` keeps the directory."""

    def __init__(self, binary: str, name: str, extra_args=(), keep: bool = False, data_limit: int = 8 << 30):
        self.binary = binary
        self.data_limit = data_limit
        self.extra_args = list(extra_args)
        self.keep = keep
        self.root = tempfile.mkdtemp(prefix=f"bucketsql-{name}-")
        self.data_dir = os.path.join(self.root, "data")
        self.log_path = os.path.join(self.root, "server.log")
        self.proc = None
        self.port = None
        self.starts = 0
        # Run a private copy: a rebuild of the original mid-run cannot change what restarts run.
        self.pinned = os.path.join(self.root, "bucketsql")
        shutil.copy2(binary, self.pinned)
        with open(self.pinned, "rb") as f:
            self.build = {"path": binary, "sha256": hashlib.file_digest(f, "sha256").hexdigest()[:16],
                          "mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(binary)))}

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        last = None
        for _ in range(5):
            self.port = free_port()
            log = open(self.log_path, "ab")
            env = dict(os.environ)
            env.setdefault("RUST_LOG", "warn")
            cmd = [self.pinned, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir",
                   self.data_dir, "--memory-limit", "1GiB", *self.extra_args]
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                         preexec_fn=self._limit_memory)
            log.close()
            self.starts += 1
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    last = f"exited with {self.proc.returncode}: {self.log_tail()}"
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                except OSError:
                    time.sleep(0.05)
                    continue
                if owns_listener(self.proc.pid, self.port):
                    return
                last = f"port {self.port} is served by another process"
                self.stop_process()
                break
            else:
                last = "did not accept connections within 60 s"
                self.stop_process()
        raise RuntimeError(f"could not start {self.binary}: {last}")

    def _limit_memory(self):
        # Runs in the child before exec: a runaway statement then fails an allocation (the
        # server aborts) instead of driving the host into its OOM killer.
        if self.data_limit:
            resource.setrlimit(resource.RLIMIT_DATA, (self.data_limit, self.data_limit))

    def exit_status(self) -> str:
        if self.proc is None or self.proc.poll() is None:
            return "running"
        code = self.proc.returncode
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_dead(self, seconds: float) -> bool:
        """True if the process exits within `seconds` (a crash may take a moment)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.1)
        return not self.alive()

    def cpu_seconds(self) -> float:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def rss_mib(self) -> float:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def wait_idle(self, limit: float) -> float:
        """Waits (at most `limit` s) until the server uses < 10% of a core; returns the wait."""
        started = time.monotonic()
        last = self.cpu_seconds()
        while time.monotonic() - started < limit and self.alive():
            time.sleep(1.0)
            now = self.cpu_seconds()
            if now - last < 0.1:
                break
            last = now
        return time.monotonic() - started

    def stop_process(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self):
        self.stop_process()
        self.start()

    def cleanup(self):
        self.stop_process()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def panics(self) -> collections.Counter:
        """Distinct panics ('thread … panicked at FILE: MSG') and failed allocations in the log."""
        found = collections.Counter()
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return found
        for i, line in enumerate(lines):
            if "panicked at" in line or line.startswith("memory allocation of"):
                where = line.split("panicked at", 1)[-1].strip().rstrip(":")
                what = lines[i + 1].strip() if "panicked at" in line and i + 1 < len(lines) else ""
                found[f"{where}: {what}"[:200]] += 1
        return found


def print_panics(panics: collections.Counter, most: int) -> None:
    """Prints the server log's panics and failed allocations, the `most` frequent first."""
    if panics:
        print()
        print("panics / aborts in the server log:")
        for what, n in panics.most_common(most):
            print(f"  {n:5d}x {what}")

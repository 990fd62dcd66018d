#!/usr/bin/env python3
"""COPY a large upload into a bucketed table under a small --memory-limit and report the
server's resident memory.

    scripts/copy_memory.py target/release/bucketsql [--gigabytes 1.5] [--memory-limit 256MiB]

Starts a server on a fresh data directory, streams generated rows (a BIGINT key, a ~90-byte
text, a day) through `psql -c "COPY … FROM STDIN"`, samples the server's VmRSS while it runs,
then checks the outcome: every row loaded (count and sum of keys), or SQLSTATE 53200 with
nothing loaded, and in both cases the server answers the next query.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def status_kib(pid, field):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    return 0


def psql(port, sql, **kw):
    return subprocess.run(['psql', '-h', '127.0.0.1', '-p', str(port), '-U', 'postgres', '-X', '-q', '-A', '-t',
                           '-v', 'ON_ERROR_STOP=1', '-c', sql], capture_output=True, text=True, **kw)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('binary')
    parser.add_argument('--gigabytes', type=float, default=1.5)
    parser.add_argument('--memory-limit', default='256MiB')
    parser.add_argument('--buckets', type=int, default=16)
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix='bucketsql-copy-')
    port = free_port()
    server = subprocess.Popen([args.binary, 'serve', '--data-dir', data_dir, '--listen', f'127.0.0.1:{port}',
                               '--memory-limit', args.memory_limit], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(100):
        if psql(port, 'SELECT 1').returncode == 0:
            break
        time.sleep(0.1)
    idle_kib = status_kib(server.pid, 'VmRSS')
    created = psql(port, f'CREATE TABLE big (k BIGINT, payload STRING, day INT) USING parquet '
                         f'CLUSTERED BY (k) SORTED BY (k) INTO {args.buckets} BUCKETS')
    assert created.returncode == 0, created.stderr

    samples = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            samples.append(status_kib(server.pid, 'VmRSS'))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    target = int(args.gigabytes * 1e9)
    copy = subprocess.Popen(['psql', '-h', '127.0.0.1', '-p', str(port), '-U', 'postgres', '-X', '-q',
                             '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-c', 'COPY big FROM STDIN'],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = time.time()
    sent = rows = key_sum = 0
    filler = 'x' * 70
    while sent < target:
        lines = []
        for k in range(rows, rows + 10000):
            k = (k * 2654435761) % (1 << 32)
            lines.append(f'{k}\tpayload {k:>14} {filler[:60 + k % 11]}\t{k % 30}\n')
            key_sum += k
        chunk = ''.join(lines).encode()
        copy.stdin.write(chunk)
        sent += len(chunk)
        rows += 10000
    _, err = copy.communicate()
    elapsed = time.time() - started
    done.set()
    sampler.join()

    peak_kib = status_kib(server.pid, 'VmHWM')
    count = psql(port, 'SELECT count(*), sum(k) FROM big')
    alive = psql(port, 'SELECT 1')
    print(f'COPY of {sent / 1e9:.2f} GB ({rows} rows) under --memory-limit {args.memory_limit}: '
          f'{"ok" if copy.returncode == 0 else "failed: " + err.decode().strip()} in {elapsed:.1f} s '
          f'({sent / 1e6 / elapsed:.0f} MB/s)')
    print(f'server resident memory: idle {idle_kib // 1024} MiB, peak {peak_kib // 1024} MiB '
          f'(highest sample {max(samples, default=0) // 1024} MiB)')
    print(f'table: {count.stdout.strip()!r}; next query: {"answered" if alive.returncode == 0 else alive.stderr}')
    server.terminate()
    server.wait()
    subprocess.run(['rm', '-rf', data_dir])

    if copy.returncode == 0:
        ok = count.stdout.strip() == f'{rows}|{key_sum}'
    else:
        ok = '53200' in err.decode() and count.stdout.strip().startswith('0|')
    ok = ok and alive.returncode == 0
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()

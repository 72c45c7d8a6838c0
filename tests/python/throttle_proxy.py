"""A throttling TCP proxy: a measured link for the remote tests and the bench.

    python throttle_proxy.py --target HOST:PORT [--listen 127.0.0.1:0]
        --latency-ms 20 --mbit 400 [--port-file PATH] [--exit-on-stdin-close]
    python throttle_proxy.py --self-test

Listens (by default on a free loopback port), prints one line `PORT <n>` on
stdout once listening (and writes `<n>` to --port-file, atomically, if
given), and forwards every accepted TCP connection to the target in both
directions, through a model of one network link:

- latency: every chunk read at time t is delivered no earlier than
  t + latency (one way), in order; chunks are pipelined as on a real link,
  so a transfer pays the latency once, not once per chunk;
- bandwidth: each direction is one transmitter shared by ALL connections
  (a link, not a per-connection limit): a chunk is serialised after the
  ones read before it, at --mbit megabits (10^6 bits) per second, before
  its latency starts (a token bucket of no burst, in virtual time). A connection reads its next chunk only once its
  current one is on the wire (a one-chunk queue per connection at the
  bottleneck), so concurrent connections interleave and share the link
  fairly, and a sender is slowed by back-pressure as by a real link;
- connection setup: the first byte towards the target flows one round trip
  (2 x latency) after the client's connect, as after a TCP handshake on the
  link; the reply to it therefore arrives 4 x latency after connect.

--mbit 0 means no bandwidth limit; --latency-ms 0 no latency.

A half-close (EOF) is passed on in order, after the data before it; a reset
or error on one side aborts that connection only (the other side sees a
reset), never the proxy. SIGTERM and SIGINT stop it cleanly (exit 0); with
--exit-on-stdin-close it also stops when its standard input closes, so it
never outlives the test that started it. On SIGUSR1 and at exit it prints
its counters to stderr as one JSON line:
`{"connections": accepted, "active": open now, "bytes_up": client->target,
"bytes_down": target->client, "errors": connections ended by an error,
"refused": connections the target refused}` (bytes counted when delivered).

--self-test starts a local bulk server and a proxy in front of it (as a
child process, through the command line above) at 20 ms and 80 Mbit/s, and
checks the round trip, the bandwidth, the sharing between two connections,
that the proxy itself is not the bottleneck, half-close, a reset
connection and the counters; it exits non-zero with a message on failure.

Standard library only; Python 3.11+.
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import socketserver
import subprocess
import struct
import sys
import threading
import time

CHUNK = 64 * 1024


def parse_addr(text, what):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"throttle_proxy: {what} must be HOST:PORT, not {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


class Link:
    """One direction of the link, shared by every connection."""

    def __init__(self, mbit, latency):
        self.rate = mbit * 1e6 / 8 if mbit > 0 else None  # bytes per second
        self.latency = latency
        self.free_at = 0.0  # when the transmitter is done with what it has

    def reserve(self, n, not_before):
        """Serialises `n` bytes no earlier than `not_before`, after every
        chunk reserved before; returns (start, end) of their transmission."""
        start = max(not_before, self.free_at)
        if self.rate is None:
            return start, start
        end = start + n / self.rate
        self.free_at = end
        return start, end


class Proxy:
    def __init__(self, target, mbit, latency):
        self.target = target
        self.latency = latency
        self.up = Link(mbit, latency)  # client -> target
        self.down = Link(mbit, latency)  # target -> client
        rate = self.up.rate
        # Bytes of one direction of one connection read but not yet
        # delivered: room for twice what the link holds in flight, so the
        # bound only bites when the receiving side does not drain.
        bdp = rate * latency if rate is not None else 0
        self.pending_limit = max(4 << 20, int(2 * bdp) + 2 * CHUNK)
        self.stats = {
            "connections": 0,
            "active": 0,
            "bytes_up": 0,
            "bytes_down": 0,
            "errors": 0,
            "refused": 0,
        }
        self.tasks = set()
        self.stopping = False

    def report(self):
        print(json.dumps(self.stats), file=sys.stderr, flush=True)

    async def handle(self, client_reader, client_writer):
        task = asyncio.current_task()
        self.tasks.add(task)
        self.stats["connections"] += 1
        self.stats["active"] += 1
        loop = asyncio.get_running_loop()
        accepted = loop.time()
        target_writer = None
        failed = False
        parts = []
        try:
            try:
                target_reader, target_writer = await asyncio.open_connection(*self.target)
            except OSError:
                self.stats["refused"] += 1
                failed = True
                return
            up, down = Channel(), Channel()
            # The request leaves after the handshake's round trip; data the
            # target sends first leaves once the target has accepted.
            parts = [
                asyncio.create_task(self.pump(client_reader, up, self.up, accepted + 2 * self.latency)),
                asyncio.create_task(self.deliver(up, target_writer, "bytes_up")),
                asyncio.create_task(self.pump(target_reader, down, self.down, accepted + self.latency)),
                asyncio.create_task(self.deliver(down, client_writer, "bytes_down")),
            ]
            done, _ = await asyncio.wait(parts, return_when=asyncio.FIRST_EXCEPTION)
            failed = any(t.exception() is not None for t in done)
        except asyncio.CancelledError:
            failed = True  # shutting down
        except Exception:  # noqa: BLE001 - one connection never kills the proxy
            failed = True
        finally:
            for t in parts:
                t.cancel()
            if parts:
                await asyncio.gather(*parts, return_exceptions=True)
            for w in (client_writer, target_writer):
                if w is None:
                    continue
                if failed:
                    w.transport.abort()  # a reset on both sides
                else:
                    w.close()
            if failed and target_writer is not None and not self.stopping:
                self.stats["errors"] += 1
            self.stats["active"] -= 1
            self.tasks.discard(task)

    async def pump(self, reader, channel, link, ready_at):
        """Reads `reader` chunk by chunk onto `link`, queueing each chunk on
        `channel` with the time it arrives at the other end."""
        loop = asyncio.get_running_loop()
        last = 0.0
        while True:
            data = await reader.read(CHUNK)
            now = loop.time()
            if not data:
                channel.queue.put_nowait((max(max(now, ready_at) + link.latency, last), None))
                return
            start, end = link.reserve(len(data), max(now, ready_at))
            last = max(end + link.latency, last)
            channel.pending += len(data)
            channel.queue.put_nowait((last, data))
            # Read the next chunk once this one is on the wire.
            if start > now:
                await asyncio.sleep(start - now)
            while channel.pending > self.pending_limit:
                channel.room.clear()
                await channel.room.wait()

    async def deliver(self, channel, writer, counter):
        """Writes the chunks of `channel` to `writer`, each at its time; an
        EOF mark half-closes `writer`."""
        loop = asyncio.get_running_loop()
        while True:
            at, data = await channel.queue.get()
            delay = at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if data is None:
                if writer.can_write_eof():
                    try:
                        writer.write_eof()
                    except OSError:
                        pass  # the peer is gone already: nothing to half-close
                return
            writer.write(data)
            await writer.drain()
            self.stats[counter] += len(data)
            channel.pending -= len(data)
            if channel.pending <= self.pending_limit:
                channel.room.set()


class Channel:
    """One direction of one connection: chunks read, not yet delivered."""

    def __init__(self):
        self.queue = asyncio.Queue()  # (deliver at, bytes or None for EOF)
        self.pending = 0  # bytes queued
        self.room = asyncio.Event()


def write_port_file(path, port):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


async def serve(args):
    loop = asyncio.get_running_loop()
    proxy = Proxy(parse_addr(args.target, "--target"), args.mbit, args.latency_ms / 1000)
    host, port = parse_addr(args.listen, "--listen")
    server = await asyncio.start_server(proxy.handle, host, port, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, proxy.report)
    if args.exit_on_stdin_close:

        def watch_stdin():
            try:
                while sys.stdin.buffer.read(65536):
                    pass
            finally:
                loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
    if args.port_file:
        write_port_file(args.port_file, port)
    print(f"PORT {port}", flush=True)
    await stop.wait()
    proxy.stopping = True
    server.close()
    tasks = list(proxy.tasks)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    proxy.report()


# ---- self-test -------------------------------------------------------------


class BulkHandler(socketserver.StreamRequestHandler):
    """Line commands: `PING` -> `PONG`; `GET n` -> n bytes; `SINK` -> reads
    to EOF, answers `GOT n` and closes."""

    def handle(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        block = bytes(range(256)) * 256
        try:
            while True:
                line = self.rfile.readline()
                if not line:
                    return
                cmd = line.split()
                if cmd[0] == b"PING":
                    self.wfile.write(b"PONG\n")
                elif cmd[0] == b"GET":
                    n = int(cmd[1])
                    while n > 0:
                        part = block[: min(n, len(block))]
                        self.wfile.write(part)
                        n -= len(part)
                elif cmd[0] == b"SINK":
                    total = 0
                    while chunk := self.rfile.read1(65536):
                        total += len(chunk)
                    self.wfile.write(b"GOT %d\n" % total)
                    return
                self.wfile.flush()
        except OSError:
            return


class BulkServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    got = 0
    while got < n:
        chunk = s.recv(min(1 << 20, n - got))
        if not chunk:
            raise RuntimeError(f"connection closed after {got} of {n} bytes")
        got += len(chunk)


def recv_line(s):
    out = b""
    while not out.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            raise RuntimeError(f"connection closed after {out!r}")
        out += chunk
    return out


def fetch(port, size, out, key):
    """`GET size` on a new connection; its time from connect to the last
    byte goes to `out[key]`."""
    t0 = time.perf_counter()
    s = connect(port)
    s.sendall(b"GET %d\n" % size)
    recv_exact(s, size)
    out[key] = time.perf_counter() - t0
    s.close()


def proxy_command(target, latency_ms, mbit, *extra):
    """This script's command line in front of 127.0.0.1:`target`."""
    return [
        sys.executable,
        os.path.abspath(__file__),
        "--target",
        f"127.0.0.1:{target}",
        "--latency-ms",
        str(latency_ms),
        "--mbit",
        str(mbit),
        *extra,
    ]


def self_test():
    latency, mbit = 0.020, 80.0
    rate = mbit * 1e6 / 8
    size = 4 << 20
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    bulk = BulkServer(("127.0.0.1", 0), BulkHandler)
    threading.Thread(target=bulk.serve_forever, daemon=True).start()
    target = bulk.server_address[1]
    proc = subprocess.Popen(
        proxy_command(target, latency * 1000, mbit),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            raise SystemExit(f"self-test: the proxy said {line!r}")
        port = int(line.split()[1])
        print(f"proxy on {port} -> {target} at {latency * 1000:g} ms, {mbit:g} Mbit/s")

        # (a) connect + one request/response: 4 one-way latencies.
        model = 4 * latency
        t0 = time.perf_counter()
        s = connect(port)
        s.sendall(b"PING\n")
        reply = recv_line(s)
        took = time.perf_counter() - t0
        check(reply == b"PONG\n", f"(a) reply {reply!r}")
        check(
            0.9 * model <= took <= 1.6 * model,
            f"(a) connect + round trip {took * 1000:.1f} ms, model {model * 1000:.0f} ms",
        )
        # Another round trip on the same connection: 2 latencies.
        t0 = time.perf_counter()
        s.sendall(b"PING\n")
        recv_line(s)
        took = time.perf_counter() - t0
        check(
            0.9 * 2 * latency <= took <= 1.6 * 2 * latency,
            f"(a) round trip on an open connection {took * 1000:.1f} ms, model {2 * latency * 1000:.0f} ms",
        )
        s.close()

        # (b) + (d) 4 MB: size / bandwidth (plus the latencies), not more
        # than 1.6x: the latency is pipelined, the proxy keeps up.
        times = {}
        fetch(port, size, times, 0)
        floor, model = size / rate, size / rate + 4 * latency
        check(
            times[0] >= 0.9 * floor,
            f"(b) {size >> 20} MiB in {times[0]:.3f} s, >= 0.9 x {floor:.3f} s",
        )
        check(
            times[0] <= 1.6 * model,
            f"(d) {size >> 20} MiB in {times[0]:.3f} s, <= 1.6 x model {model:.3f} s",
        )

        # (c) + (d) two at once share the link, fairly.
        times = {}
        t0 = time.perf_counter()
        threads = [threading.Thread(target=fetch, args=(port, size, times, k)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - t0
        floor, model = 2 * size / rate, 2 * size / rate + 4 * latency
        check(len(times) == 2, "(c) both transfers finished")
        check(
            took >= 0.9 * floor,
            f"(c) 2 x {size >> 20} MiB at once in {took:.3f} s, >= 0.9 x {floor:.3f} s",
        )
        check(
            took <= 1.6 * model,
            f"(d) 2 x {size >> 20} MiB at once in {took:.3f} s, <= 1.6 x model {model:.3f} s",
        )
        if len(times) == 2:
            first, last = sorted(times.values())
            check(
                first >= 0.7 * last,
                f"(c) shared fairly: done at {first:.3f} s and {last:.3f} s",
            )

        # (e) half-close: the target sees EOF after the data, and answers.
        s = connect(port)
        s.sendall(b"SINK\n" + b"x" * 300_000)
        s.shutdown(socket.SHUT_WR)
        reply = recv_line(s)
        check(reply == b"GOT 300000\n", f"(e) half-close: {reply!r}")
        rest = s.recv(16)
        check(rest == b"", f"(e) closed after the answer: {rest!r}")
        s.close()

        # (f) a client that resets mid-transfer does not hurt the proxy.
        s = connect(port)
        s.sendall(b"GET %d\n" % size)
        s.recv(1000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        time.sleep(0.1)
        s = connect(port)
        s.sendall(b"PING\n")
        check(recv_line(s) == b"PONG\n", "(f) still serving after a reset connection")
        s.close()
        time.sleep(0.1)

        # (g) counters on SIGUSR1 and at exit; SIGTERM exits 0.
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            check(False, "(g) exits on SIGTERM")
        check(proc.returncode == 0, f"(g) exit status {proc.returncode}")
        lines = [json.loads(x) for x in err.decode().splitlines() if x.startswith("{")]
        check(len(lines) == 2, f"(g) two counter lines: {err.decode()!r}")
        if lines:
            c = lines[-1]
            check(c["connections"] == 7 and c["active"] == 0, f"(g) counters {c}")
            check(c["bytes_down"] >= 3 * size and c["bytes_up"] >= 300_000, f"(g) bytes {c}")
            check(c["errors"] == 1 and c["refused"] == 0, f"(g) one reset connection {c}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # (h) --exit-on-stdin-close; --port-file; no limits at all.
    port_file = os.path.join(
        os.environ.get("TMPDIR", "/tmp"), f"throttle_proxy_selftest_{os.getpid()}.port"
    )
    proc = subprocess.Popen(
        proxy_command(target, 0, 0, "--port-file", port_file, "--exit-on-stdin-close"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = int(proc.stdout.readline().split()[1])
        with open(port_file) as f:
            check(int(f.read()) == port, "(h) --port-file holds the port")
        times = {}
        fetch(port, size, times, 0)
        check(times[0] < 0.5, f"(h) unthrottled {size >> 20} MiB in {times[0]:.3f} s")
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
            check(proc.returncode == 0, f"(h) exits 0 when stdin closes: {proc.returncode}")
        except subprocess.TimeoutExpired:
            check(False, "(h) exits when stdin closes")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if os.path.exists(port_file):
            os.remove(port_file)
    bulk.shutdown()
    if failures:
        print(f"self-test FAILED: {len(failures)} check(s)", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        sys.exit(1)
    print("self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", help="HOST:PORT to forward to")
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (default 127.0.0.1:0, a free port)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="one-way latency, ms")
    ap.add_argument("--mbit", type=float, default=0.0, help="bandwidth each way, Mbit/s (0: unlimited)")
    ap.add_argument("--port-file", help="also write the port here")
    ap.add_argument("--exit-on-stdin-close", action="store_true", help="stop when stdin closes")
    ap.add_argument("--self-test", action="store_true", help="check the link model and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    if not args.target:
        ap.error("--target is required")
    if args.latency_ms < 0 or args.mbit < 0:
        ap.error("--latency-ms and --mbit must be >= 0")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()

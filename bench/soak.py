#!/usr/bin/env python3
"""Soak and memory runs against a release build of toolgate (stdlib only).

    bench/soak.py                       # 1,000 streams for 10 minutes
    bench/soak.py --streams 200 --minutes 1
    bench/soak.py --whole-mb 60 --minutes 0   # only the whole-body peak

A slow upstream (in this process) sends one event every --interval seconds,
--events text events then an allowed tool call, per stream; --streams
clients each open a stream, read it to its end and open the next, until
--minutes have passed. toolgate's resident memory, open file descriptors,
runtime tasks and connections are sampled every few seconds and reported
idle (before any stream), after one burst (one stream per client), at start
(after --warm-minutes of the same load, before the measured load), peak, and
end (--settle seconds after the load stopped). With --whole-mb N, one N MB non-streamed answer (a call
denied in it, so the body is rewritten) is measured first: the growth of
peak RSS over the body's size.

toolgate runs with the allocator settings of the container image
(MIMALLOC_PAGE_FULL_RETAIN=0, MIMALLOC_GENERIC_COLLECT=100) unless the
environment sets them.

Exits 1 when the end is more than 10% above the start (RSS, fds, tasks) or
any stream failed.
"""

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(delta: dict, finish=None) -> bytes:
    c = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "soak",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n"


def whole_answer(mb: int) -> bytes:
    text = "lorem ipsum " * (mb * 1024 * 1024 // 12)
    message = {"role": "assistant", "content": text}
    tool = os.environ.get("SOAK_WHOLE_TOOL", "shell")
    if tool:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": tool, "arguments": "{}"}}]
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "soak",
                       "choices": [{"index": 0, "finish_reason": "tool_calls",
                                    "message": message}]}).encode()


class Upstream:
    def __init__(self, events, interval, whole_mb, tool="lookup"):
        self.events, self.interval, self.tool = events, interval, tool
        self.whole = whole_answer(whole_mb) if whole_mb else b""

    async def serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                body = await reader.readexactly(length)
                if b'"stream":true' in body:
                    await self.stream(writer)
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n" % len(self.whole) + self.whole)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def stream(self, writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        for i in range(self.events):
            writer.write(chunk(event({"content": f"tok{i} "})))
            await writer.drain()
            await asyncio.sleep(self.interval)
        call = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": self.tool, "arguments": "{\"q\":\"x\"}"}}]}
        writer.write(chunk(event(call)) + chunk(event({}, "tool_calls"))
                     + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()


REQUEST = json.dumps({
    "model": "soak", "stream": True,
    "messages": [{"role": "user", "content": "go"}],
    "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
}).encode()


async def read_chunked(reader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return bytes(out)
        out += await reader.readexactly(size + 2)


# As deploy/docker/Dockerfile sets them.
ALLOCATOR = {"MIMALLOC_PAGE_FULL_RETAIN": "0", "MIMALLOC_GENERIC_COLLECT": "100"}


class Stats:
    def __init__(self):
        self.done = self.failed = 0


async def client(port, until, stats, once=False):
    reader = writer = None
    while once or time.monotonic() < until:
        once = False
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: soak\r\n"
                         b"content-type: application/json\r\ncontent-length: %d\r\n\r\n"
                         % len(REQUEST) + REQUEST)
            head = await reader.readuntil(b"\r\n\r\n")
            body = await read_chunked(reader)
            ok = head.startswith(b"HTTP/1.1 200") and b"call_1" in body and b'"error"' not in body
            stats.done += ok
            stats.failed += not ok
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, OSError):
            stats.failed += 1
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.1)
    if writer is not None:
        writer.close()


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def gauge(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return 0


async def metrics(admin_port):
    reader, writer = await asyncio.open_connection("127.0.0.1", admin_port)
    writer.write(b"GET /metrics HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    return data.decode(errors="replace")


async def sample(pid, admin_port):
    m = await metrics(admin_port)
    return {
        "rss_kib": proc_status(pid, "VmRSS"),
        "anon_kib": proc_status(pid, "RssAnon"),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "tasks": gauge(m, "toolgate_runtime_tasks"),
        "connections": gauge(m, "toolgate_open_connections"),
        "streams": gauge(m, "toolgate_open_streams"),
    }


async def whole(port, pid, mb):
    body = json.dumps({"model": "soak", "messages": [{"role": "user", "content": "go"}],
                       "tools": [{"type": "function", "function": {"name": "shell"}}]}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    before = proc_status(pid, "VmHWM")
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n"
                 b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
    got = await reader.read()
    writer.close()
    grown = (proc_status(pid, "VmHWM") - before) * 1024
    size = mb * 1024 * 1024
    print(f"whole {mb} MB answer: {len(got) >> 20} MB back, peak RSS grew {grown >> 20} MB "
          f"({grown / size:.2f}x the body)", flush=True)
    return grown / size


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--interval", type=float, default=0.1)
    p.add_argument("--events", type=int, default=50)
    p.add_argument("--settle", type=float, default=15)
    p.add_argument("--warm-minutes", type=float, default=2,
                   help="the same load before the start sample, so start and end are both steady states")
    p.add_argument("--whole-mb", type=int, default=0)
    p.add_argument("--bin", default=os.path.join(ROOT, "target/release/toolgate"))
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    up = Upstream(a.events, a.interval, a.whole_mb)
    server = await asyncio.start_server(up.serve, "127.0.0.1", 0, backlog=4096)
    up_port = server.sockets[0].getsockname()[1]
    port, admin = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="toolgate-soak-")
    cfg = os.path.join(tmp, "toolgate.toml")
    with open(cfg, "w") as f:
        f.write(f'[listen]\naddr = "127.0.0.1:{port}"\nadmin = "127.0.0.1:{admin}"\n\n'
                f'[upstream]\nbase_url = "http://127.0.0.1:{up_port}/v1"\napi_key_env = "SOAK_KEY"\n\n'
                f'[audit]\npath = "{tmp}/audit.jsonl"\n\n[limits]\nmax_streams = {a.streams + 64}\n'
                f'max_response_bytes = {(a.whole_mb + 8) << 20}\n')
    if a.whole_mb:
        # The default policy, and a rule denying the whole answer's call.
        policies = os.path.join(tmp, "policies")
        os.mkdir(policies)
        with open(os.path.join(policies, "00-default.toml"), "w") as f:
            f.write(open(os.path.join(ROOT, "policies/default.toml")).read())
        with open(os.path.join(policies, "50-deny.toml"), "w") as f:
            f.write('[[rule]]\nname = "no-shell"\ntools = ["shell"]\nverdict = "deny"\n')
        with open(cfg, "a") as f:
            f.write(f'\n[policy]\ndir = "{policies}"\n')
    env = dict(os.environ, SOAK_KEY="sk-soak", RUST_LOG="warn")
    # The allocator settings the container image ships with (unless set here).
    for k, v in ALLOCATOR.items():
        env.setdefault(k, v)
    print("allocator: " + " ".join(f"{k}={env[k]}" for k in ALLOCATOR), flush=True)
    proc = subprocess.Popen([a.bin, "serve", "--config", cfg], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    code = 0
    try:
        for _ in range(100):
            try:
                await metrics(admin)
                break
            except OSError:
                await asyncio.sleep(0.1)
        if a.whole_mb:
            if await whole(port, proc.pid, a.whole_mb) >= 2:
                code = 1
        if a.minutes <= 0:
            return code
        print(f"idle: {await sample(proc.pid, admin)}", flush=True)
        # Warm: one stream per client (the upstream connections they leave
        # are kept, as they are at the end), sampled as a burst; then the
        # same load for --warm-minutes, so the start sample is the steady
        # state the end is compared with.
        stats = Stats()
        await asyncio.gather(*(client(port, 0, stats, once=True) for _ in range(a.streams)))
        await asyncio.sleep(a.settle)
        print(f"after one burst: {await sample(proc.pid, admin)}", flush=True)
        if a.warm_minutes > 0:
            until = time.monotonic() + a.warm_minutes * 60
            await asyncio.gather(*(client(port, until, stats) for _ in range(a.streams)))
            await asyncio.sleep(a.settle)
        if stats.failed:
            code = 1
        start = await sample(proc.pid, admin)
        print(f"start: {start}", flush=True)
        stats = Stats()
        until = time.monotonic() + a.minutes * 60
        load = asyncio.gather(*(client(port, until, stats) for _ in range(a.streams)))
        peak = dict(start)
        while not load.done():
            await asyncio.sleep(5)
            now = await sample(proc.pid, admin)
            peak = {k: max(peak[k], now[k]) for k in peak}
            print(f"t+{time.monotonic() - until + a.minutes * 60:5.0f}s {now} "
                  f"done={stats.done} failed={stats.failed}", flush=True)
        await load
        await asyncio.sleep(a.settle)
        end = await sample(proc.pid, admin)
        print(f"peak: {peak}\nend: {end}\nstreams: {stats.done} done, {stats.failed} failed")
        for k in ("rss_kib", "fds", "tasks"):
            if end[k] > start[k] * 1.1 + 8:
                print(f"LEAK? {k} ended at {end[k]}, started at {start[k]}")
                code = 1
        if stats.failed:
            code = 1
        return code
    finally:
        proc.terminate()
        proc.wait()
        server.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

#!/usr/bin/env python3
"""Many calls waiting for approval at once, against a release build (stdlib only).

    bench/approvals.py                  # 1,000 streamed calls held for a person
    bench/approvals.py --pending 200 --hold 10
    bench/approvals.py --h2 100         # the agents multiplex over h2c, 100 streams a connection

Every client opens a stream whose one tool call the policy answers with
`ask`; once --pending calls wait, toolgate's resident memory is sampled, and
its CPU time is read over --hold seconds of waiting (keep-alive comments
every --keepalive seconds are all it should do). Then every call is approved
through the API and each client must get its call. Reports RSS idle, with
all calls waiting, and after; CPU per second while waiting; how long
approving all of them took.

With --h2 PER_CONN the clients are `examples/slowload` (build it with
`cargo build --release --examples`): the same streams multiplexed over h2c,
so the figure is the waits' cost without one HTTP/1.1 connection each.

Exits 1 when RSS with all calls waiting is 50 MiB or more, or a client did
not get its call.
"""

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402  (the upstream, the client and the samplers)

TOKEN = "bench-approval-token"


async def admin(port, method, path, body=b""):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"%s %s HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n"
                 b"authorization: Bearer %s\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s"
                 % (method.encode(), path.encode(), TOKEN.encode(), len(body), body))
    data = await reader.read()
    writer.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), payload


async def h2_clients(load, stats, n):
    """Waits for slowload and counts its whole streams as done."""
    out, _ = await load.communicate()
    line = out.decode().strip()
    print(f"slowload: {line}", flush=True)
    whole = int(line.split(":")[1].split()[0]) if ":" in line else 0
    stats.done, stats.failed = whole, n - whole


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pending", type=int, default=1000)
    p.add_argument("--hold", type=float, default=20, help="seconds the calls wait while CPU is read")
    p.add_argument("--keepalive", type=float, default=5)
    p.add_argument("--h2", type=int, default=0, metavar="PER_CONN",
                   help="streams per h2c connection, through examples/slowload")
    p.add_argument("--bin", default=os.path.join(soak.ROOT, "target/release/toolgate"))
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    # slowload declares `get_weather`; the Python clients declare `pay`.
    up = soak.Upstream(0, 0, 0, tool="get_weather" if a.h2 else "pay")
    server = await asyncio.start_server(up.serve, "127.0.0.1", 0, backlog=4096)
    up_port = server.sockets[0].getsockname()[1]
    port, admin_port = soak.free_port(), soak.free_port()
    tmp = tempfile.mkdtemp(prefix="toolgate-approvals-")
    policies = os.path.join(tmp, "policies")
    os.mkdir(policies)
    with open(os.path.join(policies, "00-default.toml"), "w") as f:
        f.write(open(os.path.join(soak.ROOT, "policies/default.toml")).read())
    with open(os.path.join(policies, "50-ask.toml"), "w") as f:
        f.write('[[rule]]\nname = "ask-pay"\ntools = ["pay", "get_weather"]\nverdict = "ask"\n')
    cfg = os.path.join(tmp, "toolgate.toml")
    with open(cfg, "w") as f:
        f.write(f'[listen]\naddr = "127.0.0.1:{port}"\nadmin = "127.0.0.1:{admin_port}"\n\n'
                f'[upstream]\nbase_url = "http://127.0.0.1:{up_port}/v1"\napi_key_env = "SOAK_KEY"\n\n'
                f'[audit]\npath = "{tmp}/audit.jsonl"\n\n[limits]\nmax_streams = {a.pending + 64}\n\n'
                f'[policy]\ndir = "{policies}"\n\n'
                f'[approval]\ntimeout_secs = 540\nkeepalive_secs = {a.keepalive}\n'
                f'max_pending = {a.pending + 10}\ntoken_env = "BENCH_APPROVAL_TOKEN"\n')
    env = dict(os.environ, SOAK_KEY="sk-soak", RUST_LOG="warn", BENCH_APPROVAL_TOKEN=TOKEN)
    for k, v in soak.ALLOCATOR.items():
        env.setdefault(k, v)
    proc = subprocess.Popen([a.bin, "serve", "--config", cfg], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    soak.REQUEST = soak.REQUEST.replace(b'"lookup"', b'"pay"')
    code = 0
    try:
        for _ in range(100):
            try:
                await soak.metrics(admin_port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        idle = await soak.sample(proc.pid, admin_port)
        print(f"idle: {idle}", flush=True)
        stats = soak.Stats()
        if a.h2:
            load = await asyncio.create_subprocess_exec(
                os.path.join(soak.ROOT, "target/release/examples/slowload"),
                f"http://127.0.0.1:{port}/v1/chat/completions", str(a.pending), str(a.h2),
                stdout=asyncio.subprocess.PIPE)
            clients = asyncio.ensure_future(h2_clients(load, stats, a.pending))
        else:
            clients = asyncio.gather(*(soak.client(port, 0, stats, once=True)
                                       for _ in range(a.pending)))
        t0 = time.monotonic()
        while True:
            waiting = soak.gauge(await soak.metrics(admin_port), "toolgate_approvals_pending")
            if waiting >= a.pending or clients.done():
                break
            await asyncio.sleep(0.2)
        print(f"{waiting} calls waiting after {time.monotonic() - t0:.1f}s", flush=True)
        ticks, t1 = cpu_ticks(proc.pid), time.monotonic()
        await asyncio.sleep(a.hold)
        hz = os.sysconf("SC_CLK_TCK")
        cpu_ms = (cpu_ticks(proc.pid) - ticks) * 1000 / hz / (time.monotonic() - t1)
        held = await soak.sample(proc.pid, admin_port)
        print(f"waiting: {held}", flush=True)
        print(f"CPU while {waiting} calls wait: {cpu_ms:.1f} ms per second "
              f"(keep-alives every {a.keepalive}s)", flush=True)
        status, body = await admin(admin_port, "GET", "/approvals")
        ids = [q["id"] for q in json.loads(body)["pending"]]
        t2 = time.monotonic()
        answer = json.dumps({"decision": "approve", "by": "bench"}).encode()
        for i in range(0, len(ids), 50):
            await asyncio.gather(*(admin(admin_port, "POST", f"/approvals/{x}", answer)
                                   for x in ids[i:i + 50]))
        await clients
        print(f"approved {len(ids)} in {time.monotonic() - t2:.2f}s; "
              f"{stats.done} calls released, {stats.failed} failed", flush=True)
        await asyncio.sleep(2)
        print(f"after: {await soak.sample(proc.pid, admin_port)}", flush=True)
        mib = held["rss_kib"] / 1024
        print(f"RSS with {waiting} waiting: {mib:.1f} MiB (idle {idle['rss_kib'] / 1024:.1f} MiB)")
        if mib >= 50 or stats.failed or stats.done != a.pending:
            code = 1
        return code
    finally:
        proc.terminate()
        proc.wait()
        server.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

#!/usr/bin/env python3
"""An agent-like chat request: a coding agent's history of N tool calls,
each answered by a tool result of about SIZE bytes of source code (default
20 x 10 KB, 207 KB in all), non-streamed. Every turn of an agent re-sends
its history, so the request side (parse, redaction, fence, texts, the body
written upstream) is most of toolgate's work per turn.

Usage: python3 bench/agent_request.py [N] [SIZE] > body.json
Load it with the shared bench's wrk script, e.g. (toolgate on :18103):
  BENCH_BODY_FILE=$PWD/body.json wrk -t1 -c8 -d5s \\
    -s ../shared/bench/lib/post.lua http://127.0.0.1:18103/v1/chat/completions
"""
import json
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
size = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
line = "    fn handle(&mut self, ev: SseEvent, out: &mut BytesMut) -> Result<(), Error> { // some code here\n"
messages = [
    {"role": "system", "content": "You are a coding agent. Use tools."},
    {"role": "user", "content": "Fix the failing tests in the repo."},
]
for i in range(n):
    call_id = f"call_{i:04d}"
    messages.append({"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/file_{i}.rs"})}}]})
    messages.append({"role": "tool", "tool_call_id": call_id,
                     "content": (line * (size // len(line) + 1))[:size]})
json.dump({
    "model": "mock-model",
    "messages": messages,
    "tools": [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}}],
    "stream": False,
}, sys.stdout)

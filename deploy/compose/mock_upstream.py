"""A mock OpenAI-compatible provider for toolgate's compose dev setup (stdlib only).

POST .../chat/completions answers by the last user message: one mentioning
"email" gets a `comm.email` tool call, anything else a `get_weather` call. It
streams when the request asks to, in small pieces as providers do. GET /health
answers 200.
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def script(messages):
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    if "email" in text.lower():
        return "I'll email Bob the agenda.", "comm.email", {
            "to": "bob@example.com",
            "subject": "Agenda",
            "body": "Day 1: planning.",
        }
    return "Let me check the weather.", "get_weather", {"city": "Lisbon"}


def chunk(delta, finish=None):
    body = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def stream(text, name, args):
    yield chunk({"role": "assistant", "content": ""})
    for word in text.split(" "):
        yield chunk({"content": word + " "})
    raw = json.dumps(args)
    yield chunk({"tool_calls": [{"index": 0, "id": "call_mock", "type": "function",
                                 "function": {"name": name, "arguments": raw[: len(raw) // 2]}}]})
    yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": raw[len(raw) // 2:]}}]})
    yield chunk({}, "tool_calls")
    yield b"data: [DONE]\n\n"


def complete(text, name, args):
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": "mock-model",
        "choices": [{
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": text, "tool_calls": [
                {"id": "call_mock", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}]},
        }],
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status, ctype, body):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._send(200, "text/plain", b"ok")
        else:
            self._send(404, "application/json", b'{"error":{"message":"not found"}}')

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        try:
            req = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(400, "application/json", b'{"error":{"message":"bad JSON"}}')
            return
        if not self.path.endswith("/chat/completions"):
            self._send(404, "application/json", b'{"error":{"message":"not found"}}')
            return
        text, name, args = script(req.get("messages") or [])
        if not req.get("stream"):
            self._send(200, "application/json", json.dumps(complete(text, name, args)).encode())
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for piece in stream(text, name, args):
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, fmt, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9901)
    a = p.parse_args()
    server = ThreadingHTTPServer((a.host, a.port), Handler)
    print(f"mock upstream on {a.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

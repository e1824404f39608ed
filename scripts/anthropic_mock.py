"""A scripted Anthropic Messages provider on loopback, for trying real agents
(Claude Code, the Claude Agent SDK) through toolgate without an API key.

Usage: python3 anthropic_mock.py PORT TOOL INPUT_JSON

Every streamed or plain `POST /v1/messages` is answered like this: when the
conversation holds no tool result yet and the request declares TOOL, the
model says one sentence and calls TOOL with INPUT_JSON, and `Read` of
/etc/hostname beside it; once a tool result came back, it answers with
text. `count_tokens` answers a small count. Each request's
path, tool names and whether its tool results were fenced are logged to
stderr as one JSON line.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL = sys.argv[2] if len(sys.argv) > 2 else "Bash"
INPUT = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {"command": "echo hello", "description": "Say hello"}


def events(message, blocks, stop):
    yield "message_start", {"type": "message_start", "message": dict(message, content=[], stop_reason=None)}
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": dict(b, input={})}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": ""}}
            text = json.dumps(b["input"])
            for k in range(0, len(text), 7):
                yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": text[k:k + 7]}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path.endswith("/count_tokens"):
            return self.json({"input_tokens": 10})
        tools = [t.get("name") for t in body.get("tools", [])]
        results = [
            b for m in body.get("messages", []) if isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_result"
        ]
        fenced = any("UNTRUSTED_EXTERNAL_CONTENT" in json.dumps(r) for r in results)
        print(json.dumps({"path": self.path, "tools": tools, "tool_results": len(results), "fenced": fenced,
                          "key": "x-api-key" in self.headers}), file=sys.stderr, flush=True)
        message = {"id": "msg_mock", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
        if TOOL in tools and not results:
            blocks = [
                {"type": "text", "text": "I will do that."},
                {"type": "tool_use", "id": "toolu_mock_1", "name": TOOL, "input": INPUT},
                {"type": "tool_use", "id": "toolu_mock_read", "name": "Read", "input": {"file_path": "/etc/hostname"}},
            ]
            stop = "tool_use"
        elif results:
            blocks = [{"type": "text", "text": f"Done: saw {len(results)} tool result(s)."}]
            stop = "end_turn"
        else:
            blocks = [{"type": "text", "text": "Mock title"}]
            stop = "end_turn"
        if not body.get("stream"):
            return self.json(dict(message, content=blocks, stop_reason=stop))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in events(message, blocks, stop):
            chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def json(self, v):
        b = json.dumps(v).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()

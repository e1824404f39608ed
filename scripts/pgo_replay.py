"""Recorded provider answers replayed through toolgate, for the profile
scripts/dist.sh trains: a local upstream answers `POST …?fx=NAME` with the
recorded answer NAME (an event stream, or JSON), and each recorded request
goes through toolgate to it, on the path of its protocol.

Usage: pgo_replay.py UPSTREAM_PORT TOOLGATE_PORT FIXTURE_DIR PASSES
"""

import http.client
import http.server
import json
import os
import socketserver
import sys
import threading
import urllib.parse


def serve(port, fixtures):
    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            name = os.path.basename(query.get("fx", [""])[0])
            body = open(os.path.join(fixtures, name), "rb").read()
            kind = "text/event-stream" if name.endswith(".sse") else "application/json"
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", port), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def pairs(fixtures):
    """(path, answer file, request body) for each recorded request with its answer."""
    out = []
    for f in sorted(os.listdir(fixtures)):
        if not f.endswith(".request.json"):
            continue
        stem = f[: -len(".request.json")]
        answer = next(
            (stem + e for e in (".sse", ".json") if os.path.exists(os.path.join(fixtures, stem + e))),
            None,
        )
        if answer is None:
            continue
        req = json.load(open(os.path.join(fixtures, f)))
        if stem.startswith("anthropic-messages"):
            path = "/v1/messages"
        elif "-responses-" in stem:
            path = "/v1/responses"
        else:
            path = "/v1/chat/completions"
        req["stream"] = answer.endswith(".sse")
        out.append((path, answer, json.dumps(req).encode()))
    return out


def main():
    upstream, gate, fixtures, passes = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    serve(upstream, fixtures)
    todo = pairs(fixtures)
    headers = {
        "content-type": "application/json",
        "authorization": "Bearer sk-agent",
        "anthropic-version": "2023-06-01",
    }
    conn = http.client.HTTPConnection("127.0.0.1", gate)
    statuses = {}
    for _ in range(passes):
        for path, answer, body in todo:
            conn.request("POST", f"{path}?fx={answer}", body, headers)
            resp = conn.getresponse()
            resp.read()
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
            if resp.will_close:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", gate)
    print(f"{len(todo)} recorded exchanges x {passes}: statuses {statuses}")
    if not todo or set(statuses) != {200}:
        sys.exit("the recorded exchanges did not all pass through toolgate")


if __name__ == "__main__":
    main()

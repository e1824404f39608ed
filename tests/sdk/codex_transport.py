"""What Codex does against toolgate: the Responses WebSocket transport first,
then HTTP when the upgrade is refused.

Usage: python codex_transport.py BASE_URL REQUEST_JSON

Opens `BASE_URL/responses` as a WebSocket with Codex's headers (a real
WebSocket client, `websockets`) and records how the upgrade was answered
and how long that took; then POSTs REQUEST_JSON to `BASE_URL/responses`
over HTTP, as Codex falls back, and prints the function calls of the
`response.completed` event (`[namespace, name, arguments]`).
"""

import asyncio
import json
import sys
import time

import httpx
import websockets


async def upgrade(url):
    started = time.monotonic()
    headers = {
        "Authorization": "Bearer unused",
        "OpenAI-Beta": "responses_websockets=2026-02-04",
        "originator": "codex_cli_rs",
    }
    try:
        async with websockets.connect(url, additional_headers=headers, open_timeout=10):
            return {"status": 101, "seconds": time.monotonic() - started}
    except websockets.exceptions.InvalidStatus as e:
        return {
            "status": e.response.status_code,
            "seconds": time.monotonic() - started,
            "body": json.loads(e.response.body or b"null"),
        }


def http(base, request):
    calls, completed = [], None
    with httpx.stream("POST", base + "/responses", json=request, headers={"Authorization": "Bearer unused"}, timeout=30) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: "):])
            if event.get("type") == "response.completed":
                completed = event["response"]
    for item in (completed or {}).get("output", []):
        if item.get("type") == "function_call":
            calls.append([item.get("namespace"), item["name"], json.loads(item["arguments"])])
    return {"status": r.status_code, "calls": calls}


def main():
    base, request = sys.argv[1], json.loads(sys.argv[2])
    ws_url = base.replace("http://", "ws://", 1) + "/responses"
    out = {"websocket": asyncio.run(upgrade(ws_url)), "http": http(base, request)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

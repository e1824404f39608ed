"""The official MCP Python SDK client on a server behind toolgate (Streamable HTTP).

Usage: python mcp_check.py URL TOKEN plain|rug|session|more SESSION_ID
       python mcp_check.py stdio COMMAND ARG...

plain: initialize, list the tools, call lookup_contact and delete_contact.
rug: the same, then the server's rug_pull, the list again and lookup_contact again.
more: call export_contacts (never listed: its description is flagged) and
slow (the server takes longer than toolgate waits), and read crm://notes.
session: send one request in the session SESSION_ID (another principal's).

Prints what each step saw as JSON; an exception as `{"raised": ...}`.
"""

import asyncio
import json
import sys
import traceback

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


def result(r):
    return {
        "error": bool(r.isError),
        "text": "".join(getattr(c, "text", "") for c in r.content),
        "structured": r.structuredContent,
    }


async def run(url, token, mode, other):
    headers = {"Authorization": f"Bearer {token}"}
    out = {}
    if mode == "session":
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
        h = dict(headers, **{"mcp-session-id": other, "accept": "application/json, text/event-stream"})
        r = httpx.post(url, json=body, headers=h)
        return {"status": r.status_code}
    notified = []

    async def on_message(message):
        root = getattr(message, "root", None)
        method = getattr(root, "method", None)
        if method:
            notified.append(method)

    async with streamablehttp_client(url, headers=headers) as (read, write, session_id):
        async with ClientSession(read, write, message_handler=on_message) as s:
            await s.initialize()
            out["session"] = session_id()
            out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
            out["lookup"] = result(await s.call_tool("lookup_contact", {"name": "Bob"}))
            out["delete"] = result(await s.call_tool("delete_contact", {"contact_id": "c1"}))
            if mode == "more":
                out["export"] = result(await s.call_tool("export_contacts", {"folder": "x"}))
                out["slow"] = result(await s.call_tool("slow", {}))
                r = await s.read_resource("crm://notes")
                out["notes"] = "".join(getattr(c, "text", "") for c in r.contents)
            if mode == "rug":
                out["rug"] = result(await s.call_tool("rug_pull", {}))
                for _ in range(50):
                    if "notifications/tools/list_changed" in notified:
                        break
                    await asyncio.sleep(0.1)
                out["notified"] = notified
                out["tools_after"] = sorted(t.name for t in (await s.list_tools()).tools)
                out["lookup_after"] = result(await s.call_tool("lookup_contact", {"name": "Bob"}))
    return out


async def stdio(command, args):
    out = {}
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
            out["lookup"] = result(await s.call_tool("lookup_contact", {"name": "Bob"}))
            out["delete"] = result(await s.call_tool("delete_contact", {"contact_id": "c1"}))
    return out


def main():
    if sys.argv[1] == "stdio":
        try:
            out = asyncio.run(stdio(sys.argv[2], sys.argv[3:]))
        except Exception as e:  # the caller reports which
            out = {"raised": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        print(json.dumps(out))
        return
    url, token, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    other = sys.argv[4] if len(sys.argv) > 4 else ""
    try:
        out = asyncio.run(run(url, token, mode, other))
    except Exception as e:  # the caller reports which
        out = {"raised": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

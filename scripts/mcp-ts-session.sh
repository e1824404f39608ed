#!/usr/bin/env bash
# The official MCP TypeScript SDK client on a server behind toolgate, once.
#
# Usage: scripts/mcp-ts-session.sh PATH/TO/node_modules
#   (npm install @modelcontextprotocol/sdk; the Python venv of .ci/test for
#    the FastMCP server; TOOLGATE_BIN to use a built binary)
#
# A FastMCP server (tests/sdk/mcp_server.py) behind toolgate at /mcp/crm; a
# policy denies crm.delete_contact. The TypeScript client lists the tools,
# calls lookup_contact (allowed: its result comes back fenced) and
# delete_contact (denied: an error result with the neutral text); the
# server must have run only lookup_contact.
modules="${1:?path to a node_modules with @modelcontextprotocol/sdk}"
# The shared preamble (repo, work, TOOLGATE_BIN); its mcp_start is not
# used: this script has no model.
source "$(dirname "$0")/lib/mcp-agent.sh"
cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
printf '[[rule]]\nname = "no-deletes"\ntools = ["crm.delete_contact"]\nverdict = "deny"\n' > "$work/policies/50-session.toml"
cat > "$work/toolgate.toml" <<'TOML'
[listen]
addr = "127.0.0.1:18380"
admin = "127.0.0.1:19390"
[policy]
dir = "policies"
[audit]
path = "audit.jsonl"
[[mcp]]
name = "crm"
url = "http://127.0.0.1:18381/mcp"
TOML
"$repo/.venv/bin/python" "$repo/tests/sdk/mcp_server.py" 18381 "$work/ran.jsonl" &
"$TOOLGATE_BIN" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$TOOLGATE_BIN" health --addr 127.0.0.1:19390 2>/dev/null && break; sleep 0.2; done
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18381) 2>/dev/null && break; sleep 0.2; done
ln -s "$(cd "$modules" && pwd)" "$work/node_modules"
cat > "$work/client.mjs" <<'JS'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
const client = new Client({ name: "toolgate-ts-check", version: "1.0.0" });
await client.connect(transport);
const text = (r) => ({ error: !!r.isError, text: r.content.map((c) => c.text ?? "").join("") });
const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const lookup = text(await client.callTool({ name: "lookup_contact", arguments: { name: "Bob" } }));
const del = text(await client.callTool({ name: "delete_contact", arguments: { contact_id: "c1" } }));
console.log(JSON.stringify({ tools, lookup, delete: del }));
await client.close();
JS
node "$work/client.mjs" http://127.0.0.1:18380/mcp/crm > "$work/result.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
r = json.load(open(f"{work}/result.json"))
ran = [json.loads(l)[0] for l in open(f"{work}/ran.jsonl")]
print("client saw:", r["tools"], "| lookup error:", r["lookup"]["error"], "| delete error:", r["delete"]["error"], "| server ran:", ran)
assert "delete_contact" not in r["tools"], r
assert not r["lookup"]["error"] and "UNTRUSTED" in r["lookup"]["text"], r
assert r["delete"]["error"] and "wasn't able" in r["delete"]["text"], r
assert ran == ["lookup_contact"], ran
print("ok")
PY

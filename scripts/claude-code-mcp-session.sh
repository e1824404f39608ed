#!/usr/bin/env bash
# One scripted Claude Code session with an HTTP MCP server behind toolgate,
# on loopback, no API key.
#
# Usage: scripts/claude-code-mcp-session.sh PATH/TO/claude
#   (npm install @anthropic-ai/claude-code; the Python venv of .ci/test for
#    the FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Claude Code reaches the FastMCP server (tests/sdk/mcp_server.py) at
# toolgate's /mcp/crm. The scripted provider asks for
# mcp__crm__delete_contact (contact c1) and mcp__crm__lookup_contact; the
# model's calls are allowed, but the policy denies deleting c1 on the MCP
# route. The session must end normally, the server must have run only the
# lookup, and the audit trail must show the MCP decision joined to the
# model's proposal.
set -euo pipefail
claude="${1:?path to the claude binary}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$repo" && cargo build --release --quiet)
  TOOLGATE_BIN="$repo/target/release/toolgate"
fi
mkdir -p "$work/policies" "$work/project" "$work/home"
cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
cat > "$work/policies/50-session.toml" <<'TOML'
[[rule]]
name = "keep-c1"
tools = ["crm.delete_contact"]
when = "has(args.contact_id) && args.contact_id == 'c1'"
verdict = "deny"
TOML
cat > "$work/toolgate.toml" <<'TOML'
[listen]
addr = "127.0.0.1:18480"
admin = "127.0.0.1:19490"
[upstream.messages]
base_url = "http://127.0.0.1:18482/v1"
api_key_env = "MOCK_ANTHROPIC_KEY"
[policy]
dir = "policies"
[audit]
path = "audit.jsonl"
[[mcp]]
name = "crm"
url = "http://127.0.0.1:18481/mcp"
TOML
cat > "$work/provider.toml" <<'TOML'
[[rule]]
declared = "mcp__crm__delete_contact"
results = false
text = "On it."
[[rule.call]]
name = "mcp__crm__delete_contact"
arguments = { contact_id = "c1" }
[[rule.call]]
name = "mcp__crm__lookup_contact"
arguments = { name = "Bob" }
[[rule]]
results = true
text = "Done."
[[rule]]
text = "Mock title"
TOML
"$repo/.venv/bin/python" "$repo/tests/sdk/mcp_server.py" 18481 "$work/ran.jsonl" &
"$TOOLGATE_BIN" mock --script "$work/provider.toml" --listen 127.0.0.1:18482 > /dev/null 2> "$work/provider.log" &
MOCK_ANTHROPIC_KEY=sk-mock "$TOOLGATE_BIN" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$TOOLGATE_BIN" health --addr 127.0.0.1:19490 2>/dev/null && break; sleep 0.2; done
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18481) 2>/dev/null && break; sleep 0.2; done
mcp='{"mcpServers": {"crm": {"type": "http", "url": "http://127.0.0.1:18480/mcp/crm"}}}'
(cd "$work/project" && IS_SANDBOX=1 HOME="$work/home" \
  ANTHROPIC_BASE_URL=http://127.0.0.1:18480 ANTHROPIC_API_KEY=sk-ant-placeholder \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
  timeout 120 "$claude" -p "Clean up the CRM please" --output-format json \
    --mcp-config "$mcp" --dangerously-skip-permissions --model claude-sonnet-4-5) > "$work/result.json" \
  || { cat "$work/result.json"; tail -20 "$work/toolgate.log"; exit 1; }
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
result = json.load(open(f"{work}/result.json"))
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["protocol"], r["tool"], r["verdict"]) for r in audit if r.get("verdict"))
ran = [json.loads(l)[0] for l in open(f"{work}/ran.jsonl")]
joined = [r for r in audit if r.get("tool") == "crm.delete_contact" and r.get("proposed_in")]
print("claude result:", result["result"], "| turns:", result["num_turns"], "| error:", result["is_error"])
print("audit:", decided, "| server ran:", ran, "| joined:", len(joined))
assert "delete_contact" not in ran, ran
assert ("mcp", "crm.delete_contact", "deny") in decided, decided
assert ("messages", "mcp__crm__delete_contact", "allow") in decided, decided
assert joined, "the MCP decision names the model's proposal"
assert not result["is_error"], result
print("ok")
PY

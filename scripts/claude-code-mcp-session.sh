#!/usr/bin/env bash
# One scripted Claude Code session with an HTTP MCP server behind toolgate,
# on loopback, no API key.
#
# Usage: scripts/claude-code-mcp-session.sh PATH/TO/claude
#   (npm install @anthropic-ai/claude-code; the Python venv of .ci/test for
#    the FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Claude Code reaches the FastMCP server at toolgate's /mcp/crm and names
# its tools to the model mcp__crm__<tool>. The scripted provider asks for
# mcp__crm__delete_contact (contact c1) and mcp__crm__lookup_contact; the
# model's calls are allowed, the MCP route denies the delete
# (scripts/lib/mcp-agent.sh says what is checked), and the session must
# end normally.
claude="${1:?path to the claude binary}"
source "$(dirname "$0")/lib/mcp-agent.sh"
mcp_script mcp__crm__delete_contact mcp__crm__lookup_contact 'results = true'
mcp_start 18480 $'[upstream.messages]\nbase_url = "http://127.0.0.1:18482/v1"\napi_key_env = "MOCK_KEY"'
mcp='{"mcpServers": {"crm": {"type": "http", "url": "http://127.0.0.1:18480/mcp/crm"}}}'
(cd "$work/project" && IS_SANDBOX=1 HOME="$work/home" \
  ANTHROPIC_BASE_URL=http://127.0.0.1:18480 ANTHROPIC_API_KEY=sk-ant-placeholder \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
  timeout 120 "$claude" -p "Clean up the CRM please" --output-format json \
    --mcp-config "$mcp" --dangerously-skip-permissions --model claude-sonnet-4-5) > "$work/result.json" \
  || { cat "$work/result.json"; tail -20 "$work/toolgate.log"; exit 1; }
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("claude result:", r["result"], "| turns:", r["num_turns"], "| error:", r["is_error"])
assert not r["is_error"], r
' "$work/result.json"
mcp_verify messages

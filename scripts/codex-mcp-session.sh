#!/usr/bin/env bash
# One scripted Codex session with an HTTP MCP server behind toolgate, on
# loopback, no API key.
#
# Usage: scripts/codex-mcp-session.sh PATH/TO/codex
#   (npm install @openai/codex; the Python venv of .ci/test for the
#    FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Codex reaches the FastMCP server at toolgate's /mcp/crm
# (`[mcp_servers.crm] url`) and declares its tools to the model as the
# Responses namespace mcp__crm (`ns.tool` in the provider's script is such
# a call). The scripted provider asks for delete_contact (contact c1) and
# lookup_contact in it; the model's calls are allowed, the MCP route denies
# the delete (scripts/lib/mcp-agent.sh says what is checked).
codex="${1:?path to the codex binary}"
source "$(dirname "$0")/lib/mcp-agent.sh"
mkdir -p "$work/home/.codex"
mcp_script mcp__crm.delete_contact mcp__crm.lookup_contact
cat > "$work/home/.codex/config.toml" <<'TOML'
model = "gpt-5-codex"
model_provider = "toolgate"
[model_providers.toolgate]
name = "toolgate"
base_url = "http://127.0.0.1:18680/v1"
wire_api = "responses"
env_key = "TOOLGATE_TOKEN"
[mcp_servers.crm]
url = "http://127.0.0.1:18680/mcp/crm"
TOML
mcp_start 18680 $'[upstream]\nbase_url = "http://127.0.0.1:18682/v1"\napi_key_env = "MOCK_KEY"'
(cd "$work/project" && HOME="$work/home" CODEX_HOME="$work/home/.codex" TOOLGATE_TOKEN=unused OPENAI_API_KEY=unused \
  timeout 120 "$codex" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
    "Clean up the CRM please") > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; exit 1; }
mcp_verify responses

#!/usr/bin/env bash
# One scripted Gemini CLI session with an HTTP MCP server behind toolgate,
# on loopback, no API key.
#
# Usage: scripts/gemini-cli-mcp-session.sh PATH/TO/gemini
#   (npm install @google/gemini-cli; the Python venv of .ci/test for the
#    FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Gemini CLI reaches the FastMCP server at toolgate's /mcp/crm and names
# its tools to the model as mcp_crm_<tool>. The scripted provider (speaking
# Gemini's API) asks for mcp_crm_delete_contact (contact c1) and
# mcp_crm_lookup_contact; the model's calls are allowed, the MCP route
# denies the delete (scripts/lib/mcp-agent.sh says what is checked).
gemini="${1:?path to the gemini binary}"
source "$(dirname "$0")/lib/mcp-agent.sh"
mkdir -p "$work/home/.gemini"
cat > "$work/home/.gemini/settings.json" <<'JSON'
{"security": {"auth": {"selectedType": "gemini-api-key"}},
 "mcpServers": {"crm": {"httpUrl": "http://127.0.0.1:18580/mcp/crm", "trust": true}}}
JSON
mcp_script mcp_crm_delete_contact mcp_crm_lookup_contact
mcp_start 18580 $'[upstream.gemini]\nbase_url = "http://127.0.0.1:18582"\napi_key_env = "MOCK_KEY"'
(cd "$work/project" && HOME="$work/home" GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:18580 \
  GEMINI_API_KEY=unused GEMINI_CLI_NO_RELAUNCH=true GEMINI_CLI_TRUST_WORKSPACE=true \
  timeout 180 "$gemini" --yolo -m gemini-2.5-flash -p "Clean up the CRM please") \
  > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; exit 1; }
mcp_verify gemini

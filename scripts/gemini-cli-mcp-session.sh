#!/usr/bin/env bash
# One scripted Gemini CLI session with an HTTP MCP server behind toolgate,
# on loopback, no API key.
#
# Usage: scripts/gemini-cli-mcp-session.sh PATH/TO/gemini
#   (npm install @google/gemini-cli; the Python venv of .ci/test for the
#    FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Gemini CLI reaches the FastMCP server (tests/sdk/mcp_server.py) at
# toolgate's /mcp/crm and names its tools to the model as
# mcp_crm_<tool>. The scripted provider (speaking Gemini's API) asks for
# mcp_crm_delete_contact (contact c1) and mcp_crm_lookup_contact; the
# model's calls are allowed, but the policy denies deleting c1 on the MCP
# route. The session must end normally, the server must have run only the
# lookup, and `toolgate explain --trail` must show the MCP decision with
# the model's proposal of it.
set -euo pipefail
gemini="${1:?path to the gemini binary}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$repo" && cargo build --release --quiet)
  TOOLGATE_BIN="$repo/target/release/toolgate"
fi
mkdir -p "$work/policies" "$work/project" "$work/home/.gemini"
cat > "$work/home/.gemini/settings.json" <<'JSON'
{"security": {"auth": {"selectedType": "gemini-api-key"}},
 "mcpServers": {"crm": {"httpUrl": "http://127.0.0.1:18580/mcp/crm", "trust": true}}}
JSON
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
addr = "127.0.0.1:18580"
admin = "127.0.0.1:19590"
[upstream.gemini]
base_url = "http://127.0.0.1:18582"
api_key_env = "MOCK_GEMINI_KEY"
[policy]
dir = "policies"
[audit]
path = "audit.jsonl"
[[mcp]]
name = "crm"
url = "http://127.0.0.1:18581/mcp"
TOML
cat > "$work/provider.toml" <<'TOML'
[[rule]]
declared = "mcp_crm_delete_contact"
results = false
text = "On it."
[[rule.call]]
name = "mcp_crm_delete_contact"
arguments = { contact_id = "c1" }
[[rule.call]]
name = "mcp_crm_lookup_contact"
arguments = { name = "Bob" }
[[rule]]
text = "Done."
TOML
"$repo/.venv/bin/python" "$repo/tests/sdk/mcp_server.py" 18581 "$work/ran.jsonl" &
"$TOOLGATE_BIN" mock --script "$work/provider.toml" --listen 127.0.0.1:18582 > /dev/null 2> "$work/provider.log" &
MOCK_GEMINI_KEY=mock-key "$TOOLGATE_BIN" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$TOOLGATE_BIN" health --addr 127.0.0.1:19590 2>/dev/null && break; sleep 0.2; done
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18581) 2>/dev/null && break; sleep 0.2; done
started=$(date +%s)
(cd "$work/project" && HOME="$work/home" GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:18580 \
  GEMINI_API_KEY=unused GEMINI_CLI_NO_RELAUNCH=true GEMINI_CLI_TRUST_WORKSPACE=true \
  timeout 180 "$gemini" --yolo -m gemini-2.5-flash -p "Clean up the CRM please") \
  > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; exit 1; }
took=$(( $(date +%s) - started ))
mcp_request=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("tool") == "crm.delete_contact" and r.get("verdict"):
        print(r["request_id"])
        break
' "$work/audit.jsonl")
"$TOOLGATE_BIN" explain --trail "$work/audit.jsonl" --request-id "$mcp_request" --json > "$work/explained.json"
"$TOOLGATE_BIN" explain --trail "$work/audit.jsonl" --request-id "$mcp_request"
python3 - "$work" "$took" <<'PY'
import json, sys
work, took = sys.argv[1], int(sys.argv[2])
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["protocol"], r["tool"], r["verdict"]) for r in audit if r.get("verdict"))
ran = [json.loads(l)[0] for l in open(f"{work}/ran.jsonl")]
explained = json.load(open(f"{work}/explained.json"))["decisions"][0]
print("audit:", decided, "| server ran:", ran, "| seconds:", took)
assert "delete_contact" not in ran, ran
assert "lookup_contact" in ran, ran
assert ("mcp", "crm.delete_contact", "deny") in decided, decided
assert ("gemini", "mcp_crm_delete_contact", "allow") in decided, decided
assert explained["proposed_by"]["tool"] == "mcp_crm_delete_contact", explained
print("ok")
PY

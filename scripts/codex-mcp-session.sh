#!/usr/bin/env bash
# One scripted Codex session with an HTTP MCP server behind toolgate, on
# loopback, no API key.
#
# Usage: scripts/codex-mcp-session.sh PATH/TO/codex
#   (npm install @openai/codex; the Python venv of .ci/test for the
#    FastMCP server; TOOLGATE_BIN to use a built binary)
#
# Codex reaches the FastMCP server (tests/sdk/mcp_server.py) at toolgate's
# /mcp/crm (`[mcp_servers.crm] url`) and declares its tools in the
# namespace mcp__crm. The scripted provider (Responses) asks for
# delete_contact (contact c1) and lookup_contact in that namespace; the
# model's calls are allowed, but the
# policy denies deleting c1 on the MCP route. The session must end
# normally, the server must have run only the lookup, and `toolgate
# explain --trail` must show the MCP decision with the model's proposal.
set -euo pipefail
codex="${1:?path to the codex binary}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$repo" && cargo build --release --quiet)
  TOOLGATE_BIN="$repo/target/release/toolgate"
fi
mkdir -p "$work/policies" "$work/project" "$work/home/.codex"
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
addr = "127.0.0.1:18680"
admin = "127.0.0.1:19690"
[upstream]
base_url = "http://127.0.0.1:18682/v1"
api_key_env = "MOCK_OPENAI_KEY"
[policy]
dir = "policies"
default_phase = "execution"
[audit]
path = "audit.jsonl"
[[mcp]]
name = "crm"
url = "http://127.0.0.1:18681/mcp"
TOML
# Codex declares a server's tools to the model as the namespace
# `mcp__<server>` (Responses `namespace` tools); `ns.tool` is such a call.
cat > "$work/provider.toml" <<'TOML'
[[rule]]
declared = "mcp__crm.delete_contact"
results = false
text = "On it."
[[rule.call]]
name = "mcp__crm.delete_contact"
arguments = { contact_id = "c1" }
[[rule.call]]
name = "mcp__crm.lookup_contact"
arguments = { name = "Bob" }
[[rule]]
text = "Done."
TOML
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
"$repo/.venv/bin/python" "$repo/tests/sdk/mcp_server.py" 18681 "$work/ran.jsonl" &
"$TOOLGATE_BIN" mock --script "$work/provider.toml" --listen 127.0.0.1:18682 > /dev/null 2> "$work/provider.log" &
MOCK_OPENAI_KEY=sk-mock "$TOOLGATE_BIN" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$TOOLGATE_BIN" health --addr 127.0.0.1:19690 2>/dev/null && break; sleep 0.2; done
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18681) 2>/dev/null && break; sleep 0.2; done
started=$(date +%s)
(cd "$work/project" && HOME="$work/home" CODEX_HOME="$work/home/.codex" TOOLGATE_TOKEN=unused OPENAI_API_KEY=unused \
  timeout 120 "$codex" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
    "Clean up the CRM please") > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; exit 1; }
took=$(( $(date +%s) - started ))
mcp_request=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("tool") == "crm.delete_contact" and r.get("verdict"):
        print(r["request_id"])
        break
' "$work/audit.jsonl")
[ -n "$mcp_request" ] || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; cat "$work/audit.jsonl"; exit 1; }
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
assert any(p == "responses" and t.endswith("delete_contact") and v == "allow" for p, t, v in decided), decided
assert explained["proposed_by"]["tool"].endswith("delete_contact"), explained
print("ok")
PY

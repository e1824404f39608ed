# Sourced by the scripts that run an agent against an MCP server behind
# toolgate (scripts/*-mcp-session.sh). Sets `repo`, `work` (removed on
# exit) and TOOLGATE_BIN.
#
# mcp_script DELETE LOOKUP [LAST]: writes the scripted provider: when the
#   request declares DELETE, the model calls DELETE (contact c1) and LOOKUP
#   (Bob) by the names the agent gives them, then says "Done." (LAST: more
#   lines for that last rule).
# mcp_start PORT UPSTREAM_TOML: the FastMCP server (tests/sdk/mcp_server.py)
#   at PORT+1, the scripted provider ($work/provider.toml, written by
#   mcp_script first) at PORT+2, toolgate at PORT (admin PORT+1010) with
#   UPSTREAM_TOML as its upstream section, the server as [[mcp]] crm, and a
#   policy that denies crm.delete_contact of contact c1.
# mcp_verify PROTOCOL: the server ran the lookup and never the delete; the
#   trail holds the model's delete (on PROTOCOL) allowed and the MCP route's
#   denied; `toolgate explain --trail` shows the MCP decision with the
#   model's proposal of it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$repo" && cargo build --release --quiet)
  TOOLGATE_BIN="$repo/target/release/toolgate"
fi
mkdir -p "$work/policies" "$work/project" "$work/home"

mcp_script() {
  cat > "$work/provider.toml" <<TOML
[[rule]]
declared = "$1"
results = false
text = "On it."
[[rule.call]]
name = "$1"
arguments = { contact_id = "c1" }
[[rule.call]]
name = "$2"
arguments = { name = "Bob" }
[[rule]]
${3:-}
text = "Done."
TOML
}

mcp_start() {
  local port=$1 upstream=$2
  cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
  cat > "$work/policies/50-session.toml" <<'TOML'
[[rule]]
name = "keep-c1"
tools = ["crm.delete_contact"]
when = "has(args.contact_id) && args.contact_id == 'c1'"
verdict = "deny"
TOML
  cat > "$work/toolgate.toml" <<TOML
[listen]
addr = "127.0.0.1:$port"
admin = "127.0.0.1:$((port + 1010))"
$upstream
[policy]
dir = "policies"
default_phase = "execution"
[audit]
path = "audit.jsonl"
[[mcp]]
name = "crm"
url = "http://127.0.0.1:$((port + 1))/mcp"
TOML
  "$repo/.venv/bin/python" "$repo/tests/sdk/mcp_server.py" $((port + 1)) "$work/ran.jsonl" 2> "$work/server.log" &
  "$TOOLGATE_BIN" mock --script "$work/provider.toml" --listen 127.0.0.1:$((port + 2)) > /dev/null 2> "$work/provider.log" &
  MOCK_KEY=mock-key "$TOOLGATE_BIN" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
  for _ in $(seq 50); do "$TOOLGATE_BIN" health --addr 127.0.0.1:$((port + 1010)) 2>/dev/null && break; sleep 0.2; done
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$((port + 1))) 2>/dev/null && break; sleep 0.2; done
}

mcp_verify() {
  local protocol=$1 request
  request=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("tool") == "crm.delete_contact" and r.get("verdict"):
        print(r["request_id"])
        break
' "$work/audit.jsonl")
  [ -n "$request" ] || { tail -20 "$work/toolgate.log"; echo "no MCP decision in the trail" >&2; exit 1; }
  "$TOOLGATE_BIN" explain --trail "$work/audit.jsonl" --request-id "$request"
  "$TOOLGATE_BIN" explain --trail "$work/audit.jsonl" --request-id "$request" --json > "$work/explained.json"
  python3 - "$work" "$protocol" <<'PY'
import json, sys
work, protocol = sys.argv[1], sys.argv[2]
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["protocol"], r["tool"], r["verdict"]) for r in audit if r.get("verdict"))
ran = [json.loads(l)[0] for l in open(f"{work}/ran.jsonl")]
proposed = json.load(open(f"{work}/explained.json"))["decisions"][0]["proposed_by"]
print("audit:", decided, "| server ran:", ran)
assert "delete_contact" not in ran and "lookup_contact" in ran, ran
assert ("mcp", "crm.delete_contact", "deny") in decided, decided
assert any(p == protocol and t.endswith("delete_contact") and v == "allow" for p, t, v in decided), decided
assert proposed and proposed["protocol"] == protocol and proposed["tool"].endswith("delete_contact"), proposed
print("ok")
PY
}

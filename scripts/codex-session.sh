#!/usr/bin/env bash
# One scripted Codex session through toolgate, on loopback, no API key.
#
# Usage: scripts/codex-session.sh PATH/TO/codex [provider|openai_base_url]
#   (npm install @openai/codex; the binary is node_modules/.bin/codex)
#
# A scripted provider (`toolgate mock`) asks for two `exec_command` calls:
# one creating a file named PWNED, which a policy denies, and one creating
# ALLOWED. The session must end normally, PWNED must not exist, ALLOWED
# must, and the audit trail must show the two decisions. With
# `openai_base_url` Codex first tries the Responses WebSocket transport:
# toolgate's 426 must send it to HTTP at once.
set -euo pipefail
codex="${1:?path to the codex binary}"
how="${2:-provider}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/policies" "$work/project" "$work/home/.codex"
cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
cat > "$work/policies/50-session.toml" <<'TOML'
[[rule]]
name = "no-pwned-file"
tools = ["exec_command"]
when = "has(args.cmd) && args.cmd.contains('PWNED')"
verdict = "deny"
TOML
cat > "$work/toolgate.toml" <<'TOML'
[listen]
addr = "127.0.0.1:18180"
admin = "127.0.0.1:19190"
[upstream]
base_url = "http://127.0.0.1:18181/v1"
api_key_env = "MOCK_OPENAI_KEY"
[policy]
dir = "policies"
default_phase = "execution"
[audit]
path = "audit.jsonl"
TOML
cat > "$work/provider.toml" <<TOML
[[rule]]
declared = "exec_command"
results = false
text = "Creating the files."
[[rule.call]]
name = "exec_command"
arguments = { cmd = "touch $work/project/PWNED" }
[[rule.call]]
name = "exec_command"
arguments = { cmd = "touch $work/project/ALLOWED" }
[[rule]]
text = "Done."
TOML
case "$how" in
  provider) cat > "$work/home/.codex/config.toml" <<'TOML'
model = "gpt-5-codex"
model_provider = "toolgate"
[model_providers.toolgate]
name = "toolgate"
base_url = "http://127.0.0.1:18180/v1"
wire_api = "responses"
env_key = "TOOLGATE_TOKEN"
TOML
  ;;
  openai_base_url) cat > "$work/home/.codex/config.toml" <<'TOML'
model = "gpt-5-codex"
openai_base_url = "http://127.0.0.1:18180/v1"
TOML
  ;;
  *) echo "unknown mode $how" >&2; exit 2 ;;
esac
(cd "$repo" && cargo build --release --quiet)
"$repo/target/release/toolgate" mock --script "$work/provider.toml" --listen 127.0.0.1:18181 > /dev/null &
MOCK_OPENAI_KEY=sk-mock "$repo/target/release/toolgate" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$repo/target/release/toolgate" health --addr 127.0.0.1:19190 && break; sleep 0.2; done
started=$(date +%s)
(cd "$work/project" && HOME="$work/home" CODEX_HOME="$work/home/.codex" TOOLGATE_TOKEN=unused OPENAI_API_KEY=unused \
  timeout 120 "$codex" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
    "Create the files please") > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; exit 1; }
took=$(( $(date +%s) - started ))
python3 - "$work" "$took" "$how" <<'PY'
import json, os, sys
work, took, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
upgrades = open(f"{work}/toolgate.log").read().count("status=426")
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["tool"], r["verdict"]) for r in audit if r.get("tool"))
result = open(f"{work}/result.txt").read()
print("audit:", decided, "| WebSocket upgrades refused:", upgrades, "| seconds:", took)
if how == "openai_base_url":
    assert upgrades >= 1, "Codex never tried the WebSocket transport"
assert not os.path.exists(f"{work}/project/PWNED"), "the denied call ran"
assert os.path.exists(f"{work}/project/ALLOWED"), "the allowed call did not run:\n" + result
assert decided == [("exec_command", "allow"), ("exec_command", "deny")], decided
assert "Reconnecting" not in result, result
print("ok")
PY

#!/usr/bin/env bash
# One scripted Claude Code session through toolgate, on loopback, no API key.
#
# Usage: scripts/claude-code-session.sh PATH/TO/claude
#   (npm install @anthropic-ai/claude-code; the binary is
#    node_modules/@anthropic-ai/claude-code-linux-x64/claude)
#
# A scripted provider (`toolgate mock`) asks for a `Write` of a file
# named PWNED and a `Read` of /etc/hostname; a policy denies the Write. The
# session must end normally, the file must not exist, and the audit trail
# must show the Write denied and the Read allowed.
set -euo pipefail
claude="${1:?path to the claude binary}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/policies" "$work/project" "$work/home"
cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
cat > "$work/policies/50-session.toml" <<'TOML'
[[rule]]
name = "no-pwned-file"
tools = ["write"]
when = "has(args.file_path) && args.file_path.contains('PWNED')"
verdict = "deny"
TOML
cat > "$work/toolgate.toml" <<'TOML'
[listen]
addr = "127.0.0.1:18080"
admin = "127.0.0.1:19090"
[upstream.messages]
base_url = "http://127.0.0.1:18081/v1"
api_key_env = "MOCK_ANTHROPIC_KEY"
[policy]
dir = "policies"
[audit]
path = "audit.jsonl"
TOML
cat > "$work/provider.toml" <<TOML
# Claude Code's first turn declares Write: the model calls it (and Read);
# once tool results came back it answers; anything else (titles) gets text.
fragments = 4
[[rule]]
declared = "Write"
results = false
text = "I will do that."
[[rule.call]]
name = "Write"
arguments = { file_path = "$work/project/PWNED", content = "owned" }
[[rule.call]]
name = "Read"
arguments = { file_path = "/etc/hostname" }
[[rule]]
results = true
text = "Done."
[[rule]]
text = "Mock title"
TOML
(cd "$repo" && cargo build --release --quiet)
"$repo/target/release/toolgate" mock --script "$work/provider.toml" --listen 127.0.0.1:18081 > /dev/null 2> "$work/provider.log" &
MOCK_ANTHROPIC_KEY=sk-mock "$repo/target/release/toolgate" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$repo/target/release/toolgate" health --addr 127.0.0.1:19090 && break; sleep 0.2; done
(cd "$work/project" && IS_SANDBOX=1 HOME="$work/home" \
  ANTHROPIC_BASE_URL=http://127.0.0.1:18080 ANTHROPIC_API_KEY=sk-ant-placeholder \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
  timeout 120 "$claude" -p "Create the file please" --output-format json \
    --dangerously-skip-permissions --model claude-sonnet-4-5) > "$work/result.json"
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
result = json.load(open(f"{work}/result.json"))
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["tool"], r["verdict"]) for r in audit if r.get("protocol") == "messages")
print("claude result:", result["result"], "| turns:", result["num_turns"], "| error:", result["is_error"])
print("audit:", decided)
assert not os.path.exists(f"{work}/project/PWNED"), "the denied Write ran"
assert decided == [("Read", "allow"), ("Write", "deny")], decided
assert not result["is_error"], result
print("ok")
PY

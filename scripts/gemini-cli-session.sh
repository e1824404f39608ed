#!/usr/bin/env bash
# One scripted Gemini CLI session through toolgate, on loopback, no API key.
#
# Usage: scripts/gemini-cli-session.sh PATH/TO/gemini
#   (npm install @google/gemini-cli; the binary is node_modules/.bin/gemini)
#
# A scripted provider (`toolgate mock`, speaking Gemini's API) asks for two
# `run_shell_command` calls: one creating a file named PWNED, which a
# policy denies, and one creating ALLOWED. With `--yolo` the CLI runs what
# it receives: the session must end normally, PWNED must not exist, ALLOWED
# must, and the audit trail must show the two decisions.
set -euo pipefail
gemini="${1:?path to the gemini binary}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/policies" "$work/project" "$work/home/.gemini"
# An API key as the auth method (the CLI asks otherwise).
echo '{"security": {"auth": {"selectedType": "gemini-api-key"}}}' > "$work/home/.gemini/settings.json"
cp "$repo/policies/default.toml" "$work/policies/00-default.toml"
cat > "$work/policies/50-session.toml" <<'TOML'
[[rule]]
name = "no-pwned-file"
tools = ["run_shell_command"]
when = "has(args.command) && args.command.contains('PWNED')"
verdict = "deny"
TOML
cat > "$work/toolgate.toml" <<'TOML'
[listen]
addr = "127.0.0.1:18280"
admin = "127.0.0.1:19290"
[upstream.gemini]
base_url = "http://127.0.0.1:18281"
api_key_env = "MOCK_GEMINI_KEY"
[policy]
dir = "policies"
[audit]
path = "audit.jsonl"
TOML
cat > "$work/provider.toml" <<TOML
# The CLI's turn declares run_shell_command: the model calls it twice; once
# results came back it answers; anything else (the CLI's own side requests)
# gets text.
[[rule]]
declared = "run_shell_command"
results = false
text = "Creating the files."
[[rule.call]]
name = "run_shell_command"
arguments = { command = "touch $work/project/PWNED" }
[[rule.call]]
name = "run_shell_command"
arguments = { command = "touch $work/project/ALLOWED" }
[[rule]]
text = "Done."
TOML
(cd "$repo" && cargo build --release --quiet)
"$repo/target/release/toolgate" mock --script "$work/provider.toml" --listen 127.0.0.1:18281 > "$work/mock.log" 2>&1 &
MOCK_GEMINI_KEY=mock-key "$repo/target/release/toolgate" serve --config "$work/toolgate.toml" 2> "$work/toolgate.log" &
for _ in $(seq 50); do "$repo/target/release/toolgate" health --addr 127.0.0.1:19290 && break; sleep 0.2; done
started=$(date +%s)
(cd "$work/project" && HOME="$work/home" GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:18280 \
  GEMINI_API_KEY=unused GEMINI_CLI_NO_RELAUNCH=true GEMINI_CLI_TRUST_WORKSPACE=true \
  timeout 180 "$gemini" --yolo -m gemini-2.5-flash -p "Create the files please") \
  > "$work/result.txt" 2>&1 || { cat "$work/result.txt"; tail -20 "$work/toolgate.log"; exit 1; }
took=$(( $(date +%s) - started ))
python3 - "$work" "$took" <<'PY'
import json, os, sys
work, took = sys.argv[1], int(sys.argv[2])
audit = [json.loads(l) for l in open(f"{work}/audit.jsonl")]
decided = sorted((r["tool"], r["verdict"]) for r in audit if r.get("tool") and r.get("protocol") == "gemini")
result = open(f"{work}/result.txt").read()
print("audit:", decided, "| seconds:", took)
assert not os.path.exists(f"{work}/project/PWNED"), "the denied call ran"
assert os.path.exists(f"{work}/project/ALLOWED"), "the allowed call did not run:\n" + result
assert ("run_shell_command", "deny") in decided and ("run_shell_command", "allow") in decided, decided
print("ok")
PY

#!/usr/bin/env bash
# Records the wire of the python-wire fixture project from `langgraph dev` (the reference server, see
# langgraph-dev-env.sh) with the official Python client, normalised (ids and times replaced), into
# test/agent-server/fixtures/python-wire/recorded.json. python-wire.test.ts compares Wharf with it.
# Re-record when langgraph-dev-requirements.txt changes.
#   scripts/record-python-fixtures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="$("$root/scripts/langgraph-dev-env.sh")"
project="$root/test/agent-server/fixtures/python-wire"
port="${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}"
work="$(mktemp -d)"
cp -r "$project/." "$work/"
log="$work/langgraph-dev.log"
( cd "$work" && exec "$(dirname "$python")/langgraph" dev --no-browser --no-reload --host 127.0.0.1 --port "$port" >"$log" 2>&1 ) &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/ok" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
"$python" "$root/test/agent-server/python-client/wire_flows.py" "http://127.0.0.1:$port" "$project/recorded.json"

#!/usr/bin/env bash
# Runs the LangGraph JS server's own black-box suites (libs/langgraph-api/tests/api.test.mts and
# auth.test.mts of a langchain-ai/langgraphjs checkout) against `wharf dev` serving the suites' own
# graphs, and prints pass/fail counts per suite. Nothing of theirs is copied into this repository:
# the files are copied from the checkout into a scratch folder at run time.
#
#   scripts/upstream-suites.sh /path/to/langgraphjs [api|auth ...]
#
# Environment: UPSTREAM_COLD=1 (no cached graph schemas), UPSTREAM_API_PORT / UPSTREAM_AUTH_PORT (default 2024 / 2025, the ports the suites name;
# the scratch copies are rewritten to others), UPSTREAM_WORK (scratch folder, default /tmp/wharf-upstream-suites; its node_modules
# is kept between runs), UPSTREAM_KEEP_LOGS=1 to print the servers' logs.
set -euo pipefail

checkout=${1:?usage: scripts/upstream-suites.sh LANGGRAPHJS_CHECKOUT [api|auth ...]}
shift
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(api auth)
pkg_src="$checkout/libs/langgraph-api"
[ -f "$pkg_src/tests/api.test.mts" ] || { echo "no libs/langgraph-api/tests/api.test.mts under $checkout" >&2; exit 2; }

wharf_root=$(cd "$(dirname "$0")/.." && pwd)
work=${UPSTREAM_WORK:-/tmp/wharf-upstream-suites}
mkdir -p "$work"
# Derived graph schemas of the previous run survive the fresh copy (see start_server).
for f in graphs graphs-auth; do
  if [ -d "$work/pkg/tests/$f/.wharf/graph-schemas" ]; then rm -rf "$work/schemas-$f"; mv "$work/pkg/tests/$f/.wharf/graph-schemas" "$work/schemas-$f"; fi
done
rm -rf "$work/pkg"
mkdir -p "$work/pkg"
cp -r "$pkg_src/tests" "$pkg_src/src" "$pkg_src/vitest.config.js" "$pkg_src/tsconfig.json" "$work/pkg/"
# The auth suite's project is the same graphs folder with langgraph.auth.json as its config.
cp -r "$work/pkg/tests/graphs" "$work/pkg/tests/graphs-auth"
for f in graphs graphs-auth; do
  if [ -d "$work/schemas-$f" ] && [ "${UPSTREAM_COLD:-}" != 1 ]; then mkdir -p "$work/pkg/tests/$f/.wharf"; mv "$work/schemas-$f" "$work/pkg/tests/$f/.wharf/graph-schemas"; fi
done
cp "$work/pkg/tests/graphs-auth/langgraph.auth.json" "$work/pkg/tests/graphs-auth/langgraph.json"
api_port=${UPSTREAM_API_PORT:-2024}
auth_port=${UPSTREAM_AUTH_PORT:-2025}
sed -i "s/localhost:2024/localhost:$api_port/g" "$work/pkg/tests/api.test.mts"
sed -i "s/localhost:2025/localhost:$auth_port/g" "$work/pkg/tests/auth.test.mts"

# The suites' own dependencies, at the versions Wharf runs graphs with where both use a package.
ver() { node -p "require('$wharf_root/node_modules/$1/package.json').version"; }
cat > "$work/package.json" <<JSON
{ "name": "wharf-upstream-suites", "private": true, "type": "module", "dependencies": {
  "@langchain/langgraph": "$(ver @langchain/langgraph)", "@langchain/core": "$(ver @langchain/core)",
  "@langchain/langgraph-checkpoint": "$(ver @langchain/langgraph-checkpoint)",
  "@langchain/langgraph-sdk": "^1.15.0", "zod": "^4", "hono": "^4.12.34", "dedent": "^1.5.3",
  "dotenv": "^16.4.7", "jose": "^6.0.10", "postgres": "^3.4.5", "vitest": "^4.1.10",
  "wait-port": "^1.1.0", "semver": "^7.7.1" } }
JSON
(cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_server() { # folder port log
  # A fresh store each run; the graphs' TypeScript-derived schemas are kept (keyed by the sources'
  # hash), as across `wharf dev` restarts: deriving them cold takes longer than the suites' 10-30 s
  # timeouts on a loaded machine. UPSTREAM_COLD=1 starts from nothing.
  if [ "${UPSTREAM_COLD:-}" = 1 ]; then rm -rf "$1/.wharf"
  elif [ -d "$1/.wharf" ]; then find "$1/.wharf" -mindepth 1 -maxdepth 1 ! -name graph-schemas -exec rm -rf {} +; fi
  WHARF_HOME="$1/.wharf" node "$wharf_root/bin/wharf.js" dev "$1" --port "$2" >"$3" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$2/ok" >/dev/null && return 0
    sleep 0.5
  done
  echo "wharf dev on port $2 did not answer /ok; its log:" >&2; cat "$3" >&2; exit 1
}

status=0
for suite in "${suites[@]}"; do
  case $suite in
    api) folder="$work/pkg/tests/graphs"; port=$api_port ;;
    auth) folder="$work/pkg/tests/graphs-auth"; port=$auth_port ;;
    *) echo "unknown suite $suite (api|auth)" >&2; exit 2 ;;
  esac
  start_server "$folder" "$port" "$work/$suite-server.log"
  (cd "$work/pkg" && "$work/node_modules/.bin/vitest" run "tests/$suite.test.mts" \
      --reporter=json --outputFile="$work/$suite-result.json" >"$work/$suite-vitest.log" 2>&1) || true
  node -e '
    const r = require(process.argv[1]);
    const all = r.testResults.flatMap((f) => f.assertionResults);
    const by = (s) => all.filter((t) => t.status === s);
    console.log(`${process.argv[2]}: ${by("passed").length}/${all.length - by("skipped").length - by("pending").length} passed, ${by("failed").length} failed`);
    for (const t of by("failed")) console.log(`  FAIL ${t.fullName}`);
  ' "$work/$suite-result.json" "$suite" || status=1
  [ "${UPSTREAM_KEEP_LOGS:-}" = 1 ] && cat "$work/$suite-server.log"
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
done
exit $status

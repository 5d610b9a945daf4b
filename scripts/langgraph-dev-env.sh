#!/usr/bin/env bash
# The test-only reference server: `langgraph dev` (PyPI langgraph-cli[inmem], Elastic-licensed: used
# as a reference, none of its code copied) in a cached virtual environment, with the versions pinned
# in langgraph-dev-requirements.txt. Prints the environment's python.
#   scripts/langgraph-dev-env.sh            (cache: $WHARF_LANGGRAPH_DEV_ENV, default /tmp/wharf-langgraph-dev/venv)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
reqs="$here/langgraph-dev-requirements.txt"
venv="${WHARF_LANGGRAPH_DEV_ENV:-/tmp/wharf-langgraph-dev/venv}"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$reqs" "$stamp"; then
  rm -rf "$venv"
  "${WHARF_PYTHON:-python3}" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs" >&2
  cp "$reqs" "$stamp"
fi
echo "$venv/bin/python"

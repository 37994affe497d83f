#!/usr/bin/env bash
# Schemathesis, the property-based fuzzer from PyPI, against a live Plugin API server, with
# openapi/plugin-api-v1.yaml as the contract and hack/schemathesis.toml as its config.
#
#   hack/schemathesis.sh install   make the venv (~/.cache/loop-plugins/venv) unless it has
#                                  the pinned version already
#   API_URL=http://127.0.0.1:8080/api/plugin/v1 API_TOKEN=<instance token> \
#     hack/schemathesis.sh run [st run flags...]
#                                  install if needed, then run; exits non-zero on any failure
#
# ST_MAX_EXAMPLES (default 50) bounds the examples per operation and phase; the e2e test
# `api::schemathesis_finds_no_failures` starts a server and runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
VENV=${LOOP_PLUGINS_VENV:-$HOME/.cache/loop-plugins/venv}
PYTHON=${PYTHON:-python3}
ST=$VENV/bin/st

installed() {
  [[ -x $ST ]] && [[ "$("$ST" --version 2>/dev/null)" == "st, version $VERSION" ]]
}

install() {
  if installed; then
    return
  fi
  echo "schemathesis: installing schemathesis==$VERSION into $VENV" >&2
  if [[ ! -x $VENV/bin/pip ]]; then
    "$PYTHON" -m venv "$VENV"
  fi
  "$VENV/bin/pip" install --quiet "schemathesis==$VERSION"
  installed || { echo "schemathesis: $ST is not version $VERSION after installing" >&2; exit 1; }
}

run() {
  : "${API_URL:?set API_URL to the Plugin API base, e.g. http://127.0.0.1:8080/api/plugin/v1}"
  : "${API_TOKEN:?set API_TOKEN to an instance token (its Secret key token)}"
  export API_URL API_TOKEN
  install
  exec "$ST" --no-color --config-file hack/schemathesis.toml run openapi/plugin-api-v1.yaml \
    --max-examples "${ST_MAX_EXAMPLES:-50}" "$@"
}

case "${1:-}" in
  install) install ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 install | run [st run flags...]" >&2; exit 2 ;;
esac

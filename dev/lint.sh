#!/usr/bin/env bash
# ruff and mypy on the packages the renovation (issue #33) made clean and typed: core/,
# launch/ and the probe registry first, widened as each package is brought up to them.
# CI runs this (.ci/run); so can you: pip install -e ".[lint]" && bash dev/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Outside the venv too: the README's venv holds ruff and mypy ([lint])
if ! command -v ruff >/dev/null && [ -x .venv/bin/ruff ]; then
    PATH="$PWD/.venv/bin:$PATH"
fi
if ! command -v ruff >/dev/null || ! command -v mypy >/dev/null; then
    echo 'dev/lint.sh: ruff or mypy not found: pip install -e ".[lint]" (in the venv)' >&2
    exit 2
fi
PACKAGES=(envcheck/core envcheck/launch envcheck/probes/spec.py envcheck/probes/suite.py envcheck/probes/catalog.py)
ruff check "${PACKAGES[@]}"
mypy "${PACKAGES[@]}"

#!/usr/bin/env bash
# ruff and mypy on the packages the renovation (issue #33) made clean and typed: core/,
# launch/ and the probe registry first, widened as each package is brought up to them.
# CI runs this (.ci/run); so can you: pip install -e ".[lint]" && bash dev/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(envcheck/core envcheck/launch envcheck/probes/spec.py envcheck/probes/suite.py envcheck/probes/catalog.py)
ruff check "${PACKAGES[@]}"
mypy "${PACKAGES[@]}"

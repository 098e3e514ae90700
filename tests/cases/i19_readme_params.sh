#!/usr/bin/env bash
# issue 19 "README and install": README's table of COLL_* variables is the
# parameter table (src/misc/param.c), so the two cannot drift: fails with the
# difference when a row was added, removed or changed on one side only.
# Usage: i19_readme_params.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
exec bash "$2/tools/readme_params.sh" "$1"

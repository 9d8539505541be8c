#!/usr/bin/env bash
# A CI step for any CI system: vet the pools and post the plan of a pull request.
#
#   FORGE=gitea FORGE_URL=https://gitea.example.com GITEA_TOKEN=... \
#   BASE=origin/main HEAD=$COMMIT PR=42 POOLS_PATH=pools examples/ci/plan.sh
#
# FORGE is github or gitea; the token comes from GITHUB_TOKEN or GITEA_TOKEN and is never printed.
# WORKLOAD names a workload file; without it the snapshot of the status branch is used when the
# repository has one. Exit status: 0 planned, 1 the pools are invalid, 2 an error.
set -euo pipefail

: "${FORGE:?github or gitea}" "${BASE:?base revision}" "${HEAD:?head revision}" "${PR:?pull request number}"
POOLS_PATH=${POOLS_PATH:-pools}
SCHEMA=${KARPOOL_SCHEMA:-}

if [ -n "$SCHEMA" ] && command -v cue >/dev/null; then
	cue vet -c -d '#Resource' "$SCHEMA" "$POOLS_PATH"/*.yaml
fi
karpool vet "$POOLS_PATH"

args=(--base "$BASE" --head "$HEAD" --path "$POOLS_PATH" --post "$FORGE" --pr "$PR" --output text)
if [ -n "${FORGE_URL:-}" ]; then
	args+=(--api-url "$FORGE_URL")
fi
if [ -n "${WORKLOAD:-}" ]; then
	args+=(--workload "$WORKLOAD")
elif git rev-parse --verify --quiet origin/karpool-status >/dev/null; then
	args+=(--status-branch origin/karpool-status)
fi
exec karpool plan "${args[@]}"

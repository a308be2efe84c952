#!/usr/bin/env bash
# The main job on the bundled example trees, in throwaway git repos under a temp
# folder: review (dry run), apply on a branch, inspect, prove, back out. It never
# creates branches in this checkout.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/codemod-demo.XXXXXX")"
export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-codemod demo}" GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-demo@example.invalid}"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-$GIT_AUTHOR_NAME}" GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-$GIT_AUTHOR_EMAIL}"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

for project in flashinfer sglang; do
  cp -R "$here/$project" "$work/$project"
  git -C "$work/$project" init -q -b main
  git -C "$work/$project" add -A
  git -C "$work/$project" commit -q -m "example $project tree"
done

step codemod list
step codemod run sm120-enable --repo "$work/flashinfer" --dry-run
step codemod run sm120-enable --repo "$work/flashinfer"
step codemod run sm120-enable --repo "$work/sglang"
step codemod status --repo "$work/flashinfer"
step codemod verify --repo "$work/flashinfer"
step git -C "$work/flashinfer" log --oneline main..codemod/sm120-enable
step codemod revert sm120-enable --repo "$work/flashinfer"
step codemod revert sm120-enable --repo "$work/sglang"
for project in flashinfer sglang; do
  git -C "$work/$project" diff --quiet main && echo "$project: tree is byte-identical to its base after revert"
done
echo "demo repos left in $work"

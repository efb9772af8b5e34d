#!/usr/bin/env bash
# Installs the pinned third-party ACP agents (package.json and
# package-lock.json beside this script) into DEST, by default
# target/npm-agents, for the tests that drive real agents. Does nothing when
# DEST already holds an install of the same lockfile (DEST/package-lock.stamp).
#
# `npm ci` cannot be used: @qwen-code/qwen-code's optional dependency
# @teddyzhu/clipboard names platform packages the registry does not have, so
# no lockfile is ever "in sync" for it. `npm install` with the committed
# lockfile installs exactly the locked tree and skips the missing optionals.
# Install scripts are skipped: the agents need none in ACP mode, and the ones
# present (node-pty, keytar) would build native code with downloaded headers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-"$here/../../target/npm-agents"}

if [ "$(cat "$dest/package-lock.stamp" 2>/dev/null)" = "$(cat "$here/package-lock.json")" ]; then
    exit 0
fi
rm -rf "$dest"
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
npm install --prefix "$dest" --no-save --ignore-scripts --no-audit --no-fund \
    --no-update-notifier --loglevel=error
cp "$here/package-lock.json" "$dest/package-lock.stamp"

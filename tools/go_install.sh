#!/usr/bin/env bash
# Install a Go tool at a pinned version from the Go module proxy into a bin directory.
# Usage: tools/go_install.sh PACKAGE@VERSION BIN_DIR
#
# Builds land in a cache shared by every clone on the machine
# (${XDG_CACHE_HOME:-~/.cache}/integration-hub/go-tools/NAME-VERSION), so a fresh clone copies
# the binary instead of compiling it again. `go` is the one `make go-path` names.
set -euo pipefail

package=${1:?usage: tools/go_install.sh PACKAGE@VERSION BIN_DIR}
bin_dir=${2:?usage: tools/go_install.sh PACKAGE@VERSION BIN_DIR}
version=${package##*@}
path=${package%@*}
name=${path##*/}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/integration-hub/go-tools/$name-$version

if [ ! -x "$cache/$name" ]; then
  go=$(make -s --no-print-directory -C "$(dirname "$0")/.." go-path)
  echo "==> $name $version from the Go module proxy (first build on this machine; -v lists each package)"
  mkdir -p "$cache.partial"
  GOBIN="$cache.partial" "$go" install -v "$package"
  rm -rf "$cache" && mv "$cache.partial" "$cache"
fi
mkdir -p "$bin_dir"
cp "$cache/$name" "$bin_dir/$name"
echo "==> $name $version in $bin_dir"

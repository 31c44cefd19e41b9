#!/bin/sh
# Configure and build one Meson build directory.
#   scripts/build.sh DIR [MESON_OPTION...]     e.g. scripts/build.sh build-asan -Db_sanitize=address
# An existing directory is reconfigured every time: tests/meson.build picks up test sources by
# fs.exists(), which Meson does not watch, and the options given here must apply to it too.
# Reconfiguring only rebuilds what actually changed.
set -eu

cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/build.sh DIR [MESON_OPTION...]}
shift

if [ -f "$dir/meson-private/coredata.dat" ]; then
	meson setup --reconfigure "$dir" "$@" >"$dir/reconfigure.log" 2>&1 || {
		cat "$dir/reconfigure.log" >&2
		exit 1
	}
else
	meson setup "$dir" "$@"
fi
ninja -C "$dir"

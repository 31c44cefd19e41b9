#!/bin/sh
# Build a sanitizer variant and run the Meson tests (unit, fuzz-corpus replay) and the
# integration tests against it.
#
#   qa/sanitize.sh            ASan+UBSan in build-asan/ (what `make test` runs)
#   qa/sanitize.sh thread     TSan in build-tsan/ (not part of make test: liburcu's custom
#                             synchronisation needs TSan annotations to be report-free)
#   qa/sanitize.sh address -k reload     extra arguments go to pytest
set -eu

cd "$(dirname "$0")/.."

kind=${1:-address}
[ $# -gt 0 ] && shift
case "$kind" in
address)
	dir=${ASAN_BUILD:-build-asan}
	opts="-Db_sanitize=address,undefined -Db_lundef=false -Dbench=false"
	;;
thread)
	dir=${TSAN_BUILD:-build-tsan}
	opts="-Db_sanitize=thread -Db_lundef=false -Dbench=false"
	;;
*)
	echo "usage: $0 [address|thread] [PYTEST_ARGS...]" >&2
	exit 2
	;;
esac

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:print_summary=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:print_summary=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

# shellcheck disable=SC2086
scripts/build.sh "$dir" $opts
status=0
meson test -C "$dir" --print-errorlogs --timeout-multiplier 4 || status=1
STEERD="$PWD/$dir/src/daemon/steerd" STEERCTL="$PWD/$dir/tools/steerctl" \
	/usr/bin/python3 -m pytest tests/integration -q "$@" || status=1
exit $status

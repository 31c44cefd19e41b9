#!/bin/bash
# The whole test suite, as `make test` runs it (dependencies are installed by the Makefile):
#
#   1. normal build (build/) and its Meson tests: unit tests and the fuzz-corpus replay
#   2. clang-format check
#   3. ASan+UBSan build (build-asan/): the same Meson tests, then the integration tests
#      against the sanitized steerd (without the lab scenarios marked `timing`, whose figures
#      only a normal build can meet and whose code paths other tests run sanitized)
#   4. the integration tests (pytest) against the normal build
#
# Every stage runs even when an earlier one failed (except what needs a build that failed), so
# one run shows everything. The last line is "N passed, N failed", counting unit/fuzz tests,
# integration tests and the format check over all stages; the exit status is 1 when anything
# failed.
set -u

cd "$(dirname "$0")/.." || exit 2

BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
PYTHON=${PYTHON:-/usr/bin/python3}
JOBS=${JOBS:-$(nproc)}
LOGDIR=${LOGDIR:-$BUILD/test-logs}

# Sanitizer reports must fail the run, not scroll by: stop at the first error, keep stacks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:print_summary=1}

total_pass=0
total_fail=0
summary=()

# record NAME PASSED FAILED [NOTE]
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	local status="ok"
	[ "$3" -ne 0 ] && status="FAILED"
	summary+=("$(printf '  %-32s %-6s %4d passed, %d failed %s' "$1" "$status" "$2" "$3" "${4:-}")")
}

abspath() {
	case $1 in
	/*) echo "$1" ;;
	*) echo "$PWD/$1" ;;
	esac
}

banner() {
	echo
	echo "=== $* ==="
}

# count REGEX FILE: the number in the last line of FILE that matches "<number> REGEX".
count() {
	grep -E -o "[0-9]+ $1" "$2" | tail -n 1 | grep -E -o '^[0-9]+' || echo 0
}

build_dir() { # NAME DIR [MESON_OPTION...]
	local name=$1
	shift
	banner "build: $name ($1)"
	if scripts/build.sh "$@"; then
		record "build $name" 1 0
		return 0
	fi
	record "build $name" 0 1 "(see the compiler output above)"
	return 1
}

meson_tests() { # NAME DIR [MESON_TEST_OPTION...]
	local name=$1 dir=$2 log
	shift 2
	log="$LOGDIR/meson-$name.log"
	banner "unit and fuzz-replay tests: $name"
	meson test -C "$dir" --print-errorlogs --num-processes "$JOBS" "$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local ok fail
	ok=$(($(grep -E '^Ok:' "$log" | grep -E -o '[0-9]+' || echo 0) +
		$(grep -E '^Expected Fail:' "$log" | grep -E -o '[0-9]+' || echo 0)))
	fail=0
	for what in 'Fail:' 'Unexpected Pass:' 'Timeout:'; do
		fail=$((fail + $(grep -E "^$what" "$log" | grep -E -o '[0-9]+' || echo 0)))
	done
	if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
		fail=1
	fi
	if grep -q 'No tests defined' "$log"; then
		record "meson test $name" "$ok" "$fail" "(no tests defined)"
	else
		record "meson test $name" "$ok" "$fail"
	fi
}

integration_tests() { # NAME STEERD STEERCTL
	local name=$1 log
	log="$LOGDIR/pytest-$name.log"
	banner "integration tests: $name ($2)"
	STEERD=$2 STEERCTL=$3 "$PYTHON" -m pytest tests/integration -q --durations=15 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local ok fail
	ok=$(count passed "$log")
	fail=$(($(count failed "$log") + $(count 'errors?' "$log")))
	if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
		fail=1 # collection error, no tests found, interrupted
	fi
	record "pytest $name" "$ok" "$fail"
}

mkdir -p "$LOGDIR"
start=$(date +%s)

if build_dir normal "$BUILD"; then
	meson_tests normal "$BUILD"
fi

banner "format check"
if qa/format-check.sh; then
	record "clang-format" 1 0
else
	record "clang-format" 0 1
fi

if build_dir asan "$ASAN_BUILD" -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false; then
	# Sanitized code runs a few times slower.
	meson_tests asan "$ASAN_BUILD" --timeout-multiplier 4
	integration_tests asan "$(abspath "$ASAN_BUILD")/src/daemon/steerd" \
		"$(abspath "$ASAN_BUILD")/tools/steerctl"
fi

if [ -x "$BUILD/src/daemon/steerd" ]; then
	integration_tests normal "$(abspath "$BUILD")/src/daemon/steerd" \
		"$(abspath "$BUILD")/tools/steerctl"
fi

banner "summary ($(($(date +%s) - start)) s; logs in $LOGDIR/)"
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed" | tee "$LOGDIR/result"
[ "$total_fail" -eq 0 ]

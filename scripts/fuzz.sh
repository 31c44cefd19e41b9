#!/bin/bash
# Builds the libFuzzer targets (clang, ASan+UBSan, the libraries instrumented for coverage) and
# runs each one over its corpus for a while. Not part of `make test`: the corpus replay
# (suite 'fuzz') is; this is how the corpus grows and how bugs are found.
#
#   scripts/fuzz.sh [TARGET...]      default: every fuzz_* target of the build
#
# Environment:
#   FUZZ_BUILD    build directory, default build-fuzz
#   FUZZ_SECONDS  seconds per target, default 60
#   FUZZ_JOBS     libFuzzer -jobs/-workers per target, default 1 (one core per target)
#   FUZZ_MERGE=1  merge the inputs that found new coverage into tests/fuzz/corpus/<target>/
#                 (-merge=1 keeps only those that add coverage); default: they stay in the
#                 scratch directory, which is printed
#   FUZZ_ARGS     more libFuzzer options, e.g. "-max_len=4096"
# tests/fuzz/<target>.dict, when present, is passed as the target's dictionary.
#
# A crash, leak, timeout or out-of-memory input is copied into tests/fuzz/corpus/<target>/ as
# crash-<sha1> (the replay test then fails until the bug is fixed), and the script exits 1
# listing them. Without any, it exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
merge=${FUZZ_MERGE:-0}
read -r -a extra <<<"${FUZZ_ARGS:-}"

case $seconds$jobs in '' | *[!0-9]*) echo "FUZZ_SECONDS, FUZZ_JOBS: not numbers" >&2; exit 2 ;; esac

# The libraries get -fsanitize=fuzzer-no-link so libFuzzer sees their coverage, not only the
# target file's (see tests/fuzz/meson.build).
opts=(-Dfuzzing=true -Db_lundef=false -Db_sanitize=address,undefined -Dbench=false
	-Dc_args=-fsanitize=fuzzer-no-link -Dbuildtype=debugoptimized)
if [ -f "$build/meson-private/coredata.dat" ]; then
	meson setup --reconfigure "$build" "${opts[@]}" >"$build/reconfigure.log" 2>&1 || {
		cat "$build/reconfigure.log" >&2
		exit 1
	}
else
	CC=clang meson setup "$build" "${opts[@]}"
fi
ninja -C "$build" -j"${NINJA_JOBS:-2}" $(cd "$build" && ninja -t targets all |
	sed -n 's|^\(tests/fuzz/fuzz_[a-z0-9_]*\): .*|\1|p' | sort -u)

if [ $# -gt 0 ]; then
	targets=("$@")
else
	mapfile -t targets < <(cd "$build/tests/fuzz" && ls fuzz_* | grep -v '\.p$' | sed 's/^fuzz_//')
fi
[ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets in $build/tests/fuzz" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/steer-fuzz.XXXXXX")
# Sanitizer reports must make the run fail; leaks count (LeakSanitizer runs at exit and on
# every -detect_leaks input).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

findings=()
summary=()
for t in "${targets[@]}"; do
	bin=$root/$build/tests/fuzz/fuzz_$t
	corpus=$root/tests/fuzz/corpus/$t
	[ -x "$bin" ] || { echo "no fuzz target $t ($bin)" >&2; exit 2; }
	mkdir -p "$corpus" "$scratch/$t/new" "$scratch/$t/artifacts"
	echo "== fuzz_$t: ${seconds}s over $(ls "$corpus" | wc -l) corpus inputs"
	log=$scratch/$t/fuzz.log
	par=()
	[ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
	# a dictionary of the input's tokens, when the target has one
	[ -f "$root/tests/fuzz/$t.dict" ] && par+=(-dict="$root/tests/fuzz/$t.dict")
	set +e
	# New inputs go to the scratch dir first (the first corpus directory is the one written);
	# the repository's corpus is only read. -timeout: one input taking longer is a finding.
	(cd "$scratch/$t" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" \
		"${par[@]}" "${extra[@]}" "$scratch/$t/new" "$corpus") >"$log" 2>&1
	rc=$?
	set -e
	[ "$jobs" -gt 1 ] && cat "$scratch/$t"/fuzz-*.log >>"$log" 2>/dev/null
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{s+=$1} END {print s+0}')
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
	found=0
	for a in "$scratch/$t"/artifacts/*; do
		[ -f "$a" ] || continue
		sum=$(sha1sum "$a" | cut -c1-40)
		cp "$a" "$corpus/crash-$sum"
		findings+=("tests/fuzz/corpus/$t/crash-$sum ($(basename "$a" | sed 's/-.*//'))")
		found=$((found + 1))
	done
	if [ $rc -ne 0 ] && [ $found -eq 0 ]; then
		# A failure libFuzzer wrote no input for (a build or start-up problem).
		findings+=("fuzz_$t exited $rc without an input: see $log")
		tail -20 "$log" >&2
	fi
	new=$(ls "$scratch/$t/new" | wc -l)
	if [ "$merge" = 1 ] && [ "$new" -gt 0 ]; then
		"$bin" -merge=1 -timeout=10 "$corpus" "$scratch/$t/new" >>"$log" 2>&1 ||
			findings+=("fuzz_$t: merge failed, see $log")
	fi
	summary+=("$(printf '%-16s exit %-3s execs %-10s cov %-6s new inputs %-5s findings %s' \
		"$t" "$rc" "$execs" "${cov:-?}" "$new" "$found")")
done

echo
printf '%s\n' "${summary[@]}"
echo "logs and new inputs: $scratch"
if [ ${#findings[@]} -gt 0 ]; then
	echo
	echo "FUZZ FINDINGS (${#findings[@]}):"
	printf '  %s\n' "${findings[@]}"
	echo "Each crash-* input is now replayed by 'meson test --suite fuzz' until it is fixed;"
	echo "reproduce one with: $build/tests/fuzz/fuzz_TARGET FILE"
	exit 1
fi
echo "no findings"

#!/bin/sh
# Check that every C source and header follows .clang-format (clang-format 14, as in Debian 12).
# Checks the files git knows about plus new files not yet added (not ignored ones), and skips
# build directories. Prints each offending file with clang-format's diagnostics and exits 1;
# `qa/format-check.sh --fix` rewrites the files instead.
set -eu

cd "$(dirname "$0")/.."

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
	echo "format-check: $CLANG_FORMAT not found (apt-get install clang-format)" >&2
	exit 2
fi

list_files() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files --cached --others --exclude-standard -- '*.c' '*.h'
	else
		find . -name '*.c' -o -name '*.h' | sed 's|^\./||'
	fi | grep -v -E '^build[^/]*/' | sort -u
}

files=$(list_files)
if [ -z "$files" ]; then
	echo "format-check: no C files found"
	exit 0
fi

if [ "${1:-}" = "--fix" ]; then
	# shellcheck disable=SC2086
	echo "$files" | while read -r f; do [ -f "$f" ] && "$CLANG_FORMAT" -i "$f"; done
	echo "format-check: formatted $(echo "$files" | wc -l) files"
	exit 0
fi

total=0
bad=0
for f in $files; do
	[ -f "$f" ] || continue # deleted in the work tree but still in the index
	total=$((total + 1))
	if ! out=$("$CLANG_FORMAT" --dry-run -Werror "$f" 2>&1); then
		bad=$((bad + 1))
		echo "format-check: $f is not formatted:"
		echo "$out" | head -n 10
	fi
done

if [ "$bad" -ne 0 ]; then
	echo "format-check: $bad of $total files need clang-format -i (or qa/format-check.sh --fix)"
	exit 1
fi
echo "format-check: $total files OK"

#!/usr/bin/env python3
"""The layering test: every `#include "x/..."` in src/ and tools/, and every Steer library a
meson.build links, must be allowed by the dependency matrix in docs/architecture.md.

The matrix is the table of docs/architecture.md whose first column names a folder (`dns/`)
and whose "uses" column lists the folders it may use directly (`base/`); a folder may also use
whatever those use (the closure). One table, so the page quotes exactly what this enforces.
The per-library link checks (qa/meson.build) then make an upward call fail to link.

usage: qa/layering.py [SOURCE_ROOT]    exit 0 when clean, 1 with one line per violation
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = "docs/architecture.md"
ROW = re.compile(r"^\|\s*`([a-z]+)/`\s*\|[^|]*\|([^|]*)\|")
FOLDER = re.compile(r"`([a-z]+)/`")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"')
# meson dependency objects of our libraries are <folder>_dep (src/<folder>/meson.build).
MESON_DEP = re.compile(r"\b([a-z]+)_dep\b")


def read_matrix(root: Path) -> dict[str, set[str]]:
    uses: dict[str, set[str]] = {}
    for line in (root / DOC).read_text().splitlines():
        m = ROW.match(line)
        if m:
            uses[m.group(1)] = set(FOLDER.findall(m.group(2)))
    return uses


def closure(uses: dict[str, set[str]], folder: str) -> set[str]:
    seen: set[str] = set()
    todo = list(uses.get(folder, ()))
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(uses.get(f, ()))
    return seen


def sources(root: Path):
    """(folder, path) for every C file of src/<folder>/ and of tools/ (folder "tools")."""
    for path in sorted((root / "src").glob("*/*.[ch]")):
        yield path.parent.name, path
    for path in sorted((root / "tools").glob("*.[ch]")):
        yield "tools", path


def meson_files(root: Path):
    for path in sorted((root / "src").glob("*/meson.build")):
        yield path.parent.name, path
    if (root / "tools" / "meson.build").exists():
        yield "tools", root / "tools" / "meson.build"


def check(root: Path) -> list[str]:
    uses = read_matrix(root)
    errors: list[str] = []
    if not uses:
        return [f"{DOC}: no dependency matrix found (rows like | `dns/` | ... | `base/` |)"]
    for name, deps in uses.items():
        for dep in deps - set(uses):
            errors.append(f"{DOC}: {name}/ uses {dep}/, which has no row of its own")
    allowed = {name: closure(uses, name) for name in uses}

    def verdict(folder: str, target: str) -> str | None:
        if folder not in uses:
            return f"{folder}/ has no row in the matrix of {DOC}"
        if target == folder or target in allowed[folder]:
            return None
        may = ", ".join(f"{d}/" for d in sorted(allowed[folder])) or "nothing"
        return f"{folder}/ may use {may} ({DOC})"

    for folder, path in sources(root):
        rel = path.relative_to(root)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in uses:
                continue  # system headers, or "foo_int.h"-style local names
            why = verdict(folder, m.group(1))
            if why:
                errors.append(f"{rel}:{n}: includes {m.group(1)}/{m.group(2)}, but {why}")
    for folder, path in meson_files(root):
        rel = path.relative_to(root)
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for dep in MESON_DEP.findall(line.split("#", 1)[0]):
                if dep not in uses or dep == folder:
                    continue  # external (ev_dep, ...) or this folder's own declaration
                why = verdict(folder, dep)
                if why:
                    errors.append(f"{rel}:{n}: links {dep}_dep, but {why}")
    return errors


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"layering: {len(errors)} violation(s)")
        return 1
    print("layering: every include and library dependency follows the matrix")
    return 0


if __name__ == "__main__":
    sys.exit(main())

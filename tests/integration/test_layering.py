"""qa/layering.py on small source trees: it reads the matrix from docs/architecture.md and
flags upward includes, folders missing from the matrix and meson links the matrix forbids.
(The real tree is checked by `meson test --suite layering`.)"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT / "qa" / "layering.py"

DOC = """# Architecture

| folder  | owns | uses | libraries |
|---------|------|------|-----------|
| `base/` | x    | —    | libc |
| `dns/`  | x    | `base/` | |
| `gslb/` | x    | `dns/` | |
"""


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"docs/architecture.md": DOC, **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), str(root)], capture_output=True,
                          text=True, timeout=30)


def test_downward_includes_pass(tmp_path):
    root = tree(tmp_path, {"src/gslb/view.c": '#include "gslb/view.h"\n#include "base/err.h"\n',
                           "src/dns/msg.c": '#include <stdio.h>\n#include "dns/msg.h"\n'})
    res = run(root)
    assert res.returncode == 0, res.stdout


def test_upward_include_fails_with_file_line(tmp_path):
    root = tree(tmp_path, {"src/dns/msg.c": '#include "dns/msg.h"\n#include "gslb/view.h"\n'})
    res = run(root)
    assert res.returncode == 1
    assert "src/dns/msg.c:2: includes gslb/view.h, but dns/ may use base/" in res.stdout, \
        res.stdout


def test_folder_without_a_row_fails(tmp_path):
    root = tree(tmp_path, {"src/fwd/cache.c": '#include "dns/msg.h"\n'})
    res = run(root)
    assert res.returncode == 1 and "fwd/ has no row in the matrix" in res.stdout, res.stdout


def test_meson_link_outside_the_matrix_fails(tmp_path):
    root = tree(tmp_path, {"src/dns/meson.build": "dns_uses = [base_dep, gslb_dep]\n"})
    res = run(root)
    assert res.returncode == 1
    assert "src/dns/meson.build:1: links gslb_dep, but dns/ may use base/" in res.stdout, \
        res.stdout


def test_the_real_tree_is_clean():
    res = run(ROOT)
    assert res.returncode == 0, res.stdout

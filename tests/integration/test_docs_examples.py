"""The Steer configurations in docs/operations.md are valid: every ```yaml steer block is a
complete configuration, written next to the example zone and a GeoIP test database (the
paths the examples use, relative to the file) and run through `steerd --check-config`, the
start-up code path. The migration examples also answer as their comments say (offline
`steerctl explain`)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import ROOT, STEERCTL, run_steerd

DOC = ROOT / "docs" / "operations.md"
BLOCK = re.compile(r"^```yaml steer\n(.*?)^```$", re.S | re.M)
# Sections to add to a configuration: checked with the example zone added.
FRAGMENT = re.compile(r"^```yaml steer-fragment\n(.*?)^```$", re.S | re.M)


def steer_blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def block_id(text: str) -> str:
    names = re.findall(r"^  - name: (\S+)", text, re.M)
    return names[0] if names else "config"


def test_the_guide_has_its_examples():
    # The three migration guides; a block that lost its info string would go unchecked.
    assert len(steer_blocks()) == 3
    fences = DOC.read_text().count("\n```yaml")
    fragments = len(FRAGMENT.findall(DOC.read_text()))
    assert fences == len(steer_blocks()) + fragments + 1, \
        "only the Prometheus scrape job is unchecked"


@pytest.fixture
def example_dir(tmp_path):
    (tmp_path / "zones").mkdir()
    shutil.copy(ROOT / "examples" / "zones" / "example.test.zone", tmp_path / "zones")
    (tmp_path / "geoip").mkdir()
    shutil.copy(ROOT / "tests" / "data" / "gslb" / "mmdb" / "test-city.mmdb",
                tmp_path / "geoip" / "GeoLite2-City.mmdb")
    return tmp_path


@pytest.mark.parametrize("index", range(3))
def test_example_passes_check_config(example_dir, index):
    text = steer_blocks()[index]
    conf = example_dir / "steer.yaml"
    conf.write_text(text)
    res = run_steerd("-c", str(conf), "--check-config", cwd=example_dir)
    assert res.returncode == 0, f"{block_id(text)}:\n{res.stdout}{res.stderr}"
    assert "configuration OK, 1 zone(s), 1 GSLB service(s), 1 map(s)" in res.stdout, res.stdout
    assert "warning" not in res.stderr, res.stderr


def explain(conf, *args: str) -> str:
    # Relative, from the config's folder: explain names the file as it was given.
    res = subprocess.run([STEERCTL, "explain", "--config", conf.name, *args],
                         capture_output=True, text=True, timeout=30, cwd=conf.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def answer_of(text: str, family: str = "A") -> str:
    section = text.split(f"== {family} ==", 1)[1]
    return re.search(r"^answer: (.*)$", section, re.M).group(1)


def write_block(example_dir, index):
    conf = example_dir / "steer.yaml"
    conf.write_text(steer_blocks()[index])
    return conf


def test_bind_views_example_answers_per_view(example_dir):
    conf = write_block(example_dir, 0)
    assert answer_of(explain(conf, "app.example.test", "192.0.2.1", "202.96.134.0/24")) == \
        "192.0.2.10 (datacenter telecom)"
    assert answer_of(explain(conf, "app.example.test", "221.1.2.3")) == \
        "198.51.100.10 (datacenter unicom)"
    assert answer_of(explain(conf, "app.example.test", "192.0.2.1")) == \
        "203.0.113.10 (datacenter other)"
    out = explain(conf, "app.example.test", "192.0.2.1", "202.96.134.0/24")
    assert "decided by: nets steer.yaml:11: inline cidr 202.96.0.0/12" in out, out
    # The text the guide shows is what explain prints.
    shown = DOC.read_text().split("```text\n== A ==\n", 1)[1].split("```", 1)[0]
    assert ("== A ==\n" + shown) in out, out


def test_gdnsd_example_follows_the_map(example_dir):
    conf = write_block(example_dir, 1)
    assert answer_of(explain(conf, "app.example.test", "10.1.2.3")) == \
        "192.0.2.10 (datacenter us-east)"
    # Located by the test database: London (EU) and New York (NA).
    assert answer_of(explain(conf, "app.example.test", "81.2.69.160")) == \
        "198.51.100.10 (datacenter eu-west)"
    assert answer_of(explain(conf, "app.example.test", "192.0.2.1", "4.14.0.0/24")) == \
        "192.0.2.10 (datacenter us-east)"


def test_f5_example_topology_and_pools(example_dir):
    conf = write_block(example_dir, 2)
    out = explain(conf, "app.example.test", "192.0.2.1", "198.51.100.0/24")
    assert "(datacenter west)" in answer_of(out), out
    out = explain(conf, "app.example.test", "192.0.2.1")
    assert "(datacenter east)" in answer_of(out), out


def promql_expressions() -> list[str]:
    """The PromQL of "Reading the metrics": every code span there that uses a steer_ metric."""
    text = DOC.read_text().split("## Reading the metrics", 1)[1].split("\n## ", 1)[0]
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    spans = [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", text, re.S)]
    return [s for s in spans if "steer_" in s and ("(" in s or "==" in s)]


def test_promql_queries_parse(tmp_path):
    """promtool (Debian's prometheus package) parses each query; the metric names are those
    of docs/metrics.md."""
    exprs = promql_expressions()
    assert len(exprs) >= 8, exprs
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    rules = tmp_path / "rules.yml"
    body = "".join(f"      - record: steer:doc_query_{i}\n        expr: '{e}'\n"
                   for i, e in enumerate(exprs))
    rules.write_text("groups:\n  - name: operations-md\n    rules:\n" + body)
    res = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout, res.stdout


def test_promql_metric_names_are_documented():
    """Each metric the queries use is listed in docs/metrics.md (histograms by their base
    name)."""
    metrics_doc = ROOT / "docs" / "metrics.md"
    if not metrics_doc.exists():
        pytest.skip("docs/metrics.md is not in this tree")
    listed = metrics_doc.read_text()
    names = {re.sub(r"_bucket$", "", n) for e in promql_expressions()
             for n in re.findall(r"\bsteer_[a-z_]+", e)}
    missing = sorted(n for n in names if n not in listed)
    assert not missing, missing


def test_fragments_pass_check_config(example_dir):
    """Each fragment (sections an operator adds) is valid next to a zone: the cookie secret
    file it names is written where it says, as the operator would."""
    fragments = FRAGMENT.findall(DOC.read_text())
    assert fragments
    (example_dir / "cookie.secret").write_text("0123456789abcdef0123456789abcdef\n")
    for text in fragments:
        conf = example_dir / "steer.yaml"
        conf.write_text("zones:\n  - domain: example.test\n    file: zones/example.test.zone\n"
                        + text)
        res = run_steerd("-c", str(conf), "--check-config", cwd=example_dir)
        assert res.returncode == 0, f"{text}:\n{res.stdout}{res.stderr}"
        assert "warning" not in res.stderr, res.stderr

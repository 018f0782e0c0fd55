"""--junit and --format markdown: one real run, parsed and checked, then re-rendered.

The JUnit shape is checked against the element/attribute layout of the schema CI tools
share (Jenkins' junit-10.xsd / Ant's junit-4.xsd): testsuites > testsuite > properties?,
testcase*, system-out?, system-err?; testcase > (skipped | error | failure)?,
system-out*, system-err*.
"""

import copy
import json
import os
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import checks_by_id, load_report, run_cli
from envcheck.render import junit as render_junit, markdown as render_markdown
from envcheck.report.model import Report

PROBE = '''
def probe_ci(ctx):
    """checks for the CI renderers"""
    with ctx.check("ok") as c:
        c.detail = "fine | with a pipe and <b>html</b>"
    with ctx.check("skipme") as c:
        c.skip("no GPU: 0 CUDA devices")
    with ctx.check("boom") as c:
        if ctx.rank == 1:
            raise RuntimeError("rank one | broke \\x1b[31mred\\x1b[0m \\x00")
'''

ALLOWED = {
    "testsuites": ({"name", "tests", "failures", "errors", "skipped", "disabled", "time",
                    "timestamp"}, set()),
    "testsuite": ({"name", "tests", "failures", "errors", "skipped", "disabled", "time",
                   "timestamp", "hostname", "id", "package", "file"}, {"name", "tests"}),
    "property": ({"name", "value"}, {"name", "value"}),
    "testcase": ({"name", "classname", "time", "assertions", "status", "file", "line"},
                 {"name", "classname"}),
    "failure": ({"message", "type"}, {"message", "type"}),
    "error": ({"message", "type"}, set()),
    "skipped": ({"message"}, set()),
    "system-out": (set(), set()),
    "system-err": (set(), set()),
    "properties": (set(), set()),
}


def assert_junit_shape(root):
    """Element nesting, attribute names and counts as the common JUnit schema has them."""
    def attrs(el):
        allowed, required = ALLOWED[el.tag]
        assert set(el.attrib) <= allowed, (el.tag, el.attrib)
        assert required <= set(el.attrib), (el.tag, el.attrib)

    assert root.tag == "testsuites"
    attrs(root)
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for suite in suites:
        attrs(suite)
        tags = [c.tag for c in suite]
        order = {"properties": 0, "testcase": 1, "system-out": 2, "system-err": 3}
        assert [order[t] for t in tags] == sorted(order[t] for t in tags), tags
        assert tags.count("properties") <= 1
        cases = suite.findall("testcase")
        for prop in suite.iter("property"):
            attrs(prop)
        failures = skipped = 0
        for case in cases:
            attrs(case)
            float(case.get("time", "0"))
            kids = [k.tag for k in case]
            results = [k for k in kids if k in ("skipped", "error", "failure")]
            assert len(results) <= 1, kids
            assert kids[:len(results)] == results, kids
            assert set(kids[len(results):]) <= {"system-out", "system-err"}, kids
            for k in case:
                attrs(k)
            failures += results == ["failure"]
            skipped += results == ["skipped"]
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == failures
        assert int(suite.get("skipped")) == skipped
        assert int(suite.get("errors")) == 0
        float(suite.get("time"))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    d = tmp_path_factory.mktemp("ci")
    probes = d / "ci_probes.py"
    probes.write_text(PROBE)
    paths = {"json": str(d / "r.json"), "junit": str(d / "r.xml")}
    res = run_cli("run", "-q", "-p", "ci", "--probe-path", str(probes), "--timeout", "30",
                  "--json", paths["json"], "--junit", paths["junit"], "--format", "markdown")
    return res, paths, d


def cases_by_id(root):
    return {"%s.%s" % (c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


@pytest.mark.ranks
def test_run_writes_junit_one_testcase_per_check(ran):
    res, paths, d = ran
    assert res.code == 1, res.stderr  # ci.boom failed on rank 1
    report = load_report(paths["json"])
    root = ET.parse(paths["junit"]).getroot()
    assert_junit_shape(root)
    cases = cases_by_id(root)
    assert list(cases) == [c["id"] for c in report["checks"]]
    assert not [f for f in os.listdir(d) if f.startswith(".envcheck-")]  # atomic, no leftovers

    boom = cases["ci.boom"]
    failure = boom.find("failure")
    assert failure.get("type") == "failed"
    detail = checks_by_id(report)["ci.boom"]["detail"]
    assert failure.get("message") == detail.replace("\x1b", "").replace("\x00", "")
    assert "rank 1 on " in failure.text and "Traceback" in failure.text
    assert "RuntimeError: rank one | broke" in failure.text
    assert "\x1b" not in failure.text and "\x00" not in failure.text

    skipped = cases["ci.skipme"].find("skipped")
    assert skipped.get("message") == "no GPU: 0 CUDA devices"
    assert len(cases["ci.ok"]) <= 1 and cases["ci.ok"].find("failure") is None
    assert cases["setup.import_torch"].find("failure") is None

    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["torch"] == report["environment"]["torch"]
    assert props["world_size"] == "2" and props["backend"] == "gloo"
    assert props["hosts"] == report["ranks"][0]["host"]
    suite = root.find("testsuite")
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"
    assert "+" not in suite.get("timestamp")


@pytest.mark.ranks
def test_run_prints_markdown(ran):
    res, paths, _ = ran
    report = load_report(paths["json"])
    md = res.stdout
    assert md.startswith("## envcheck: ❌ 1 check failed")
    rows = [line for line in md.splitlines() if line.startswith("| ") and "probe" not in line
            and line.count("|") > 4]
    assert len(rows) == len(report["checks"])
    ok = next(r for r in rows if "| ci | ok |" in r)
    # Escaped pipes do not split the cell; tags do not render.
    assert "fine \\| with a pipe and &lt;b&gt;html&lt;/b&gt;" in ok
    assert ok.replace("\\|", "").count("|") == rows[0].replace("\\|", "").count("|")
    assert "### What to do" in md and "**ci.boom**" in md
    assert "rank 1 on %s: failed" % report["ranks"][1]["host"] in md


@pytest.mark.ranks
def test_report_renders_the_saved_run_identically(ran, tmp_path):
    res, paths, _ = ran
    again = str(tmp_path / "again.xml")
    out = run_cli("report", paths["json"], "--junit", again, "--format", "markdown")
    assert out.code == 1
    assert out.stdout == res.stdout
    with open(paths["junit"]) as a, open(again) as b:
        assert a.read() == b.read()


def _report(paths):
    with open(paths["json"]) as f:
        return Report.from_dict(json.load(f))


@pytest.mark.ranks
def test_known_issue_is_skipped_unless_strict(ran, tmp_path):
    _, paths, _ = ran
    data = json.load(open(paths["json"]))
    for c in data["checks"]:
        c["verdict"] = "ok" if c["outcome"] == "passed" else None
        if c["id"] == "ci.boom":
            c["verdict"] = "known"
            c["advice"] = "upgrade torch"
            c["expectation"] = {"source": "https://example.org/issue/1"}
        if c["id"] == "ci.ok":
            c["verdict"] = "fixed"
    saved = tmp_path / "known.json"
    saved.write_text(json.dumps(data))
    xml_path = str(tmp_path / "known.xml")
    out = run_cli("report", str(saved), "--junit", xml_path, "--format", "markdown")
    assert out.code == 0, out.stderr  # a known issue does not fail CI
    root = ET.parse(xml_path).getroot()
    assert_junit_shape(root)
    boom = cases_by_id(root)["ci.boom"]
    assert boom.find("failure") is None
    skipped = boom.find("skipped")
    assert skipped.get("message").startswith("known issue: ")
    assert "upgrade torch" in skipped.text and "https://example.org/issue/1" in skipped.text
    assert "may be stale" in cases_by_id(root)["ci.ok"].find("system-out").text
    assert "## envcheck: ✅" in out.stdout and "1 known issue" in out.stdout
    assert "⚠️ **ci.boom** (known issue)" in out.stdout

    strict = ET.fromstring(render_junit.render(Report.from_dict(data), strict=True)
                           .split("\n", 1)[1])
    failure = cases_by_id(strict)["ci.boom"].find("failure")
    assert failure is not None and "known issue" in failure.get("type")
    assert "## envcheck: ❌" in render_markdown.render(Report.from_dict(data), strict=True)


@pytest.mark.ranks
def test_hang_and_crash_carry_stacks_and_stderr(ran):
    _, paths, _ = ran
    report = _report(paths)
    boom = next(c for c in report.checks if c.id == "ci.boom")
    hang = copy.deepcopy(boom)
    hang.check, hang.outcome, hang.detail = "stuck", "hang", "no progress for 5.0 s"
    hang.error = None
    hang.ranks = {"0": {"outcome": "hang", "detail": "no progress", "stack":
                        'File "probe.py", line 3 in probe_ci'},
                  "1": {"outcome": "hang", "detail": "stopped", "stack": "in barrier"}}
    crash = copy.deepcopy(hang)
    crash.check, crash.outcome, crash.detail = "died", "crash", "rank 1 killed by SIGSEGV"
    crash.ranks = {"0": {"outcome": "crash", "detail": "stopped"},
                   "1": {"outcome": "crash", "detail": "killed", "stderr_tail":
                         "Fatal Python error: Segmentation fault\x07"}}
    report.checks += [hang, crash]
    root = ET.fromstring(render_junit.render(report).split("\n", 1)[1])
    assert_junit_shape(root)
    cases = cases_by_id(root)
    h = cases["ci.stuck"].find("failure")
    assert h.get("type") == "hang" and h.get("message") == "no progress for 5.0 s"
    assert "--- rank 0 Python stacks ---" in h.text and "probe_ci" in h.text
    c = cases["ci.died"].find("failure")
    assert c.get("type") == "crash" and "Segmentation fault" in c.text and "\x07" not in c.text
    md = render_markdown.render(report)
    assert "⏳" in md and "💥" in md and "checks[].ranks[].stack" in md


@pytest.mark.ranks
def test_unwritable_junit_path_fails_before_the_run(tmp_path):
    t0 = time.monotonic()
    res = run_cli("run", "-q", "--junit", str(tmp_path / "missing" / "r.xml"))
    assert res.code == 2
    assert res.stderr.startswith("envcheck: error: cannot write ") and "Traceback" not in \
        res.stderr
    assert time.monotonic() - t0 < 3.0  # no rank was started
    res = run_cli("report", "nope.json", "--junit", str(tmp_path))
    assert res.code == 2 and "is a directory" in res.stderr


def test_unknown_format_is_a_usage_error():
    res = run_cli("report", "nope.json", "--format", "html")
    assert res.code == 2
    assert "choose text, json, markdown" in res.stderr


def test_markdown_cell_escaping():
    assert render_markdown.cell("a|b\nc <x>") == "a\\|b c &lt;x&gt;"
    assert render_markdown.cell(None) == ""


@pytest.mark.ranks
def test_json_answer_and_verdict_counts_say_what_the_exit_code_says(ran, tmp_path):
    res, paths, _ = ran
    report = load_report(paths["json"])
    assert list(json.load(open(paths["json"])))[0] == "answer"  # the first key
    answer = report["answer"]
    assert answer["exit_code"] == res.code == 1
    assert answer["ready"] is False and answer["strict"] is False
    assert answer["text"] == "Not ready for distributed training: 1 FAILURE (backend " \
        "gloo, 2 ranks on %s)" % report["ranks"][0]["host"]
    verdicts = report["summary"]["verdicts"]
    assert verdicts["failure"] == report["summary"]["failed"] == 1
    assert verdicts["none"] == report["summary"]["skipped"]

    # The same run with ci.boom a known issue: a healthy node, whose failed checks are
    # all known pitfalls, reads healthy in the JSON and in markdown, not "1 failed".
    data = json.load(open(paths["json"]))
    for c in data["checks"]:
        if c["id"] == "ci.boom":
            c["verdict"] = "known"
    saved = tmp_path / "known.json"
    saved.write_text(json.dumps(data))
    out_json = tmp_path / "again.json"
    out = run_cli("report", str(saved), "--json", str(out_json), "--format", "markdown")
    assert out.code == 0, out.stderr
    again = load_report(str(out_json))
    assert again["answer"]["exit_code"] == 0 and again["answer"]["ready"] is True
    assert again["answer"]["text"].startswith("Ready for distributed training: backend gloo")
    assert again["summary"]["failed"] == 1 and again["summary"]["verdicts"]["known"] == 1
    assert again["summary"]["verdicts"]["failure"] == 0
    second = out.stdout.splitlines()[2]
    assert " failed" not in second and "1 known issue" in second, second
    assert second.endswith("; nothing unexpected"), second
    strict = run_cli("report", str(saved), "--strict", "--json", str(out_json))
    assert strict.code == 1
    assert load_report(str(out_json))["answer"] == {
        "exit_code": 1, "ready": False, "strict": True,
        "text": again["answer"]["text"].replace("Ready", "Not ready", 1).split(":")[0]
        + ": 1 known issue (failing under --strict) (backend gloo, 2 ranks on %s)"
        % report["ranks"][0]["host"]}


@pytest.mark.ranks
def test_a_version_1_report_still_renders(ran, tmp_path):
    _, paths, _ = ran
    data = json.load(open(paths["json"]))
    data["schema_version"] = 1
    for key in ("answer", "strict"):
        data.pop(key)
    for key in ("verdicts",):
        data["summary"].pop(key)
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(data))
    out_json = tmp_path / "v2.json"
    res = run_cli("report", str(old), "--json", str(out_json))
    assert res.code == 1, res.stderr
    assert load_report(str(out_json))["schema_version"] == 2

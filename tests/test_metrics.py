"""--metrics on run, report, check and summary: node_exporter's textfile format, read back
with the official parser (prometheus_client.parser), names and labels held to
Prometheus' naming conventions, every value compared with the JSON of the same command."""

import datetime
import json
import os
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import run_cli, srun_tasks
from test_scheduler import bad_interface  # noqa: F401 - a fixture, shared


def read(path):
    """{family name: family}, and the file's whole text, through the official parser."""
    text = open(path, encoding="utf-8").read()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def samples(family):
    """{frozenset of label items: value}."""
    return {frozenset(s.labels.items()): s.value for s in family.samples}


def value(families, name, **labels):
    return samples(families[name])[frozenset(labels.items())]


def epoch(created):
    return datetime.datetime.fromisoformat(created).timestamp()


# Prometheus' naming conventions (prometheus.io/docs/practices/naming), as promtool's
# linter (prometheus/util/testutil/promlint) checks them.
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")  # snake_case, no colons (reserved for rules)
LABEL = re.compile(r"^[a-z][a-z0-9_]*$")
NON_BASE_UNITS = ("milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days",
                  "kilobytes", "megabytes", "gigabytes", "bits", "percent", "celsius")
ABBREVIATIONS = ("_ms", "_us", "_sec", "_secs", "_kb", "_mb", "_gb", "_gbs", "_bps", "_pct")


def assert_conventions(families, prefix):
    assert families, "no metric at all"
    for name, f in families.items():
        assert NAME.match(name) and name.startswith(prefix), name
        assert f.documentation, "%s has no help" % name
        assert f.type in ("gauge", "counter"), (name, f.type)
        assert f.type != "gauge" or not name.endswith("_total"), name
        assert not any(u in name.split("_") for u in NON_BASE_UNITS), name
        assert not any(name.endswith(a) or a + "_" in name for a in ABBREVIATIONS), name
        # its own type, as promlint's lintMetricTypeInName
        assert "_%s_" % f.type not in name and not name.endswith("_" + f.type), name
        for s in f.samples:
            assert s.name == name  # gauges: one sample name, the family's
            for label in s.labels:
                assert LABEL.match(label) and not label.startswith("__"), (name, label)
                assert label not in ("le", "quantile", "job", "instance"), (name, label)
        if name.endswith("_info"):
            assert {s.value for s in f.samples} == {1.0}, name


def assert_like_the_json(families, report):
    """What a run's metrics say, against its JSON report."""
    p = "envcheck_run_"
    answer, env = report["answer"], report["environment"]
    assert value(families, p + "ready") == (1.0 if answer["ready"] else 0.0)
    assert value(families, p + "exit_code") == answer["exit_code"]
    assert value(families, p + "timestamp_seconds") == epoch(report["created"])
    assert value(families, p + "duration_seconds") == pytest.approx(report["duration_s"])
    (info,) = families[p + "info"].samples
    assert info.labels == {"envcheck_version": report["envcheck_version"],
                           "torch": env["torch"], "cuda": env["cuda"] or "",
                           "cudnn": env["cudnn"] or "", "nccl": env["nccl"] or "",
                           "driver": env["driver"] or "", "python": env["python"],
                           "backend": report["ranks"][0]["backend"]}
    bad = ("unexpected", "failure", "unsupported")
    assert samples(families[p + "check_ok"]) == {
        frozenset({"check": c["id"], "outcome": c["outcome"],
                   "verdict": c["verdict"] or ""}.items()):
        0.0 if (c["verdict"] in bad if c["verdict"] else
                c["outcome"] in ("failed", "hang", "crash")) else 1.0
        for c in report["checks"]}


def bandwidth_of(report):
    check = next(c for c in report["checks"] if c["id"] == "bandwidth.per_host")
    return check["ranks"]["0"]["data"]


@pytest.mark.ranks
def test_run_metrics_carry_what_the_json_report_says(tmp_path):
    prom, rj = tmp_path / "envcheck.prom", tmp_path / "r.json"
    res = run_cli("run", "-p", "launch", "-p", "bandwidth", "--min-busbw", "0.0001",
                  "--nproc", "2", "--backend", "gloo", "-q", "--json", str(rj),
                  "--metrics", str(prom), env={"ENVCHECK_HOST": "node7"})
    assert res.code == 0, res.stdout + res.stderr
    families, _ = read(prom)
    assert_conventions(families, "envcheck_run_")
    report = json.loads(rj.read_text())
    assert_like_the_json(families, report)
    assert samples(families["envcheck_run_host_ready"]) == {
        frozenset({"host": "node7"}.items()): 1.0}
    data = bandwidth_of(report)
    assert data["unit"] == "rank"  # one host: each rank's figure
    assert samples(families["envcheck_run_bandwidth_bytes_per_second"]) == {
        frozenset({"host": "node7", "rank": str(r), "direction": d}.items()):
        data[d + "_gbs"][r] * 1e9 for r in (0, 1) for d in ("out", "in")}
    assert "envcheck_run_clock_offset_seconds" not in families  # one host: no clock skew
    assert [n for n in os.listdir(tmp_path) if n not in ("envcheck.prom", "r.json")] == []


@pytest.mark.ranks
def test_launcher_run_metrics_have_each_hosts_bandwidth_and_clock(tmp_path):
    out = tmp_path / "out"
    outs, _ = srun_tasks(tmp_path, ["node1", "node2"], ["--out", str(out), "-p", "hosts",
                                                        "-p", "bandwidth", "--timeout", "30"],
                         job_id="37")
    assert sorted(n for n in os.listdir(out) if n.startswith("records-rank")) == [
        "records-rank0.jsonl", "records-rank1.jsonl"], outs
    prom, rj = tmp_path / "launcher.prom", tmp_path / "r.json"
    res = run_cli("report", "--records", str(out), "--json", str(rj), "--metrics", str(prom))
    assert res.code == 0, res.stdout + res.stderr
    families, _ = read(prom)
    assert_conventions(families, "envcheck_run_")
    report = json.loads(rj.read_text())
    assert_like_the_json(families, report)
    data = bandwidth_of(report)
    assert (data["unit"], data["names"]) == ("host", ["node1", "node2"])
    assert samples(families["envcheck_run_bandwidth_bytes_per_second"]) == {
        frozenset({"host": h, "rank": "", "direction": d}.items()):
        data[d + "_gbs"][i] * 1e9 for i, h in enumerate(("node1", "node2"))
        for d in ("out", "in")}
    clock = next(c for c in report["checks"] if c["id"] == "hosts.clock")
    offsets = clock["ranks"]["0"]["data"]
    assert set(offsets["offsets"]) == {"node1", "node2"}
    for name, key in (("envcheck_run_clock_offset_seconds", "offset_s"),
                      ("envcheck_run_clock_offset_bound_seconds", "bound_s")):
        assert samples(families[name]) == {
            frozenset({"host": h, "reference": offsets["reference"]}.items()): o[key]
            for h, o in offsets["offsets"].items()}


@pytest.mark.ranks
def test_a_failed_launcher_run_says_which_host_is_not_ready(bad_interface, tmp_path):  # noqa: F811
    prom, rj = tmp_path / "m.prom", tmp_path / "r.json"
    res = run_cli("report", "--records", str(bad_interface / "out"), "--json", str(rj),
                  "--metrics", str(prom))
    assert res.code == 1, res.stderr
    families, _ = read(prom)
    assert_conventions(families, "envcheck_run_")
    assert_like_the_json(families, json.loads(rj.read_text()))
    assert value(families, "envcheck_run_ready") == 0.0
    assert samples(families["envcheck_run_host_ready"]) == {
        frozenset({"host": "node0"}.items()): 1.0, frozenset({"host": "node1"}.items()): 0.0}
    assert value(families, "envcheck_run_check_ok", check="setup.socket_interface",
                 outcome="failed", verdict="unexpected") == 0.0


def test_check_metrics_carry_the_answer(tmp_path):
    prom, cj = tmp_path / "c.prom", tmp_path / "c.json"
    res = run_cli("check", "torch==2.6.0", "--driver", "470.82.01", "--gpu", "sm_90",
                  "--python-version", "3.11", "--glibc", "2.35", "--json", str(cj),
                  "--metrics", str(prom), env={"ENVCHECK_HOST": "node4"})
    assert res.code == 1, res.stderr
    families, _ = read(prom)
    assert_conventions(families, "envcheck_check_")
    answer = json.loads(cj.read_text())
    assert value(families, "envcheck_check_will_work") == 0.0
    assert value(families, "envcheck_check_exit_code") == answer["exit_code"] == 1
    assert value(families, "envcheck_check_timestamp_seconds") == epoch(answer["created"])
    (info,) = families["envcheck_check_info"].samples
    assert info.labels == {"envcheck_version": answer["envcheck_version"], "host": "node4",
                           "requirement": "torch==2.6.0", "build": "2.6.0+cu124",
                           "torch": "2.6.0", "cuda": "12.4", "driver": "470.82.01",
                           "python": "3.11", "glibc": "2.35", "gpus": "sm_90"}
    assert samples(families["envcheck_check_criterion_ok"]) == {
        frozenset({"criterion": c["id"], "status": c["status"]}.items()):
        0.0 if c["status"] in ("fail", "unknown") else 1.0
        for c in answer["answer"]["criteria"]}
    assert value(families, "envcheck_check_criterion_ok", criterion="driver",
                 status="fail") == 0.0


def test_summary_metrics_count_the_nodes_as_the_json_does(tmp_path):
    from test_summary import _node, write_answers

    write_answers(tmp_path, [_node("node1"), _node("node2"), _node("node3", driver="470.82.01")])
    prom, sj = tmp_path / "s.prom", tmp_path / "s.json.out"
    res = run_cli("summary", str(tmp_path), "--json", str(sj), "--metrics", str(prom))
    assert res.code == 1, res.stderr
    families, _ = read(prom)
    assert_conventions(families, "envcheck_summary_")
    summary = json.loads(sj.read_text())
    assert samples(families["envcheck_summary_nodes"]) == {
        frozenset({"status": s}.items()): float(sum(n["status"] == s
                                                    for n in summary["nodes_detail"]))
        for s in ("works", "fails", "unknown")}
    assert samples(families["envcheck_summary_host_ready"]) == {
        frozenset({"host": "node1"}.items()): 1.0, frozenset({"host": "node2"}.items()): 1.0,
        frozenset({"host": "node3"}.items()): 0.0}
    assert value(families, "envcheck_summary_exit_code") == summary["exit_code"] == 1
    assert value(families, "envcheck_summary_timestamp_seconds") == epoch(summary["created"])


@pytest.mark.ranks
@pytest.mark.parametrize("command", [["run", "-p", "launch"], ["check", "torch==2.6.0"],
                                     ["summary", "."], ["report", "r.json"]])
def test_a_metrics_file_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, command):
    res = run_cli(*command, "--metrics", str(tmp_path / "no" / "m.prom"), cwd=str(tmp_path))
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr == "envcheck: error: cannot write %s: directory %s does not exist\n" % (
        tmp_path / "no" / "m.prom", tmp_path / "no")

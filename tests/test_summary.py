"""`envcheck summary`: per-node answers, written by really running `envcheck check
--json` (and `envcheck run --json`) as each node would, read back as one screen."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

PIN = "torch==2.6.0"  # the default PyPI build is 2.6.0+cu124: driver floor 525.60.13
H100 = ["--gpu", "sm_90"] * 8


def _node(host, driver="535.104.05", gpus=H100, python="3.11", glibc="2.35"):
    return host, ["--driver", driver, *gpus, "--python-version", python, "--glibc", glibc]


# 17 nodes: 13 work (node11 has an older glibc, node12 half the GPUs, node13 a newer
# driver: outliers that still work); 4 do not, for three different reasons.
NODES = [_node("node%02d" % i) for i in range(1, 11)] + [
    _node("node11", glibc="2.31"),
    _node("node12", gpus=H100[:8]),
    _node("node13", driver="550.54.15"),
    _node("node14", driver="470.82.01"),
    _node("node15", driver="470.82.01"),
    _node("node16", python="3.14"),
    _node("node17", driver="570.86.16", gpus=["--gpu", "sm_120"] * 8),
]


def write_answers(directory, nodes, pin=PIN):
    """Run `envcheck check --json` once per node, 4 at a time, as srun would."""
    procs, codes = [], {}
    for host, args in nodes:
        env = dict(os.environ, ENVCHECK_HOST=host)
        procs.append((host, subprocess.Popen(
            [sys.executable, "-m", "envcheck", "check", pin, *args, "--json",
             str(directory / ("%s.json" % host))], env=env, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        if len(procs) >= 4:
            host, p = procs.pop(0)
            codes[host] = (p.wait(timeout=120), p.stderr.read())
    for host, p in procs:
        codes[host] = (p.wait(timeout=120), p.stderr.read())
    return codes


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    d = tmp_path_factory.mktemp("answers")
    codes = write_answers(d, NODES)
    assert {h: c for h, (c, _) in codes.items() if c != 0} == {
        "node14": 1, "node15": 1, "node16": 1, "node17": 1}, codes
    return d


SCREEN = """\
17 nodes: 17 check answers
asked: 2.6.0+cu124
✓ 13 of 17 nodes will work
✗ 2 nodes will not work: driver 470.82.01 < 525.60.13 for cu124; driver
    470.82.01 cannot run sm_90 (Hopper needs R520+): node14, node15
✗ 1 node will not work: no Python 3.14 wheel of torch 2.6.0 (3.9–3.13): node16
✗ 1 node will not work: sm_120 not compiled in 2.6.0+cu124: node17

Differ from the majority:
  driver 470.82.01 on node14, node15 (13 have 535.104.05)
  driver 550.54.15 on node13 (13 have 535.104.05)
  driver 570.86.16 on node17 (13 have 535.104.05)
  GPU sm_120 on node17 (16 have sm_90)
  GPU count 4 on node12 (16 have 8)
  Python 3.14 on node16 (16 have 3.11)
  glibc 2.31 on node11 (16 have 2.35)
"""


def test_summary_of_17_nodes_is_one_screen(answers, tmp_path):
    out = tmp_path / "summary.json"
    res = run_cli("summary", str(answers), "--json", str(out))
    assert (res.code, res.stderr) == (1, "")
    assert res.stdout == SCREEN
    assert max(len(line) for line in res.stdout.splitlines()) <= 80
    data = json.loads(out.read_text())
    assert data["kind"] == "envcheck-summary" and data["schema_version"] == 1
    assert (data["nodes"], data["will_work"], data["exit_code"]) == (17, 13, 1)
    assert data["working_hosts"] == ["node%02d" % i for i in range(1, 14)]
    assert data["groups"] == [
        {"status": "fails", "reasons": ["driver 470.82.01 < 525.60.13 for cu124",
                                        "driver 470.82.01 cannot run sm_90 (Hopper needs "
                                        "R520+)"],
         "hosts": ["node14", "node15"]},
        {"status": "fails", "reasons": ["no Python 3.14 wheel of torch 2.6.0 (3.9–3.13)"],
         "hosts": ["node16"]},
        {"status": "fails", "reasons": ["sm_120 not compiled in 2.6.0+cu124"],
         "hosts": ["node17"]}]
    assert data["outliers"][3] == {"fact": "gpu_model", "value": "sm_120",
                                   "hosts": ["node17"], "majority": "sm_90",
                                   "majority_count": 16}
    assert data["outliers"][4] == {"fact": "gpu_count", "value": 4, "hosts": ["node12"],
                                   "majority": 8, "majority_count": 16}
    assert data["problems"] == []
    printed = run_cli("summary", str(answers), "--format", "json")
    assert json.loads(printed.stdout)["groups"] == data["groups"]


def test_healthy_cluster_exits_0(answers):
    files = [str(answers / ("node%02d.json" % i)) for i in range(1, 11)]
    res = run_cli("summary", *files)
    assert (res.code, res.stdout) == (0, "10 nodes: 10 check answers\nasked: 2.6.0+cu124\n"
                                         "✓ 10 of 10 nodes will work\n")


@pytest.mark.ranks
def test_run_reports_and_bad_inputs_mix_in(answers, tmp_path):
    # a real `envcheck run` on "node18", gathered with the check answers
    run_json = tmp_path / "node18-run.json"
    res = run_cli("run", "-p", "launch", "--backend", "gloo", "--nproc", "1", "-q",
                  "--json", str(run_json), env={"ENVCHECK_HOST": "node18"})
    assert res.code == 0, res.stdout + res.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "truncated.json").write_text('{"kind": "envcheck-check", "sche')
    (bad / "other.json").write_text('{"hello": 1}')
    old = json.loads((answers / "node01.json").read_text())
    del old["host"]
    (bad / "old.json").write_text(json.dumps(old))
    res = run_cli("summary", str(answers / "node01.json"), str(answers / "node14.json"),
                  run_json.name, "bad", "missing", cwd=str(tmp_path))
    assert res.code == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:5] == ["3 nodes: 2 check answers and 1 run report",
                         "✓ 2 of 3 nodes will work",
                         "✗ 1 node will not work: driver 470.82.01 < 525.60.13 for cu124; "
                         "driver 470.82.01",
                         "    cannot run sm_90 (Hopper needs R520+): node14", ""]
    assert lines[lines.index("Could not use:") + 1:] == [
        "  missing: no such file or directory",
        "  bad/old.json: a check answer without a host name (written by an older",
        "      envcheck?): run envcheck check --json again",
        "  bad/other.json: not an envcheck check answer or run report",
        "  bad/truncated.json: not JSON (Unterminated string starting at: line 1 column",
        "      28 (char 27))"]
    # node18's check answer and its run report are one node, working only if both do
    write_answers(tmp_path, [_node("node18", driver="470.82.01")])
    res = run_cli("summary", str(tmp_path / "node18.json"), str(run_json))
    assert res.code == 1, res.stdout
    assert res.stdout.splitlines()[:5] == [
        "1 node: 1 check answer and 1 run report",
        "asked: 2.6.0+cu124 + run: torch %s" % json.loads(run_json.read_text())[
            "environment"]["torch"],
        "✓ 0 of 1 node will work",
        "✗ 1 node will not work: driver 470.82.01 < 525.60.13 for cu124; driver 470.82.01",
        "    cannot run sm_90 (Hopper needs R520+): node18"]
    # the run report's node is one of the three, with its facts
    res = run_cli("summary", str(answers / "node01.json"), str(run_json), "--format", "json")
    node18 = [n for n in json.loads(res.stdout)["nodes_detail"] if n["host"] == "node18"][0]
    assert (node18["kind"], node18["status"], node18["facts"]["gpu_count"]) == ("run", "works", 0)
    # nothing but bad inputs: nothing to summarise, exit 2, no summary file
    out = tmp_path / "s.json"
    res = run_cli("summary", str(bad), "--json", str(out))
    assert res.code == 2 and not out.exists()
    assert res.stdout.startswith("0 nodes: no answer could be read\n")


def test_summary_usage_errors(tmp_path):
    res = run_cli("summary")
    assert res.code == 2 and "Missing argument 'DIR|FILE...'" in res.stderr
    res = run_cli("summary", str(tmp_path), "--json", str(tmp_path))
    assert (res.code, res.stderr) == (
        2, "envcheck: error: %s is a directory; give a file name\n" % tmp_path)


def test_a_very_mixed_cluster_still_fits_one_screen(tmp_path):
    # 12 nodes, each on another driver below cu124's floor: 12 reasons, no majority
    drivers = ["450.80.02", "455.23.05", "460.32.03", "460.73.01", "465.19.01",
               "470.82.01", "470.256.02", "495.29.05", "510.47.03", "515.65.01",
               "520.61.05", "525.60.12"]
    nodes = [_node("gpu%02d" % i, driver=d, gpus=["--gpu", "sm_80"])
             for i, d in enumerate(drivers, 1)]
    codes = write_answers(tmp_path, nodes)
    assert {c for c, _ in codes.values()} == {1}
    res = run_cli("summary", str(tmp_path))
    assert res.code == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 16, res.stdout
    assert lines[2] == "✓ 0 of 12 nodes will work"
    # the biggest groups first (all of one node here: then by host), 8 of them
    assert lines[3] == "✗ 1 node will not work: driver 450.80.02 < 525.60.13 for cu124: gpu01"
    assert lines[10] == "✗ 1 node will not work: driver 495.29.05 < 525.60.13 for cu124: gpu08"
    assert lines[11:16] == [
        "… 4 nodes more will not work or cannot be judged, for 4 other reasons:",
        "    gpu[09-12] (-v or --format json lists them)",
        "",
        "Differ from the majority:",
        "  driver: no majority, 12 values on 12 nodes"]
    # -v: every group, none counted away
    verbose = run_cli("summary", str(tmp_path), "-v")
    assert verbose.code == 1
    shown = verbose.stdout.splitlines()
    assert shown[:11] == lines[:11] and "…" not in verbose.stdout
    assert shown[11:15] == [
        "✗ 1 node will not work: driver 510.47.03 < 525.60.13 for cu124: gpu09",
        "✗ 1 node will not work: driver 515.65.01 < 525.60.13 for cu124: gpu10",
        "✗ 1 node will not work: driver 520.61.05 < 525.60.13 for cu124: gpu11",
        "✗ 1 node will not work: driver 525.60.12 < 525.60.13 for cu124: gpu12"]


def test_nodes_are_grouped_by_the_build_pip_gives_them(tmp_path):
    # one range for the whole cluster: pip gives the glibc 2.17 nodes an older release
    nodes = [_node("node%02d" % i, driver="580.95.05") for i in range(1, 4)] + [
        _node("node%02d" % i, driver="580.95.05", glibc="2.17") for i in (4, 5)]
    codes = write_answers(tmp_path, nodes, pin="torch>=2.4")
    assert {c for c, _ in codes.values()} == {0}, codes
    res = run_cli("summary", str(tmp_path))
    assert res.code == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[:5] == [
        "5 nodes: 5 check answers",
        "asked: torch>=2.4; pip gives:",
        "  3 nodes get 2.15.0+cu132",
        "  2 nodes get 2.6.0+cu124 (newer: glibc 2.17 < 2.28): node04, node05",
        "✓ 5 of 5 nodes will work"]
    assert "answer for" not in res.stdout  # said once, above, with why
    data = json.loads(run_cli("summary", str(tmp_path), "--format", "json").stdout)
    assert data["builds"] == [
        {"build": "2.15.0+cu132", "hosts": ["node01", "node02", "node03"], "held_back": None},
        {"build": "2.6.0+cu124", "hosts": ["node04", "node05"],
         "held_back": "glibc 2.17 < 2.28"}]


def test_a_host_that_answered_twice_is_used_once_with_a_note_not_a_problem(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write_answers(first, [_node("node01")])
    write_answers(second, [_node("node01")])
    res = run_cli("summary", str(tmp_path))
    assert res.code == 0, res.stdout  # it works, and nothing was left out
    assert "Could not use" not in res.stdout
    tail = " ".join(res.stdout.split("\nUsed, with a note:\n")[1].split())
    # the newer answer is used (created, then path: b's, written second)
    assert tail == "%s: node01 has 2 check answers (%s): using this one, the newest" % (
        second / "node01.json", first / "node01.json"), res.stdout
    data = json.loads(run_cli("summary", str(tmp_path), "--format", "json").stdout)
    assert data["problems"] == [] and len(data["notes"]) == 1


def test_a_gpu_planned_by_capability_and_one_named_by_nvidia_smi_are_one_gpu(tmp_path):
    """node1 planned with --gpu sm_90, node2 with the name nvidia-smi prints for the
    same H100: one GPU model, not two; a node with another capability still differs."""
    nodes = [_node("node1"), _node("node2", gpus=["--gpu", "NVIDIA H100 80GB HBM3"] * 8),
             _node("node3", gpus=["--gpu", "NVIDIA H100 80GB HBM3"] * 8),
             _node("node4", driver="550.54.15", gpus=["--gpu", "sm_80"] * 8)]
    codes = write_answers(tmp_path, nodes)
    assert {c for c, _ in codes.values()} == {0}, codes
    res = run_cli("summary", str(tmp_path))
    assert res.code == 0, res.stderr
    differ = res.stdout.split("Differ from the majority:\n")[1].splitlines()
    assert [line for line in differ if line.startswith("  GPU ")] == [
        "  GPU sm_80 on node4 (3 have sm_90)"], res.stdout

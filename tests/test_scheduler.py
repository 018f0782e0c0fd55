"""The answer handed to SLURM: hostlists (checked against the real `scontrol show
hostlist` / `hostnames`), a drain line per failed host, the ready hosts; from `envcheck
summary` and from a launcher-mode run whose one host has a wrong interface."""

import json
import os
import random
import shlex
import shutil
import subprocess

import pytest

from conftest import run_cli, srun_tasks
from envcheck.summary import hostlist
from test_summary import _node, write_answers

# name order as given -> what `scontrol show hostlist` (slurm-wlm 22.05) writes
SLURM_FORMS = [
    (["node1", "node2", "node3", "node7"], "node[1-3,7]"),
    (["node01", "node02", "node10"], "node[01-02,10]"),
    (["n9", "n10", "n11"], "n[9-11]"),  # a width that grows: one range
    (["n08", "n9", "n10"], "n[08,9-10]"),  # padded 08 and 9 are not one range
    (["n09", "n10"], "n[09-10]"),
    (["n007", "n7"], "n[007,7]"),
    (["n1", "n10", "n11", "n2"], "n[1,10-11,2]"),  # the order given is kept
    (["a", "b1", "b2", "c"], "a,b[1-2],c"),
    (["rack1-n3", "rack1-n4", "rack2-n1"], "rack1-n[3-4],rack2-n1"),
    (["gpu-a100-1", "gpu-a100-2", "x"], "gpu-a100-[1-2],x"),
    (["a-1", "a-2", "a1"], "a-[1-2],a1"),
    (["1", "2", "3"], "[1-3]"),
    (["host"], "host"),
    (["n1", "n1"], "n[1,1]"),
    (["n99", "n100", "n0100"], "n[99-100,0100]"),
]


@pytest.mark.parametrize("hosts,form", SLURM_FORMS)
def test_hostlist_is_slurms_own_form(hosts, form):
    assert hostlist.slurm(hosts) == form
    assert hostlist.expand(form) == hosts


@pytest.mark.parametrize("text", ["n[1-2", "n]1[", "x[01-03,5]y", "n[3-1]", "n[a-b]", "n[]"])
def test_what_is_not_a_hostlist_is_a_value_error(text):
    with pytest.raises(ValueError, match="not a hostlist"):
        hostlist.expand(text)


def _scontrol(tmp_path):
    """scontrol reads hostlists without any daemon, given a slurm.conf to load."""
    if not shutil.which("scontrol"):
        pytest.skip("scontrol is not installed (Debian: apt-get install slurm-client)")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=envcheck\nSlurmctldHost=localhost\nNodeName=n1\n"
                    "PartitionName=p Nodes=n1\n")
    env = dict(os.environ, SLURM_CONF=str(conf))

    def scontrol(*args):
        res = subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True,
                             timeout=30)
        assert res.returncode == 0, res.stderr
        return res.stdout

    return scontrol


def test_hostlists_agree_with_the_real_scontrol(tmp_path):
    scontrol = _scontrol(tmp_path)
    rng = random.Random(36)
    cases = [",".join(h) for h, _ in SLURM_FORMS]
    for _ in range(150):
        names = []
        for _ in range(rng.randint(1, 8)):
            prefix = rng.choice(["n", "node", "gpu-a", "r1-n", ""])
            number = rng.choice([None, rng.randint(0, 12), rng.randint(95, 105)])
            width = rng.choice([0, 0, 1, 2, 3])
            names.append((prefix + ("" if number is None else "%0*d" % (width, number)))
                         or "h")
        cases.append(",".join(names))
    for case in cases:
        form = scontrol("show", "hostlist", case).strip()
        assert hostlist.slurm(case.split(",")) == form, case
        assert hostlist.expand(form) == scontrol("show", "hostnames", form).split(), form


# ---- envcheck summary: check answers of 6 nodes, 2 of which will not work ----

NODES = [_node("node%d" % i) for i in (1, 2, 3, 7)] + [
    _node("node4", driver="470.82.01"), _node("node5", python="3.14")]


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    d = tmp_path_factory.mktemp("answers")
    codes = write_answers(d, NODES)
    assert {h: c for h, (c, _) in codes.items() if c} == {"node4": 1, "node5": 1}, codes
    return d


def test_summary_writes_failed_and_ready_hosts_and_a_drain_script(answers, tmp_path):
    failed, ready, drain = tmp_path / "failed", tmp_path / "ready", tmp_path / "drain.sh"
    res = run_cli("summary", str(answers), "--failed-hosts", str(failed), "--ready-hosts",
                  str(ready), "--drain-script", str(drain))
    assert (res.code, res.stderr) == (1, "")
    assert failed.read_text() == "node[4-5]\n"
    assert ready.read_text() == "node[1-3,7]\n"
    lines = drain.read_text().splitlines()
    assert lines[0] == "#!/bin/sh" and all(line.startswith("#") for line in lines[:4])
    assert [shlex.split(line) for line in lines[4:]] == [
        ["scontrol", "update", "NodeName=node4", "State=DRAIN",
         "Reason=envcheck: driver 470.82.01 < 525.60.13 for cu124; driver 470.82.01 "
         "cannot run sm_90 (Hopper needs R520+)"],
        ["scontrol", "update", "NodeName=node5", "State=DRAIN",
         "Reason=envcheck: no Python 3.14 wheel of torch 2.6.0 (3.9–3.13)"]]
    res = run_cli("summary", str(answers), "--failed-hosts", str(failed), "--ready-hosts",
                  str(ready), "--hostlist-style", "lines")
    assert res.code == 1
    assert failed.read_text() == "node4\nnode5\n"
    assert ready.read_text() == "node1\nnode2\nnode3\nnode7\n"


def test_the_drain_script_runs_scontrol_once_per_failed_host(answers, tmp_path):
    drain = tmp_path / "drain.sh"
    assert run_cli("summary", str(answers), "--drain-script", str(drain)).code == 1
    path, log = _fake_scontrol(tmp_path)
    subprocess.run(["sh", str(drain)], check=True, timeout=30, env=dict(os.environ, PATH=path))
    calls = [c.splitlines() for c in log.read_text().strip("\n").split("\n\n")]
    assert calls == [
        ["update", "NodeName=node4", "State=DRAIN",
         "Reason=envcheck: driver 470.82.01 < 525.60.13 for cu124; driver 470.82.01 "
         "cannot run sm_90 (Hopper needs R520+)"],
        ["update", "NodeName=node5", "State=DRAIN",
         "Reason=envcheck: no Python 3.14 wheel of torch 2.6.0 (3.9–3.13)"]]


def _fake_scontrol(tmp_path):
    """A stand-in scontrol that records its arguments, one per line, a blank line after
    each call; (PATH with it first, the log)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    fake = bin_dir / "scontrol"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%%s\\n" "$a"; done >> %s\n'
                    'echo >> %s\n' % (log, log))
    fake.chmod(0o755)
    return "%s:%s" % (bin_dir, os.environ["PATH"]), log


@pytest.mark.ranks
def test_a_reason_from_a_hostile_file_is_one_quoted_argument(answers, tmp_path):
    hostile = json.loads((answers / "node4.json").read_text())
    marker = tmp_path / "pwned"
    for c in hostile["answer"]["criteria"]:
        if c["status"] == "fail":
            c["short"] = "it's $(touch %s) `touch %s`\nline two\x1b[31m" % (marker, marker)
    (tmp_path / "hostile.json").write_text(json.dumps(hostile))
    drain = tmp_path / "drain.sh"
    assert run_cli("summary", str(tmp_path / "hostile.json"), "--drain-script",
                   str(drain)).code == 1
    path, log = _fake_scontrol(tmp_path)
    subprocess.run(["sh", str(drain)], check=True, timeout=30, env=dict(os.environ, PATH=path))
    assert not marker.exists()
    (call,) = [c.splitlines() for c in log.read_text().strip("\n").split("\n\n")]
    said = "it's $(touch %s) `touch %s` line two [31m" % (marker, marker)
    assert call[:3] == ["update", "NodeName=node4", "State=DRAIN"]
    # one line of printable text, at most 200 characters, cut with a mark (wherever the
    # cut falls: the temp path in the text is as long as the machine makes it; a cut just
    # after a blank drops that blank, and the text holds no two blanks in a row)
    assert call[3].startswith("Reason=") and call[3].endswith("..."), call
    reason, start = call[3][len("Reason="):-len("...")], "envcheck: %s; it's" % said
    assert len(reason) in (200 - len("..."), 200 - len("...") - 1), call
    assert not reason.endswith(" ") and "  " not in reason, call
    assert reason.startswith(start) or start.startswith(reason), call


def test_no_failed_host_writes_an_empty_list(answers, tmp_path):
    failed, drain = tmp_path / "failed", tmp_path / "drain.sh"
    res = run_cli("summary", str(answers / "node1.json"), str(answers / "node2.json"),
                  "--failed-hosts", str(failed), "--drain-script", str(drain))
    assert res.code == 0
    assert failed.read_text() == ""
    assert [line for line in drain.read_text().splitlines() if not line.startswith("#")] == []


def test_host_names_slurm_cannot_take_go_in_no_file(answers, tmp_path):
    odd = json.loads((answers / "node4.json").read_text())
    odd["host"] = "node9,node1'$(reboot)"
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    failed, drain = tmp_path / "failed", tmp_path / "drain.sh"
    res = run_cli("summary", str(answers / "node5.json"), str(tmp_path / "odd.json"),
                  "--failed-hosts", str(failed), "--drain-script", str(drain))
    assert res.code == 1
    assert res.stderr == ("envcheck: note: \"node9,node1'$(reboot)\" is not a host name "
                          "SLURM takes: left out of the host lists and the drain script\n")
    assert failed.read_text() == "node5\n"
    assert "reboot" not in drain.read_text()


@pytest.mark.parametrize("args,message", [
    (["--hostlist-style", "csv"], "--hostlist-style 'csv': choose slurm or lines"),
    (["--failed-hosts", "/nonexistent/dir/f"], "cannot write /nonexistent/dir/f: "
                                               "directory /nonexistent/dir does not exist"),
])
def test_bad_scheduler_options_are_one_line_and_exit_2(answers, tmp_path, args, message):
    for command in (["summary", str(answers)], ["report", str(tmp_path / "r.json")]):
        res = run_cli(*command, *args)
        assert (res.code, res.stdout) == (2, "")
        assert res.stderr == "envcheck: error: %s\n" % message


# ---- launcher mode: srun-style ranks, node1 given an interface it does not have ----

@pytest.fixture(scope="module")
def bad_interface(tmp_path_factory):
    d = tmp_path_factory.mktemp("srun")
    outs, procs = srun_tasks(d, ["node0", "node1"], ["--out", str(d / "out"), "--json",
                                                     str(d / "r.json"), "-p", "launch",
                                                     "--timeout", "20"],
                             extra={1: {"GLOO_SOCKET_IFNAME": "eth9"}})
    assert [p.returncode for p in procs] != [0, 0], outs
    return d


@pytest.mark.ranks
def test_a_launcher_run_blames_the_host_with_the_wrong_interface(bad_interface, tmp_path):
    failed, ready, drain = tmp_path / "failed", tmp_path / "ready", tmp_path / "drain.sh"
    res = run_cli("report", "--records", str(bad_interface / "out"), "--failed-hosts",
                  str(failed), "--ready-hosts", str(ready), "--drain-script", str(drain))
    assert res.code == 1, res.stdout + res.stderr
    assert (failed.read_text(), ready.read_text()) == ("node1\n", "node0\n")
    (line,) = [shlex.split(x) for x in drain.read_text().splitlines() if not x.startswith("#")]
    assert line[:4] == ["scontrol", "update", "NodeName=node1", "State=DRAIN"]
    assert line[4].startswith("Reason=envcheck: setup.socket_interface failed (unexpected): "
                              "GLOO_SOCKET_IFNAME=eth9: node1 has no interface eth9")
    assert len(line[4]) <= len("Reason=") + 200


@pytest.mark.ranks
def test_summary_of_a_launcher_report_fails_only_the_blamed_host(bad_interface, tmp_path):
    failed, ready = tmp_path / "failed", tmp_path / "ready"
    res = run_cli("summary", str(bad_interface / "r.json"), "--failed-hosts", str(failed),
                  "--ready-hosts", str(ready), "--format", "json")
    assert res.code == 1, res.stderr
    nodes = {n["host"]: (n["status"], n["reasons"])
             for n in json.loads(res.stdout)["nodes_detail"]}
    assert nodes == {"node0": ("works", []),
                     "node1": ("fails", ["setup.socket_interface failed (unexpected)"])}
    assert (failed.read_text(), ready.read_text()) == ("node1\n", "node0\n")


@pytest.mark.ranks
def test_a_crash_blames_the_host_of_the_rank_that_died(tmp_path):
    from test_launcher import DIE  # rank 1 exits in the middle of a check

    probe = tmp_path / "die.py"
    probe.write_text(DIE)
    outs, procs = srun_tasks(tmp_path, ["node0", "node1"],
                             ["--out", str(tmp_path / "out"), "-p", "die", "--probe-path",
                              str(probe), "--timeout", "20"], job_id="38")
    assert all(p.returncode for p in procs), outs
    failed, ready, rj = tmp_path / "failed", tmp_path / "ready", tmp_path / "r.json"
    res = run_cli("report", "--records", str(tmp_path / "out"), "--failed-hosts",
                  str(failed), "--ready-hosts", str(ready), "--json", str(rj))
    assert res.code == 1, res.stdout + res.stderr
    die = next(c for c in json.loads(rj.read_text())["checks"] if c["id"] == "die.exit")
    assert (die["outcome"], die["root_rank"]) == ("crash", 1)
    assert (failed.read_text(), ready.read_text()) == ("node1\n", "node0\n")


@pytest.mark.ranks
def test_a_run_cut_short_leaves_hosts_no_check_blames_unjudged(tmp_path):
    rj = tmp_path / "r.json"
    res = run_cli("run", "-p", "launch", "--nproc", "1", "--backend", "gloo", "-q",
                  "--json", str(rj), env={"ENVCHECK_HOST": "node3"})
    assert res.code == 0, res.stderr
    report = json.loads(rj.read_text())
    report["interrupted"] = "SIGINT"  # as a Ctrl-C leaves it
    rj.write_text(json.dumps(report))
    failed, ready, drain = tmp_path / "failed", tmp_path / "ready", tmp_path / "drain.sh"
    for command in (["summary", str(rj)], ["report", str(rj)]):
        res = run_cli(*command, "--failed-hosts", str(failed), "--ready-hosts", str(ready),
                      "--drain-script", str(drain))
        assert res.code == (3 if command[0] == "summary" else 130), res.stdout + res.stderr
        assert (failed.read_text(), ready.read_text()) == ("", "")
        assert [x for x in drain.read_text().splitlines() if not x.startswith("#")] == []
    res = run_cli("summary", str(rj))
    assert res.stdout.splitlines()[-1] == \
        "? 1 node cannot be judged: run interrupted (SIGINT): node3"

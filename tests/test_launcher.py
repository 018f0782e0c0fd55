"""Launcher mode: real torchrun agents and srun-style ranks run the probes themselves.

Two torchrun agents on localhost play two nodes (ENVCHECK_HOST gives each its own host
name, as two machines would have); c10d rendezvous, gloo on CPU.
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import (STUCK, checks_by_id, launcher_env as _env, load_report, run_cli,
                      torch_only_python, torchrun, validate_report)
from envcheck.run.supervisor import free_port
from envcheck.worker import identity, launched, reporting

pytestmark = pytest.mark.ranks  # every test here starts real ranks

DIE = '''
def probe_die(ctx):
    """rank 1 exits in the middle of a check; rank 0 waits in a barrier"""
    import os
    import torch.distributed as dist
    with ctx.check("exit"):
        if ctx.rank == 1:
            os._exit(9)
        dist.barrier()
'''


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    d = tmp_path_factory.mktemp("torchrun")
    out, report, junit = d / "out", d / "report.json", d / "report.xml"
    args = ["--out", str(out), "--json", str(report), "--junit", str(junit),
            "-p", "launch", "-p", "collectives", "-p", "nccl", "--timeout", "30"]
    port = free_port()
    agents = [torchrun(sys.executable, 2, i, 2, port, args, str(d), "node%s" % "AB"[i])
              for i in (0, 1)]
    results = [a.communicate(timeout=120) for a in agents]
    return d, out, report, junit, [a.returncode for a in agents], results


def test_torchrun_two_agents_write_one_report_with_four_ranks(two_nodes):
    d, out, report_path, junit, codes, results = two_nodes
    assert codes == [0, 0], results
    report = load_report(str(report_path))
    assert report["plan"]["nproc"] == 4 and report["plan"]["launcher"] == "torchrun"
    assert [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]] == [
        (0, "nodeA", 0), (1, "nodeA", 1), (2, "nodeB", 0), (3, "nodeB", 1)]
    checks = checks_by_id(report)
    bad = {k: c["detail"] for k, c in checks.items()
           if c["outcome"] not in ("passed", "skipped")}
    assert not bad
    for c in checks.values():
        if c["probe"] != "setup":
            assert sorted(c["ranks"], key=int) == ["0", "1", "2", "3"], c["id"]
    assert checks["launch.rank_mapping"]["detail"] == "4 ranks on 2 host(s)"
    assert checks["collectives.all_reduce"]["detail"] == "SUM and MAX over 4 ranks"
    bw = checks["nccl.bandwidth"]["ranks"]["3"]["data"]
    assert bw["ranks"] == 4 and bw["busbw_factor"] == 1.5
    assert "4 on nodeA, nodeB, backend gloo" in results[0][0]  # rank 0 printed the table
    # The agent without rank 0 says what its ranks ran, and where the report is.
    assert results[1][0] == (
        "envcheck: nodeB: ranks 2–3 of 4 ran 3 probes; rank 0 prints the report, writes "
        "%s and %s; every rank's records: %s\n" % (report_path, junit, out))
    cases = ET.parse(str(junit)).getroot().iter("testcase")
    assert len(list(cases)) == len(report["checks"])
    # Rank 0 gathered every rank's records into one file.
    with open(out / launched.MERGED_RECORDS) as f:
        ranks = {json.loads(line)["rank"] for line in f}
    assert ranks == {0, 1, 2, 3}


def test_report_from_per_rank_files_matches_the_gathered_one(two_nodes):
    d, out, report_path, _, _, _ = two_nodes
    again = d / "again.json"
    res = run_cli("report", "--records", str(out), "--json", str(again), "--format", "json")
    assert res.code == 0, res.stderr
    a, b = load_report(str(report_path)), load_report(str(again))
    assert [(c["id"], c["outcome"]) for c in a["checks"]] == \
        [(c["id"], c["outcome"]) for c in b["checks"]]


def test_rank_0s_early_report_helper_reads_the_path_then_reports_or_leaves_quietly(two_nodes):
    """Rank 0 starts its report helper as it starts (--records-on-stdin) and gives it the
    records' path at the end: the same report as --records PATH. Given no path (the rank
    died first), it leaves without a word, exit 0: the watcher reports instead."""
    d, out, report_path, _, _, _ = two_nodes
    again = d / "stdin.json"
    cmd = [sys.executable, "-m", "envcheck", "report", "--records-on-stdin", "--json",
           str(again), "--format", "json"]
    proc = subprocess.run(cmd, input=str(out / launched.MERGED_RECORDS) + "\n",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a, b = load_report(str(report_path)), load_report(str(again))
    assert [(c["id"], c["outcome"], c["verdict"]) for c in a["checks"]] == \
        [(c["id"], c["outcome"], c["verdict"]) for c in b["checks"]]
    proc = subprocess.run(cmd[:5], input="", capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_rank_whose_setup_failed_sent_its_failure_to_the_store_before_it_ended(tmp_path):
    """nodeB names an interface it lacks: its ranks fail the pre-checks and end at once.
    Its publishing rank (2) sends its host's records, that failure included, before it
    exits, instead of leaving them to its watcher's relay: a new process that imports
    torch first, while rank 0 waits only so long for them."""
    out, report = tmp_path / "out", tmp_path / "report.json"
    args = ["--out", str(out), "--json", str(report), "-p", "launch", "--timeout", "30"]
    port = free_port()
    agents = [torchrun(sys.executable, 2, i, 2, port, args, str(tmp_path), "node%s" % "AB"[i],
                       env={"GLOO_SOCKET_IFNAME": ("lo", "envcheck9")[i]})
              for i in (0, 1)]
    results = [a.communicate(timeout=120) for a in agents]
    assert [a.returncode for a in agents] == [1, 1], results
    with open(out / "records-rank2.jsonl", "rb") as f:
        data = f.read()
    lines = data.splitlines(keepends=True)
    setup = [i for i, line in enumerate(lines) if json.loads(line)["t"] == "setup"]
    assert [json.loads(lines[i])["outcome"] for i in setup] == ["failed"], lines
    failed_setup_ends = len(b"".join(lines[:setup[0] + 1]))
    with open(out / ".relay-sent-rank2.json") as f:
        sent = json.load(f)
    assert sent["2"][1] >= failed_setup_ends, (sent, failed_setup_ends, len(data))
    check = checks_by_id(load_report(str(report)))["setup.socket_interface"]
    assert check["ranks"]["2"]["outcome"] == "failed", check
    assert check["ranks"]["2"]["detail"].startswith(
        "GLOO_SOCKET_IFNAME=envcheck9: nodeB has no interface envcheck9"), check


def test_silent_ranks_are_named_by_host_even_when_they_sent_nothing(tmp_path):
    """After a link cut, rank 2's records reached rank 0 but rank 3's did not: both are
    named on node2, rank 3 from the hosts rank 0's launch probe gathered."""
    from envcheck.core.records import RecordWriter

    for rank, host in ((0, "node1"), (2, "node2")):
        w = RecordWriter(str(tmp_path / ("records-rank%d.jsonl" % rank)), rank)
        w.write("hello", pid=1, host=host)
        if rank == 0:
            w.write("check", probe="launch", check="rank_mapping", outcome="passed",
                    data={"hosts": ["node1", "node1", "node2", "node2"]})
        w.close()
    assert reporting.ranks_on_hosts(str(tmp_path), [2, 3]) == "rank(s) 2,3 on node2"
    # Without the launch probe's hosts, the rank that sent nothing stays unknown.
    os.remove(tmp_path / "records-rank0.jsonl")
    assert reporting.ranks_on_hosts(str(tmp_path), [2, 3]) == \
        "rank(s) 2 on node2; rank(s) 3 on an unknown host"


def test_slurm_env_as_srun_sets_it(tmp_path):
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = _env(SLURM_PROCID=str(rank), SLURM_LOCALID="0", SLURM_NODEID=str(rank),
                   SLURM_NTASKS="2", SLURM_NNODES="2", SLURM_STEP_TASKS_PER_NODE="1(x2)",
                   SLURM_TASKS_PER_NODE="1(x2)", SLURM_JOB_ID="4242", SLURM_STEP_ID="0",
                   SLURM_JOB_NODELIST="node[0-1]", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), ENVCHECK_HOST="node%d" % rank)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "envcheck.worker.launched", "--out", str(tmp_path / "out"),
             "--json", str(tmp_path / "r.json"), "-p", "launch", "--timeout", "30"],
            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, stdin=subprocess.DEVNULL))
    outs = [p.communicate(timeout=90) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    report = load_report(str(tmp_path / "r.json"))
    assert report["plan"]["launcher"] == "slurm" and report["plan"]["run_id"] == "slurm:4242.0"
    checks = checks_by_id(report)
    assert checks["launch.slurm"]["outcome"] == "passed", checks["launch.slurm"]
    assert checks["launch.env"]["ranks"]["1"]["detail"] == "rank 1/2, local rank 0/1"
    assert checks["launch.rank_mapping"]["detail"] == "2 ranks on 2 host(s)"
    assert [r["host"] for r in report["ranks"]] == ["node0", "node1"]


def test_hang_in_one_rank_ends_the_job_and_names_the_rank(tmp_path):
    probe = tmp_path / "stuck.py"
    probe.write_text(STUCK)
    out = tmp_path / "out"
    timeout = 3.0
    agent = torchrun(sys.executable, 1, 0, 2, free_port(),
                     ["--out", str(out), "-p", "stuck", "--probe-path", str(probe),
                      "--timeout", str(timeout)], str(tmp_path), "nodeA")
    _, stderr = agent.communicate(timeout=120)
    ended = time.time()
    assert agent.returncode != 0
    assert "envcheck: rank 1 on nodeA: no progress for 3.0 s in probe:stuck/wait" in stderr
    assert "exitcode: 124" in stderr  # torchrun's own summary blames that rank too
    with open(out / "records-rank1.jsonl") as f:
        recs = [json.loads(line) for line in f]
    started = next(r["time"] for r in recs if r["t"] == "probe_start")
    assert ended - started < timeout + 5.0

    report_path = tmp_path / "r.json"
    res = run_cli("report", "--records", str(out), "--json", str(report_path))
    assert res.code == 1, res.stderr
    report = load_report(str(report_path))
    wait = checks_by_id(report)["stuck.wait"]
    assert wait["outcome"] == "hang" and wait["root_rank"] == 1
    # One host: the same words as envcheck run (hosts are named when ranks span several).
    assert wait["detail"].startswith("rank 1: no progress for 3.0 s (timeout 3 s) in wait")
    assert 'stuck.py", line 8 in probe_stuck' in wait["ranks"]["1"]["stack"]
    assert "rank 1: no progress" in res.stdout
    abort = report["attempts"][0]["abort"]
    assert (abort["kind"], abort["root_rank"], abort["phase"]) == ("hang", 1, "probe:stuck")


def test_a_hang_under_torchrun_reads_as_envcheck_run_reads_it(tmp_path):
    """The watcher kills the hung rank, and its peers' barrier fails at once (gloo's
    'Connection closed by peer') before torchrun's SIGTERM comes: that failure is their
    reaction to the kill. Under envcheck run's supervisor, which stops every rank
    together, the same 4 ranks read as waiting in their barrier: both reports must say
    the same of every rank."""
    probe = tmp_path / "stuck.py"
    probe.write_text(STUCK)
    out = tmp_path / "out"
    args = ["-p", "stuck", "--probe-path", str(probe), "--timeout", "3"]
    agent = torchrun(sys.executable, 1, 0, 4, free_port(), ["--out", str(out), *args],
                     str(tmp_path))
    _, stderr = agent.communicate(timeout=120)
    assert agent.returncode != 0, stderr
    launched_run = run_cli("report", "--records", str(out), "--format", "json")
    supervised = run_cli("run", "--nproc", "4", *args, "--format", "json")
    assert (launched_run.code, supervised.code) == (1, 1), (launched_run, supervised)

    def ranks(res):
        check = checks_by_id(validate_report(json.loads(res.stdout)))["stuck.wait"]
        return {r: (e["outcome"], e["detail"].replace("the launcher", "envcheck"))
                for r, e in check["ranks"].items()}
    assert ranks(launched_run) == ranks(supervised)
    outcome, detail = ranks(supervised)["2"]
    assert outcome == "hang" and detail.startswith(
        "stopped by envcheck while in wait after rank 1 hung; it was waiting in barrier "
        "(distributed_c10d.py:"), detail
    # a waiting rank whose watcher had not asked for its stacks when the kill came (its
    # deadline a little after rank 1's, a watcher descheduled): no stack of rank 0, and
    # its reaction alone says it waited on a peer; rank 1 is still the hang
    (out / "stacks-rank0.txt").write_text("")
    res = run_cli("report", "--records", str(out), "--format", "json")
    check = checks_by_id(validate_report(json.loads(res.stdout)))["stuck.wait"]
    assert check["root_rank"] == 1, check
    assert check["ranks"]["0"]["detail"] == ("stopped by the launcher while in wait after "
                                             "rank 1 hung"), check["ranks"]["0"]


def test_a_rank_that_dies_is_the_crash_not_the_ranks_torn_down(tmp_path):
    probe = tmp_path / "die.py"
    probe.write_text(DIE)
    out = tmp_path / "out"
    agent = torchrun(sys.executable, 1, 0, 2, free_port(),
                     ["--out", str(out), "-p", "die", "--probe-path", str(probe),
                      "--timeout", "20"], str(tmp_path), "nodeA")
    agent.communicate(timeout=120)
    assert agent.returncode != 0
    res = run_cli("report", "--records", str(out), "--format", "json")
    assert res.code == 1, res.stderr
    report = validate_report(json.loads(res.stdout))
    checks = checks_by_id(report)
    # (twice, under CI's load, the report held no die.exit at all: say what it held and
    # what each rank wrote, whole: a dict would be cut short in the failure's message)
    assert "die.exit" in checks, json.dumps({
        "checks": {k: [c["outcome"], c["detail"]] for k, c in checks.items()},
        "abort": report["attempts"][0].get("abort"),
        "records": {p.name: [(r["t"], r.get("probe"), r.get("check"), r.get("outcome"))
                             for r in map(json.loads, p.read_text().splitlines())]
                    for p in sorted(out.glob("records-rank*.jsonl"))},
        "stacks": sorted(p.name for p in out.glob("stacks-rank*.txt"))})
    die = checks["die.exit"]
    assert die["outcome"] == "crash" and die["root_rank"] == 1
    assert die["detail"] == ("rank 1 stopped without a hang record or a SIGTERM stack dump: "
                             "it crashed or was killed (its exit code is in the launcher's "
                             "log) in exit")


def test_ranks_need_only_torch(tmp_path):
    """A venv with torch and nothing of envcheck's, and no envcheck on PATH either: rank 0
    leaves the report to us, and exits 0 rather than fail on outcomes nobody judged."""
    bindir = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not os.path.exists(os.path.join(p, "envcheck")))
    assert bindir not in path.split(os.pathsep)
    cmd = [torch_only_python(), "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % free_port(), "-m", "envcheck.worker.launched",
           "--out", str(tmp_path / "out"), "-p", "launch", "-p", "serialization",
           "--timeout", "60"]
    agent = subprocess.run(cmd, cwd=str(tmp_path), env=_env(PATH=path), capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert agent.returncode == 0, agent.stderr
    # Process groups do not pickle: known issues, so envcheck run would exit 0.
    assert ("build the report where envcheck is installed: envcheck report --records %s"
            % (tmp_path / "out" / launched.MERGED_RECORDS)) in agent.stderr
    assert "4 check(s) failed, not yet judged against the matrix" in agent.stderr
    res = run_cli("report", "--records", str(tmp_path / "out" / launched.MERGED_RECORDS),
                  "--format", "json")
    assert res.code == 0, res.stderr
    report = validate_report(json.loads(res.stdout))
    assert report["environment"]["torch"].split("+")[0] == \
        importlib.metadata.version("torch").split("+")[0]
    assert report["environment"]["numpy"] is None
    pickled = checks_by_id(report)["serialization.pickle_default_group"]
    assert (pickled["outcome"], pickled["verdict"]) == ("failed", "known")


def test_rank_0_without_dependencies_uses_an_envcheck_on_path(tmp_path):
    """The same venv, with this envcheck on PATH (a pipx install, say): rank 0 has it
    judge the report, and exits as envcheck run would: 1, a missing numpy breaks
    all_gather_object, which the matrix expects to pass."""
    agent = torchrun(torch_only_python(), 1, 0, 2, free_port(),
                     ["--out", str(tmp_path / "out"), "-p", "collectives", "--timeout", "60",
                      "--json", str(tmp_path / "r.json")], str(tmp_path), "nodeA")
    stdout, stderr = agent.communicate(timeout=120)
    assert agent.returncode == 1, stderr
    assert "exitcode  : 1" in stderr  # torchrun names rank 0, whose exit is the verdict
    report = load_report(str(tmp_path / "r.json"))
    gather = checks_by_id(report)["collectives.all_gather_object"]
    assert (gather["outcome"], gather["verdict"]) == ("failed", "unexpected")
    assert "pip install numpy" in gather["advice"]
    assert "1 UNEXPECTED" in stdout


def test_slurm_tasks_per_node():
    assert identity.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert identity.expand_tasks_per_node("8") == [8]
    env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "0", "SLURM_NODEID": "3",
           "SLURM_NTASKS": "7", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1",
           "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert identity.export_identity(env) == "slurm"
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == \
        ("5", "0", "7", "1")
    torchrun_env = dict(env, RANK="9", WORLD_SIZE="16", TORCHELASTIC_RUN_ID="x")
    assert identity.export_identity(torchrun_env) == "torchrun"
    assert torchrun_env["RANK"] == "9"  # torchrun inside srun: torchrun's ids win


@pytest.mark.parametrize("env, message", [
    ({}, "start this with torchrun or srun"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"},
     "MASTER_ADDR and MASTER_PORT not set: under srun, export them"),
    ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "RANK='x' is not a non-negative integer"),
])
def test_bad_launch_environment_is_one_line_and_exit_2(tmp_path, env, message):
    proc = subprocess.run([sys.executable, "-m", "envcheck.worker.launched", "--out",
                           str(tmp_path)], env=_env(**env), capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["envcheck: error: " + proc.stderr.strip()
                                                [len("envcheck: error: "):]]
    assert message in proc.stderr


def test_report_needs_one_source(tmp_path):
    res = run_cli("report")
    assert res.code == 2 and "give either a saved report" in res.stderr
    res = run_cli("report", "--records", str(tmp_path))
    assert res.code == 2 and "holds no records-rank*.jsonl" in res.stderr
    # The launcher may have failed first: one cause is a torch on a Python it does not
    # support (torch 1.13's torchrun on 3.11), which the matrix knows.
    assert "if the launcher failed before starting any rank, its own output says why (a " \
           "torch on a Python it does not support fails there, e.g. torch 1.13 supports " \
           "Python 3.7, 3.8, 3.9, 3.10 only" in res.stderr


def test_two_agents_rank_0_without_dependencies_known_issues_only_all_exit_0(tmp_path):
    """Two nodes under torchrun, a training venv with only torch, known issues only: every
    agent exits 0 as soon as the job is done (torchrun used to sit in its exit barrier on
    the other node when rank 0 exited 1)."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not os.path.exists(os.path.join(p, "envcheck")))
    out = tmp_path / "out"
    port = free_port()
    cmd = [torch_only_python(), "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % port, "--rdzv-id", "envcheck-known", "-m",
           "envcheck.worker.launched", "--out", str(out), "-p", "serialization",
           "--timeout", "60"]
    agents = [subprocess.Popen(cmd, cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=_env(PATH=path, ENVCHECK_HOST="node%d" % i))
              for i in (0, 1)]
    results = [a.communicate(timeout=180) for a in agents]
    ended = time.time()
    assert [a.returncode for a in agents] == [0, 0], results
    with open(out / launched.MERGED_RECORDS) as f:
        last = max(json.loads(line)["time"] for line in f if line.strip())
    assert ended - last < 60  # seconds after the last record, not torchrun's 300 s barrier
    res = run_cli("report", "--records", str(out), "--format", "json")
    assert res.code == 0, res.stdout
    report = validate_report(json.loads(res.stdout))
    assert {c["verdict"] for c in report["checks"] if c["outcome"] == "failed"} == {"known"}


def test_rank_0_on_a_terminal_fits_and_colours_the_screen_as_envcheck_run(tmp_path):
    from test_screen import BOLD_RED, GREEN, RESET, on_terminal_command, visible

    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % port, "-m", "envcheck.worker.launched", "--out",
           str(tmp_path / "out"), "-p", "launch", "-p", "serialization", "--timeout", "60"]
    code, lines, _ = on_terminal_command(80, cmd, base=_env(ENVCHECK_HOST="nodeA"),
                                         cwd=str(tmp_path))
    assert code == 0, "\n".join(lines)
    shown = [visible(line) for line in lines]
    start = shown.index("✓ Ready for distributed training: backend gloo, 2 ranks on nodeA")
    report = lines[start:]
    # Fitted to 80 columns; a path longer than a line gets a line of its own, whole
    # (never split: it must stay copyable), and only a path may overflow.
    assert [line for line in shown[start:] if len(line) > 80
            and len(line.split()) != 1] == [], "\n".join(shown)
    assert report[0].startswith("\x1b[1;32m✓ Ready") and BOLD_RED not in "".join(report)
    assert any(line.startswith(GREEN + "✓" + RESET + " launch ") for line in report)


def test_one_hosts_clock_an_hour_ahead_does_not_lengthen_the_job(two_nodes, tmp_path):
    """The job's duration is each host's span by its own clock, the longest: nodeB's
    records shifted an hour ahead (as its clock would write them) change nothing."""
    import shutil

    d, out, report_path, junit, codes, results = two_nodes
    same, ahead = tmp_path / "same", tmp_path / "ahead"
    for target in (same, ahead):
        target.mkdir()
        for rank in range(4):
            shutil.copy(out / ("records-rank%d.jsonl" % rank), target)
    for rank in (2, 3):  # nodeB's ranks
        path = ahead / ("records-rank%d.jsonl" % rank)
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps(dict(r, time=r["time"] + 3600)) + "\n"
                                for r in recs if "time" in r))
    durations = []
    for target in (same, ahead):
        saved = tmp_path / ("%s.json" % target.name)
        result = run_cli("report", "--records", str(target), "--json", str(saved), "-q")
        assert result.code == 0, result.stderr
        durations.append(load_report(str(saved))["duration_s"])
    assert durations[0] == durations[1] < 60


def test_a_host_name_holding_terminal_escapes_is_shown_escaped_on_its_own_agents_line(
        tmp_path):
    """The agent without rank 0 prints its own line: a host name that clears the screen
    and sets the window title reaches it escaped, as rank 0's screen shows it."""
    evil = "node\x1b]0;pwned\x07\x1b[2J"
    out = tmp_path / "out"
    args = ["--out", str(out), "-p", "launch", "--timeout", "30"]
    port = free_port()
    agents = [torchrun(sys.executable, 2, i, 1, port, args, str(tmp_path),
                       "nodeA" if i == 0 else evil) for i in (0, 1)]
    results = [a.communicate(timeout=120) for a in agents]
    # (once, in the whole suite, nodeA's agent exited 1 at its rendezvous shutdown: its
    # whole log, should it happen again)
    assert [a.returncode for a in agents] == [0, 0], "\n----\n".join(
        "agent %d, exit %s:\n%s" % (i, a.returncode, r[1][-6000:])
        for i, (a, r) in enumerate(zip(agents, results)))
    line = results[1][0]
    assert line.startswith("envcheck: node\\x1b]0;pwned\\x07\\x1b[2J: rank 1 of 2 ran 1 "
                           "probe;"), line
    assert "\x1b" not in line and "\x07" not in line
    assert "\x1b" not in results[0][0] and "\x07" not in results[0][0]


HUGE = '''
CHECKS = ("huge", "after")


def probe_huge(ctx):
    """rank 2 fails a check with a 9 MiB message (random letters: it does not compress
    under the store's 8 MiB limit), then hangs in the next"""
    import random
    import string
    import time

    with ctx.check("huge") as c:
        if ctx.rank == 2:
            rnd = random.Random(1)
            c.fail("".join(rnd.choice(string.ascii_letters) for _ in range(9 << 20)))
    with ctx.check("after"):
        if ctx.rank == 2:
            time.sleep(600)
'''


def test_a_record_over_the_stores_limit_is_spooled_and_the_rank_that_hung_is_named(tmp_path):
    """Two agents (nodeA, nodeB), rank 2 on nodeB fails a check with a 9 MiB message and
    then hangs: the record keeps 64 KiB of it and the whole in a file beside nodeB's
    records, the relay carries the rest, and rank 0 names rank 2 on nodeB for both.
    (Before: a value over the store's 8 MiB broke the relay; rank 0's report said '4
    ranks on nodeA' and 'rank 2 could not start', and the rank that hung was never
    named.)"""
    probe = tmp_path / "huge.py"
    probe.write_text(HUGE)
    out, report = tmp_path / "out", tmp_path / "r.json"
    args = ["--out", str(out), "--json", str(report), "-p", "huge", "--probe-path",
            str(probe), "--timeout", "10"]
    port = free_port()
    agents = [torchrun(sys.executable, 2, i, 2, port, args, str(tmp_path), "node%s" % "AB"[i])
              for i in (0, 1)]
    logs = [a.communicate(timeout=240) for a in agents]
    assert all(a.returncode != 0 for a in agents), logs
    assert report.stat().st_size < 1 << 20  # not 37 MB of the same letters
    rep = load_report(str(report))
    assert [(r["rank"], r["host"]) for r in rep["ranks"]] == [
        (0, "nodeA"), (1, "nodeA"), (2, "nodeB"), (3, "nodeB")]
    checks = checks_by_id(rep)
    after = checks["huge.after"]
    assert (after["outcome"], after["root_rank"]) == ("hang", 2), after
    assert after["detail"].startswith("rank 2 on nodeB: no progress for "), after["detail"]
    huge = checks["huge.huge"]
    assert (huge["outcome"], huge["root_rank"]) == ("failed", 2), huge
    message = huge["error"]["message"]
    kept, _, note = message.partition(" … [cut: ")
    assert len(kept) == 64 << 10
    assert note.startswith("%d more characters; the whole text: " % ((9 << 20) - (64 << 10)))
    spooled = note.split("the whole text: ", 1)[1].rstrip("]")
    assert spooled.startswith(str(out / "records-rank2.spool"))
    with open(spooled) as f:
        whole = f.read()
    assert len(whole) == 9 << 20 and whole.startswith(kept)

"""envcheck under a real SLURM: srun drives launcher mode across the test cluster's hosts.

The ``slurm`` fixture (tests/cluster/slurm.py) runs Debian's munged, slurmctld on node1
and one slurmd per host, each in its host's namespaces; srun, salloc and scontrol run
on node1 as a user would on a login node. 2 ranks per host, gloo. These run in CI
(root); elsewhere they skip with one line. After each test, nothing is left on any host
(the ``cluster`` fixture) and every node is idle (``slurm``).
"""

import itertools
import json
import os
import re
import shutil
import sys

import pytest

from cluster.jobs import launcher_env
from conftest import ROOT, checks_by_id, validate_report

_ports = itertools.count(29510)

# docs/multinode.md's srun recipe: MASTER_ADDR from the job's first node, MASTER_PORT
# exported before the step.
EXPORTS = ('export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)\n'
           'export MASTER_PORT=%d\n')


@pytest.fixture
def shared_path(cluster):
    """A path under /mnt/shared (every host's), not made yet; removed after the test."""
    name = "slurm-%d" % next(_ports)
    outside = os.path.join(cluster.shared, name)
    yield "/mnt/shared/" + name, outside
    shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture
def shared_dir(shared_path):
    """A fresh directory under /mnt/shared (every host's), removed after the test."""
    os.makedirs(shared_path[1])
    return shared_path


def _launched(out, probes=("launch", "collectives")):
    args = [sys.executable, "-m", "envcheck.worker.launched", "--out", out,
            "--json", out + "/report.json"]
    for p in probes:
        args += ["-p", p]
    return " ".join(args)


def _salloc(slurm, nodes, script, timeout=240):
    """``salloc -N nodes --ntasks-per-node 2 bash -c SCRIPT`` on node1, as a user would."""
    cmd = ["salloc", "-N%d" % nodes, "--ntasks-per-node", "2", "-J", "envcheck-test",
           "--immediate=20", "bash", "-c", script]  # no nodes free: fail, do not wait
    return slurm.run(cmd, env=launcher_env(ROOT), timeout=timeout)


_SRUN_EXIT = re.compile(r"^srun: error: (\S+): tasks? ([0-9,-]+): Exited with exit code (\d+)$")


def _srun_exits(stderr):
    """{node: {task: exit code}} from srun's "srun: error: node1: tasks 0-1: Exited with exit
    code 2" lines, whichever way srun grouped the tasks."""
    exits = {}
    for line in stderr.splitlines():
        m = _SRUN_EXIT.match(line)
        if not m:
            continue
        for part in m.group(2).split(","):
            first, _, last = part.partition("-")
            for task in range(int(first), int(last or first) + 1):
                exits.setdefault(m.group(1), {})[task] = int(m.group(3))
    return exits


def _explain(slurm, proc):
    return "exit %s\nstdout:\n%s\nstderr:\n%s\n%s" % (
        proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:], slurm.logs(1500))


@pytest.mark.parametrize("nodes", [2, 3])
def test_srun_launcher_mode_across_hosts(slurm, shared_path, nodes):
    out, outside = shared_path
    if nodes == 2:
        os.makedirs(outside)  # --out exists; with 3 nodes it does not: the ranks make it
    script = EXPORTS % next(_ports) + (
        "srun -N%d --ntasks-per-node 2 %s" % (nodes, _launched(out)))
    proc = _salloc(slurm, nodes, script)
    assert proc.returncode == 0, _explain(slurm, proc)
    with open(os.path.join(outside, "report.json"), encoding="utf-8") as f:
        report = validate_report(json.load(f))
    expected = [(2 * i + j, "node%d" % (i + 1), j) for i in range(nodes) for j in range(2)]
    assert [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]] == expected
    assert report["plan"]["launcher"] == "slurm"
    assert report["plan"]["run_id"].startswith("slurm:")
    checks = checks_by_id(report)
    mapping = checks["launch.rank_mapping"]
    assert mapping["outcome"] == "passed", mapping
    assert mapping["detail"] == "%d ranks on %d host(s)" % (2 * nodes, nodes)
    failed = [c["id"] for c in report["checks"] if c["outcome"] == "failed"]
    assert not failed, failed
    # rank 0 (on node1) printed the table; srun carried it back
    hosts = ", ".join("node%d" % (i + 1) for i in range(nodes))
    assert "%d on %s, backend gloo" % (2 * nodes, hosts) in proc.stdout, proc.stdout


def test_torchrun_inside_an_srun_step(slurm, shared_path):
    """docs/multinode.md: one torchrun per node in an srun step; torchrun's variables
    win over the SLURM ids (which describe the agents, not the ranks)."""
    out, outside = shared_path
    script = (
        'srun %s -m torch.distributed.run --nnodes 2 --nproc-per-node 2 '
        '--rdzv-backend c10d --rdzv-id envcheck-$SLURM_JOB_ID --rdzv-endpoint '
        '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1):%d '
        '-m envcheck.worker.launched --out %s --json %s/report.json -p launch '
        '-p collectives' % (sys.executable, next(_ports), out, out))
    cmd = ["salloc", "-N2", "--ntasks-per-node", "1", "-c", "2", "--immediate=20",
           "bash", "-c", script]
    proc = slurm.run(cmd, env=launcher_env(ROOT), timeout=240)
    assert proc.returncode == 0, _explain(slurm, proc)
    with open(os.path.join(outside, "report.json"), encoding="utf-8") as f:
        report = validate_report(json.load(f))
    assert report["plan"]["launcher"] == "torchrun"
    ranks = [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]]
    # which agent gets group rank 0 is the rendezvous' choice: two ranks per host,
    # in rank order, local ranks 0 and 1
    first, second = ranks[0][1], ranks[2][1]
    assert {first, second} == {"node1", "node2"}, ranks
    assert ranks == [(0, first, 0), (1, first, 1), (2, second, 0), (3, second, 1)]
    checks = checks_by_id(report)
    assert checks["launch.rank_mapping"]["outcome"] == "passed", checks["launch.rank_mapping"]
    assert checks["launch.slurm"]["outcome"] == "skipped"
    assert checks["launch.slurm"]["detail"].startswith(
        "ranks were started by torchrun inside the SLURM step"), checks["launch.slurm"]


def test_srun_json_inside_a_fresh_out_dir(slurm, shared_path):
    """``--out DIR --json DIR/report.json`` with DIR not made yet: rank 0 makes it before
    it checks that it can write the report (else exit 2 on rank 0 alone, and under srun
    the other ranks waited ~75 s for it; with several ranks it was a race)."""
    out, outside = shared_path
    script = EXPORTS % next(_ports) + "srun -N1 -n1 %s" % _launched(out, ["launch"])
    cmd = ["salloc", "-N1", "-n1", "--immediate=20", "bash", "-c", script]
    proc = slurm.run(cmd, env=launcher_env(ROOT), timeout=120)
    assert proc.returncode == 0, _explain(slurm, proc)
    with open(os.path.join(outside, "report.json"), encoding="utf-8") as f:
        report = validate_report(json.load(f))
    assert [(r["rank"], r["host"]) for r in report["ranks"]] == [(0, "node1")]


def test_srun_without_master_addr_every_rank_exits_2(slurm, shared_dir):
    out, outside = shared_dir
    env = launcher_env(ROOT, MASTER_PORT=str(next(_ports)))
    cmd = ["srun", "-N2", "--ntasks-per-node", "2", "--immediate=20"] + _launched(out).split()
    proc = slurm.run(cmd, env=env, timeout=120)
    assert proc.returncode == 2, _explain(slurm, proc)
    line = ("envcheck: error: MASTER_ADDR not set: under srun, export them before the "
            "step, e.g. export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
            "| head -n1) MASTER_PORT=29500")
    lines = proc.stderr.splitlines()
    assert lines.count(line) == 4, proc.stderr  # one line from each rank, nothing else
    assert not [l for l in lines if l.startswith("envcheck:") and l != line], proc.stderr
    assert "Traceback" not in proc.stderr
    # srun: every task on both nodes exited 2 (srun groups tasks that end together into one
    # line, "tasks 0-1", or not, "task 0" and "task 1": that depends on timing)
    assert _srun_exits(proc.stderr) == {
        "node1": {0: 2, 1: 2}, "node2": {2: 2, 3: 2}}, proc.stderr
    assert proc.stdout == ""
    assert os.listdir(outside) == []  # no rank got as far as its --out


# --- docs/cluster.md's SLURM recipes, run as written -------------------------------------

DOCS = os.path.join(ROOT, "docs", "cluster.md")
BIN = "/tmp/envcheck-bin"  # on each host (its own /tmp): envcheck, and node3's nvidia-smi
# node3's GPU: an H100 under a 470 driver, which cannot run it (nor cu124)
SMI = "#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, 9.0, 470.82.01, 81559'\n"
SUMMARY = """\
3 nodes: 3 check answers
asked: 2.6.0+cu124
✓ 2 of 3 nodes will work
✗ 1 node will not work: driver 470.82.01 < 525.60.13 for cu124; driver 470.82.01
    cannot run sm_90 (Hopper needs R520+): node3

Differ from the majority:
  GPU count 1 on node3 (2 have 0)
"""


def docs_block(marker):
    """The ```sh block of docs/cluster.md's SLURM section that contains ``marker``."""
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## SLURM\n"):text.index("## pdsh and clush")]
    blocks = [b.split("\n", 1)[1].split("```", 1)[0]
              for b in section.split("```sh")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, (marker, blocks)
    return found[0]


@pytest.fixture
def node_bins(cluster):
    """BIN on every host: ``envcheck`` (this checkout's), and on node3 only a fake
    nvidia-smi; PATH for the tasks with BIN first."""
    envcheck = os.path.join(os.path.dirname(sys.executable), "envcheck")
    assert os.path.exists(envcheck), envcheck
    for h in cluster.hosts:
        d = h.path(BIN)
        os.makedirs(d)
        os.symlink(envcheck, os.path.join(d, "envcheck"))
        if h.name == "node3":
            with open(os.path.join(d, "nvidia-smi"), "w") as f:
                f.write(SMI)
            os.chmod(os.path.join(d, "nvidia-smi"), 0o755)
    yield "%s:/usr/bin:/bin" % BIN
    for h in cluster.hosts:
        shutil.rmtree(h.path(BIN), ignore_errors=True)


def test_docs_srun_recipe_with_a_shared_filesystem(slurm, shared_dir, node_bins):
    out, outside = shared_dir
    block = docs_block("--json answers/$SLURMD_NODENAME.json")
    assert block.count("-N 64") == 1
    block = block.replace("-N 64", "-N 3")
    gather, summary = block.split("\nenvcheck summary", 1)
    env = launcher_env(ROOT, PATH=node_bins)
    proc = slurm.run(["bash", "-c", "cd %s && %s" % (out, gather)], env=env, timeout=120)
    # as the docs say: srun exits non-zero (node3 will not work), every file is written
    assert proc.returncode == 1, _explain(slurm, proc)
    assert _srun_exits(proc.stderr) == {"node3": {2: 1}}, proc.stderr
    assert sorted(os.listdir(os.path.join(outside, "answers"))) == [
        "node1.json", "node2.json", "node3.json"]
    proc = slurm.run(["bash", "-c", "cd %s && envcheck summary%s" % (out, summary)],
                     env=env, timeout=60)
    assert proc.returncode == 1, _explain(slurm, proc)
    assert proc.stdout == SUMMARY, proc.stdout


def test_docs_srun_recipe_without_a_shared_filesystem(slurm, cluster, node_bins):
    block = docs_block("--label").replace("-N 64", "-N 3")
    work = "/tmp/envcheck-answers-test"  # node1's own /tmp: not shared
    for h in cluster.hosts:
        os.makedirs(h.path(work))
    try:
        env = launcher_env(ROOT, PATH=node_bins)
        proc = slurm.run(["bash", "-c", "cd %s && %s" % (work, block)], env=env,
                         timeout=120)
        assert proc.returncode == 1, _explain(slurm, proc)  # the summary's: node3 fails
        assert proc.stdout == SUMMARY, proc.stdout
        answers = os.path.join(cluster.hosts[0].path(work), "answers")
        assert sorted(os.listdir(answers)) == [
            "stderr.txt", "task0.json", "task1.json", "task2.json"]
        for h in cluster.hosts[1:]:  # nothing was written on the other nodes
            assert os.listdir(h.path(work)) == []
    finally:
        for h in cluster.hosts:
            shutil.rmtree(h.path(work), ignore_errors=True)


def test_docs_healthcheck_drains_the_node_that_cannot_run_it(slurm, cluster, node_bins):
    if not slurm.mounted:
        pytest.skip("no /etc/slurm on this machine: the health check's scontrol cannot "
                    "find the test SLURM's slurm.conf")
    block = docs_block("SLURMD_NODENAME set")
    assert block.count("/opt/envcheck/bin") == 1
    node3 = cluster.hosts[2]
    smi = os.path.join(node3.path(BIN), "nvidia-smi")
    slurm.set_healthcheck(block.replace("/opt/envcheck/bin", BIN))
    try:
        # slurmd runs it when it starts: node3 (driver 470 under an H100) is drained
        # with envcheck's reason; node1 and node2 (no GPU: torch runs on CPU) stay idle
        slurm.restart_slurmd(*cluster.hosts)
        _wait_for(lambda: "DRAIN" in slurm.node("node3")["State"], slurm, "node3 drained")
        n3 = slurm.node("node3")
        assert n3["State"] == "IDLE+DRAIN", n3
        # the drain reason is the facts that decided it
        assert n3["Reason"].startswith(
            "envcheck: 2.6.0+cu124 will not work here: driver 470.82.01 < 525.60.13 for "
            "cu124; driver 470.82.01 cannot run sm_90 (Hopper needs R520+) [root@"), n3
        for name in ("node1", "node2"):
            n = slurm.node(name)
            assert n["State"] == "IDLE" and "Reason" not in n, n
        assert slurm.states() == {"node1": "idle", "node2": "idle", "node3": "drained"}
        # the driver fixed, the next check resumes the node it drained
        os.remove(smi)
        slurm.restart_slurmd(node3)
        _wait_for(lambda: slurm.node("node3")["State"] == "IDLE", slurm, "node3 resumed")
        assert "Reason" not in slurm.node("node3")
        # a broken nvidia-smi (envcheck exits 2) drains it too, with envcheck's error
        with open(smi, "w") as f:
            f.write("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not "
                    "communicate with the NVIDIA driver.'\nexit 9\n")
        os.chmod(smi, 0o755)
        slurm.restart_slurmd(node3)
        _wait_for(lambda: "DRAIN" in slurm.node("node3")["State"], slurm, "node3 drained")
        assert slurm.node("node3")["Reason"].startswith(
            "envcheck: error: nvidia-smi failed (exit 9): NVIDIA-SMI has failed"), \
            slurm.node("node3")
        os.remove(smi)
        slurm.restart_slurmd(node3)
        _wait_for(lambda: slurm.node("node3")["State"] == "IDLE", slurm, "node3 resumed")
    finally:
        from cluster.slurm import NOOP_HEALTHCHECK
        slurm.set_healthcheck(NOOP_HEALTHCHECK)
        if "DRAIN" in slurm.node("node3").get("State", ""):
            slurm.run(["scontrol", "update", "NodeName=node3", "State=RESUME"])


def _wait_for(ready, slurm, what, timeout=30.0):
    import time
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, "%s: not after %s s\n%s" % (
            what, timeout, slurm.logs(1500))
        time.sleep(0.2)


SQUAT = ("import socket, sys, time\n"
         "s = socket.socket()\n"
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "s.bind(('0.0.0.0', int(sys.argv[1])))\n"
         "s.listen(1)\n"
         "print('listening', flush=True)\n"
         "time.sleep(600)\n")


def test_a_taken_store_port_under_srun_ends_within_the_timeout(slurm, cluster, shared_dir):
    """MASTER_PORT already taken on rank 0's host (node1) by a process that listens and
    never answers: rank 0 cannot host the job's store, and says so at once; every other
    rank ends within --timeout 10 plus its last words' bounded connect, and rank 0's
    report names the port in use. (Issue #39: the job ignored --timeout 10 and gave its
    report after about 100 s.)"""
    import time

    out, outside = shared_dir
    port = next(_ports)
    squatter = cluster.hosts[0].popen([sys.executable, "-c", SQUAT, str(port)])
    try:
        assert squatter.stdout.readline().strip() == "listening"
        script = EXPORTS % port + (
            "srun -N2 --ntasks-per-node 2 %s -p launch --timeout 10" % _launched(out, ()))
        t0 = time.monotonic()
        proc = _salloc(slurm, 2, script)
        took = time.monotonic() - t0
    finally:
        squatter.kill()
        squatter.communicate()
    assert proc.returncode != 0, _explain(slurm, proc)
    # 10 s, the grace (2 s), a rank's stacks and its last words' connect (5 s), srun's
    # own start and teardown
    assert took < 45, (took, _explain(slurm, proc))
    with open(os.path.join(outside, "report.json"), encoding="utf-8") as f:
        report = validate_report(json.load(f))
    port_check = checks_by_id(report)["setup.master_port"]
    # rank 0's words, the cause (before: the other ranks' 'a firewall drops the port')
    assert (port_check["outcome"], port_check["root_rank"]) == ("failed", 0), port_check
    assert "MASTER_PORT %d is already taken on node1, where rank 0 hosts the job's store" \
        % port in port_check["detail"], port_check["detail"]
    assert port_check["advice"].startswith("give each job on a host its own port")

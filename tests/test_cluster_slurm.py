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
def shared_dir(cluster):
    """A fresh directory under /mnt/shared (every host's), removed after the test."""
    name = "slurm-%d" % next(_ports)
    outside = os.path.join(cluster.shared, name)
    os.makedirs(outside)
    yield "/mnt/shared/" + name, outside
    shutil.rmtree(outside, ignore_errors=True)


def _launched(out, probes=("launch", "collectives")):
    args = [sys.executable, "-m", "envcheck.worker.launched", "--out", out,
            "--json", out + "/report.json"]
    for p in probes:
        args += ["-p", p]
    return " ".join(args)


def _salloc(slurm, nodes, script, timeout=240):
    """``salloc -N nodes --ntasks-per-node 2 bash -c SCRIPT`` on node1, as a user would."""
    cmd = ["salloc", "-N%d" % nodes, "--ntasks-per-node", "2", "-J", "envcheck-test",
           "bash", "-c", script]
    return slurm.run(cmd, env=launcher_env(ROOT), timeout=timeout)


def _explain(slurm, proc):
    return "exit %s\nstdout:\n%s\nstderr:\n%s\n%s" % (
        proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:], slurm.logs(1500))


@pytest.mark.parametrize("nodes", [2, 3])
def test_srun_launcher_mode_across_hosts(slurm, shared_dir, nodes):
    out, outside = shared_dir
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


def test_srun_without_master_addr_every_rank_exits_2(slurm, shared_dir):
    out, outside = shared_dir
    env = launcher_env(ROOT, MASTER_PORT=str(next(_ports)))
    cmd = ["srun", "-N2", "--ntasks-per-node", "2"] + _launched(out).split()
    proc = slurm.run(cmd, env=env, timeout=120)
    assert proc.returncode == 2, _explain(slurm, proc)
    line = ("envcheck: error: MASTER_ADDR not set: under srun, export them before the "
            "step, e.g. export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
            "| head -n1) MASTER_PORT=29500")
    lines = proc.stderr.splitlines()
    assert lines.count(line) == 4, proc.stderr  # one line from each rank, nothing else
    assert not [l for l in lines if l.startswith("envcheck:") and l != line], proc.stderr
    assert "Traceback" not in proc.stderr
    # srun: every task on both nodes exited 2
    for node in ("node1", "node2"):
        assert "srun: error: %s: tasks %s: Exited with exit code 2" % (
            node, "0-1" if node == "node1" else "2-3") in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert os.listdir(outside) == []  # no rank got as far as its --out

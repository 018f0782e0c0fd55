"""The exclude list and the drain, end to end under the real slurmd (issue #36).

The test SLURM (tests/cluster/slurm.py: slurmctld on node1, a slurmd per host, munge),
node3's link degraded (tc's token bucket on its eth0: 200 Mbit/s, 50-100x below the
other links here). As an admin would: envcheck's launcher mode across the three hosts
under srun; ``envcheck report`` writes the failed hosts and the drain script from rank
0's report; the exclude list keeps a job off node3; the drain script, run with the real
scontrol, drains node3 with envcheck's reason (sinfo -R); the next job runs on the two
healthy hosts, and a job that needs three is refused. Runs in CI (root); elsewhere it
skips with one line.
"""

import contextlib
import json
import os
import shlex
import shutil
import sys

import pytest

from cluster.jobs import launcher_env
from conftest import ROOT, checks_by_id, validate_report
from test_cluster_slurm import EXPORTS, _explain, _ports, _wait_for

RATE = "200mbit"  # as tests/test_cluster_bandwidth.py: a link 50-100x slower


@contextlib.contextmanager
def degraded(host):
    """``host``'s sending link limited to RATE (tc tbf on its own eth0), removed after."""
    host.run(["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", RATE, "burst",
              "32kbit", "latency", "400ms"])
    try:
        yield
    finally:
        host.run(["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)


@pytest.fixture
def shared_out(cluster):
    """A fresh directory under /mnt/shared (every host's): (its path there, outside)."""
    name = "drain-%d" % next(_ports)
    outside = os.path.join(cluster.shared, name)
    os.makedirs(outside)
    yield "/mnt/shared/" + name, outside
    shutil.rmtree(outside, ignore_errors=True)


def _hosts_of(stdout):
    return sorted(line.strip() for line in stdout.splitlines() if line.strip())


@pytest.mark.cluster
def test_a_degraded_host_is_excluded_and_drained_by_the_real_slurmd(slurm, cluster,
                                                                   shared_out):
    if not slurm.mounted:
        pytest.skip("no /etc/slurm on this machine: scontrol on the hosts cannot find "
                    "the test SLURM's slurm.conf")
    out, outside = shared_out
    node3 = cluster.hosts[2]
    env = launcher_env(ROOT)
    envcheck = "%s -m envcheck" % sys.executable
    try:
        with degraded(node3):
            script = EXPORTS % next(_ports) + (
                "srun -N3 --ntasks-per-node 2 %s -m envcheck.worker.launched --out %s "
                "--json %s/report.json -p bandwidth" % (sys.executable, out, out))
            job = slurm.run(["salloc", "-N3", "--ntasks-per-node", "2", "--immediate=20",
                             "bash", "-c", script], env=env, timeout=240)
        assert job.returncode == 1, _explain(slurm, job)  # rank 0's: the report failed
        with open(os.path.join(outside, "report.json"), encoding="utf-8") as f:
            check = checks_by_id(validate_report(json.load(f)))["bandwidth.per_host"]
        assert check["outcome"] == "failed", check
        assert check["detail"].startswith("ranks 4,5 on node3: node3 sends at "), check

        # envcheck report: the exclude list and the drain script, from rank 0's report
        made = slurm.run(["bash", "-c", "cd %s && %s report report.json --failed-hosts "
                          "failed.txt --ready-hosts ready.txt --drain-script drain.sh"
                          % (out, envcheck)], env=env, timeout=120)
        assert made.returncode == 1, _explain(slurm, made)
        with open(os.path.join(outside, "failed.txt"), encoding="utf-8") as f:
            assert f.read() == "node3\n"
        with open(os.path.join(outside, "ready.txt"), encoding="utf-8") as f:
            assert f.read() == "node[1-2]\n"
        with open(os.path.join(outside, "drain.sh"), encoding="utf-8") as f:
            drains = [line for line in f.read().splitlines() if line.startswith("scontrol")]
        assert len(drains) == 1 and drains[0].startswith(
            "scontrol update NodeName=node3 State=DRAIN Reason="), drains
        reason = shlex.split(drains[0])[-1][len("Reason="):]
        assert reason.startswith("envcheck: bandwidth.per_host failed (unexpected): "
                                 "node3 sends at "), reason
        assert len(reason) <= 200 and reason.endswith("..."), reason  # scheduler's limit

        # the exclude list as docs/cluster.md uses it: a 2-node job lands beside node3
        for _ in range(3):
            excl = slurm.run(["bash", "-c", "cd %s && srun -N2 --exclude=./failed.txt "
                              "--immediate=20 hostname" % out], env=env, timeout=60)
            assert excl.returncode == 0, _explain(slurm, excl)
            assert _hosts_of(excl.stdout) == ["node1", "node2"], excl.stdout

        # the drain script, run with the real scontrol: node3 drained with the reason
        drained = slurm.run(["sh", os.path.join(out, "drain.sh")], env=env, timeout=60)
        assert drained.returncode == 0, _explain(slurm, drained)
        _wait_for(lambda: "DRAIN" in slurm.node("node3")["State"], slurm, "node3 drained")
        n3 = slurm.node("node3")
        assert n3["State"] == "IDLE+DRAIN", n3
        assert n3["Reason"].startswith(reason[:len("envcheck: bandwidth.per_host failed")])
        assert n3["Reason"].split(" [root@")[0] == reason, (n3["Reason"], reason)
        assert slurm.states() == {"node1": "idle", "node2": "idle", "node3": "drained"}
        sinfo = slurm.run(["sinfo", "-R", "-h", "-o", "%n|%E"], env=env, timeout=30)
        assert sinfo.stdout.splitlines() == ["node3|%s" % reason], sinfo.stdout

        # the next jobs skip it: with no --exclude, -N2 runs on node1 and node2 (every
        # time), and a job that needs three nodes cannot start
        for _ in range(3):
            nxt = slurm.run(["srun", "-N2", "--immediate=20", "hostname"], env=env,
                            timeout=60)
            assert nxt.returncode == 0, _explain(slurm, nxt)
            assert _hosts_of(nxt.stdout) == ["node1", "node2"], nxt.stdout
        three = slurm.run(["srun", "-N3", "--immediate=5", "hostname"], env=env,
                          timeout=60)
        assert three.returncode != 0 and three.stdout == "", _explain(slurm, three)
    finally:
        if "DRAIN" in slurm.node("node3").get("State", ""):
            slurm.run(["scontrol", "update", "NodeName=node3", "State=RESUME"])

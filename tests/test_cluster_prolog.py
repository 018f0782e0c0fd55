"""docs/cluster.md's prolog and probe-running HealthCheckProgram, run by the real slurmd
(issue #36): a node that fails is drained with envcheck's reason, and the next job
skips it.

Each script is taken from docs/cluster.md ("Hand the answer to SLURM") as written; only
``/opt/envcheck/bin`` (where envcheck is) and ``/var/lib/envcheck`` (the node's own
state: here each host's private /tmp) are replaced. node3 is given the lowest Weight, so
that a 2-node job lands on it unless it is drained. The prolog needs ``Prolog=`` and
``PrologFlags=Alloc`` in slurm.conf: the test adds them, reconfigures slurmctld and
restarts every slurmd, and puts the session's slurm.conf back the same way. Runs in CI
(root); elsewhere it skips with one line.
"""

import contextlib
import os
import shutil
import sys

import pytest

from cluster.jobs import launcher_env
from cluster.slurm import ETC, NOOP_HEALTHCHECK
from conftest import ROOT
from test_cluster_slurm import BIN, DOCS, _explain, _wait_for
from test_cluster_slurm import node_bins  # noqa: F401 (a fixture: envcheck, node3's GPU)

STATE = "/tmp/envcheck-state"  # the recipes' /var/lib/envcheck, on each host's own /tmp
PROLOG = "envcheck-prolog.sh"


def hand_block(marker):
    """The ```sh block of docs/cluster.md's "Hand the answer to SLURM" that holds
    ``marker``, with only the install and state paths replaced."""
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Hand the answer to SLURM"):text.index("## Kubernetes")]
    blocks = [b.split("\n", 1)[1].split("```", 1)[0] for b in section.split("```sh")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, (marker, blocks)
    block = found[0]
    assert block.count("/opt/envcheck/bin") == 1 and block.count("/var/lib/envcheck") == 1
    return block.replace("/opt/envcheck/bin", BIN).replace("/var/lib/envcheck", STATE)


def _reconfigure(slurm, cluster):
    proc = slurm.run(["scontrol", "reconfigure"], timeout=30)
    assert proc.returncode == 0, _explain(slurm, proc)
    slurm.restart_slurmd(*cluster.hosts)
    slurm.wait_idle(30.0)


@contextlib.contextmanager
def prolog(slurm, cluster, text):
    """``text`` as every host's /etc/slurm/envcheck-prolog.sh, slurm.conf's Prolog;
    the session's slurm.conf back after."""
    path = os.path.join(slurm.etc, PROLOG)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    with open(slurm.conf, encoding="utf-8") as f:
        conf = f.read()
    with open(slurm.conf, "a", encoding="utf-8") as f:
        f.write("Prolog=%s/%s\nPrologFlags=Alloc\n" % (ETC, PROLOG))
    try:
        _reconfigure(slurm, cluster)
        yield
    finally:
        resume(slurm, "node3")
        with open(slurm.conf, "w", encoding="utf-8") as f:
            f.write(conf)
        _reconfigure(slurm, cluster)
        os.remove(path)


@contextlib.contextmanager
def node3_first(slurm):
    """node3 the scheduler's first choice (the lowest Weight), as it was after."""
    for name, weight in (("node1", 2), ("node2", 2), ("node3", 1)):
        slurm.run(["scontrol", "update", "NodeName=%s" % name, "Weight=%d" % weight],
                  check=True)
    try:
        yield
    finally:
        for name in ("node1", "node2", "node3"):
            slurm.run(["scontrol", "update", "NodeName=%s" % name, "Weight=1"])


def resume(slurm, name):
    if "DRAIN" in slurm.node(name).get("State", ""):
        slurm.run(["scontrol", "update", "NodeName=%s" % name, "State=RESUME"])


def _hosts_of(proc):
    return sorted(line.strip() for line in proc.stdout.splitlines() if line.strip())


def _next_jobs_skip_node3(slurm):
    """The next 2-node jobs run on node1 and node2, every time; 3 nodes cannot start."""
    env = launcher_env(ROOT)
    for _ in range(3):
        nxt = slurm.run(["srun", "-N2", "--immediate=20", "hostname"], env=env, timeout=60)
        assert nxt.returncode == 0, _explain(slurm, nxt)
        assert _hosts_of(nxt) == ["node1", "node2"], nxt.stdout
    three = slurm.run(["srun", "-N3", "--immediate=5", "hostname"], env=env, timeout=60)
    assert three.returncode != 0 and three.stdout == "", _explain(slurm, three)


def _sinfo_reasons(slurm):
    proc = slurm.run(["sinfo", "-R", "-h", "-o", "%n|%E"], timeout=30)
    return proc.stdout.splitlines()


@pytest.mark.cluster
def test_docs_prolog_drains_its_node_and_the_job_skips_it(slurm, cluster, node_bins):  # noqa: F811
    if not slurm.mounted:
        pytest.skip("no /etc/slurm on this machine: the prolog's scontrol cannot find "
                    "the test SLURM's slurm.conf")
    # node3: an H100 under driver 470 (node_bins' nvidia-smi), which cannot run
    # torch==2.6.0+cu124; node1 and node2 have no GPU (torch on CPU: will work)
    reason = ("envcheck: driver 470.82.01 < 525.60.13 for cu124; driver 470.82.01 "
              "cannot run sm_90 (Hopper needs R520+)")
    env = launcher_env(ROOT)
    with prolog(slurm, cluster, hand_block("prolog.d/envcheck.sh")), node3_first(slurm):
        # the first 2-node job is given node3 (and node1): node3's prolog fails, the
        # job is cancelled (srun's cannot be requeued) with no task run on node3, and
        # node3 is drained with envcheck's reason (the prolog's; slurmd's drain keeps
        # it). node1's task may start in the instant before the cancel reaches node1:
        # slurmctld let the step through as node3's prolog reported (exit 168, "node1"
        # on stdout, once in a CI run), so only node3's part is the test's
        first = slurm.run(["srun", "-N2", "--immediate=20", "hostname"], env=env,
                          timeout=120)
        assert first.returncode != 0 and first.stdout in ("", "node1\n"), \
            _explain(slurm, first)
        assert "Prolog failure on node node3" in first.stderr, _explain(slurm, first)
        _wait_for(lambda: "DRAIN" in slurm.node("node3")["State"], slurm, "node3 drained")
        n3 = slurm.node("node3")
        assert n3["Reason"].split(" [root@")[0] == reason, (n3, _explain(slurm, first))
        assert _sinfo_reasons(slurm) == ["node3|%s" % reason]
        for name in ("node1", "node2"):
            n = slurm.node(name)
            assert "DRAIN" not in n["State"] and "Reason" not in n, n
        # the prolog ran as the docs say: node3's answer and drain script, on node3
        assert sorted(os.listdir(cluster.hosts[2].path(STATE))) == ["check.json", "drain.sh"]
        assert os.listdir(cluster.hosts[0].path(STATE)) == ["check.json"]
        _next_jobs_skip_node3(slurm)
    for h in cluster.hosts:
        shutil.rmtree(h.path(STATE), ignore_errors=True)


@pytest.fixture
def envcheck_bin(cluster):
    """BIN on every host: this checkout's ``envcheck``, nothing else."""
    envcheck = os.path.join(os.path.dirname(sys.executable), "envcheck")
    assert os.path.exists(envcheck), envcheck
    for h in cluster.hosts:
        os.makedirs(h.path(BIN))
        os.symlink(envcheck, os.path.join(h.path(BIN), "envcheck"))
    yield
    for h in cluster.hosts:
        shutil.rmtree(h.path(BIN), ignore_errors=True)
        shutil.rmtree(h.path(STATE), ignore_errors=True)


@contextlib.contextmanager
def small_shm(host, size="16m"):
    """A ``size`` tmpfs on ``host``'s /dev/shm (its private mount namespace), removed
    after: Docker's default is 64 MiB, and NCCL's SHM transport needs more."""
    host.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", "/dev/shm"])
    try:
        yield
    finally:
        host.run(["umount", "/dev/shm"], check=False)


@pytest.mark.cluster
def test_docs_run_healthcheck_drains_its_node_and_the_job_skips_it(slurm, cluster,
                                                                   envcheck_bin):
    if not slurm.mounted:
        pytest.skip("no /etc/slurm on this machine: the health check's scontrol cannot "
                    "find the test SLURM's slurm.conf")
    node3 = cluster.hosts[2]
    slurm.set_healthcheck(hand_block("envcheck-run-healthcheck.sh"))
    try:
        with node3_first(slurm):
            with small_shm(node3):
                # slurmd runs it when it starts: node3's ranks find /dev/shm at 16 MiB
                slurm.restart_slurmd(*cluster.hosts)
                _wait_for(lambda: "DRAIN" in slurm.node("node3")["State"], slurm,
                          "node3 drained", timeout=90)
                n3 = slurm.node("node3")
                assert n3["State"] == "IDLE+DRAIN", n3
                reason = n3["Reason"].split(" [root@")[0]
                assert reason.startswith(
                    "envcheck: hosts.shm failed (unexpected): /dev/shm on node3 is 16 MiB "
                    "(16 MiB free): at most Docker's 64 MiB default"), n3
                assert len(reason) == 200 and reason.endswith("..."), reason  # the limit
                assert _sinfo_reasons(slurm) == ["node3|%s" % reason]
                for name in ("node1", "node2"):
                    n = slurm.node(name)
                    assert n["State"] == "IDLE" and "Reason" not in n, n
                _next_jobs_skip_node3(slurm)
            # /dev/shm back to the machine's: the next check puts node3 back, and the
            # next 2-node job is given node3 again
            slurm.restart_slurmd(node3)
            _wait_for(lambda: slurm.node("node3")["State"] == "IDLE", slurm,
                      "node3 resumed", timeout=90)
            assert "Reason" not in slurm.node("node3")
            back = slurm.run(["srun", "-N2", "--immediate=20", "hostname"],
                             env=launcher_env(ROOT), timeout=60)
            assert back.returncode == 0 and "node3" in _hosts_of(back), \
                _explain(slurm, back)
    finally:
        slurm.set_healthcheck(NOOP_HEALTHCHECK)
        resume(slurm, "node3")

"""Launcher mode: what a rank starts ends with the job, however torchrun ends it (issue
#39; launch/enclosure.py). Each rank's probe starts three helpers, each hidden deeper:
a plain child, a child in a session of its own (``setsid``), and one in its own session
with an empty environment (``setsid env -i``, no marker). Then torchrun is sent a real
SIGTERM (a scheduler's cancel) or SIGKILL, mid-probe. Under plain torchrun the first
helper dies with its rank's process group; before the enclosure, under envcheck's
launcher mode all three of every rank were left with ppid 1 (the host zygote's fork is a
session of its own), and after a SIGKILL the ranks themselves were left too."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import launcher_env, starts_ranks
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks  # every test here starts real ranks

SPAWNY = '''
CHECKS = ("spawn",)


def probe_spawny(ctx):
    """every rank starts three helpers, each hidden deeper, then waits to be stopped"""
    import os
    import subprocess
    import time

    with ctx.check("spawn"):
        tag = os.environ["SPAWNY_TAG"]
        subprocess.Popen(["sleep", tag + "1"])
        subprocess.Popen(["setsid", "sleep", tag + "2"])
        subprocess.Popen(["setsid", "env", "-i", "sleep", tag + "3"])
        open(os.path.join(os.environ["SPAWNY_DIR"], "rank%d" % ctx.rank), "w").close()
        time.sleep(600)
'''


def _cmdlines():
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                found[int(name)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def _left(needles, seconds):
    """The processes whose command line holds one of ``needles``, still there after
    ``seconds`` (polled: a clean end is seen as soon as it happens)."""
    deadline = time.monotonic() + seconds
    while True:
        left = {pid: line for pid, line in _cmdlines().items()
                if any(n in line for n in needles)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.mark.parametrize("sig, ranks, cgroup", [
    ("SIGTERM", 2, "1"),  # ranks forked by the host zygote, each in a cgroup of its own
    ("SIGTERM", 2, "0"),  # no cgroup: the marker and the zygote as subreaper
    ("SIGTERM", 1, "0"),  # one rank, forked by its watcher: the watcher as subreaper
    ("SIGKILL", 2, "1"),  # torchrun killed: the watchers see their launcher gone
])
def test_nothing_a_rank_started_outlives_torchrun(tmp_path, sig, ranks, cgroup):
    starts_ranks("torchrun")
    probe = tmp_path / "spawny.py"
    probe.write_text(SPAWNY)
    flags = tmp_path / "flags"
    flags.mkdir()
    tag = "9%07d" % ((os.getpid() * 31 + ranks * 7 + len(sig) + int(cgroup)) % 10 ** 7)
    env = launcher_env(SPAWNY_TAG=tag, SPAWNY_DIR=str(flags), ENVCHECK_CGROUP=cgroup)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", str(ranks), "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % free_port(), "-m", "envcheck.worker.launched",
           "--out", str(tmp_path / "out"), "-p", "spawny", "--probe-path", str(probe),
           "--timeout", "300"]
    # The agent's output to a file: a helper left behind would hold a pipe open.
    log_path = tmp_path / "agent.log"
    with open(log_path, "w") as log_file:
        agent = subprocess.Popen(cmd, cwd=str(tmp_path), env=env, stdout=log_file,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(flags)) < ranks:
            assert time.monotonic() < deadline and agent.poll() is None, \
                log_path.read_text()[-3000:]
            time.sleep(0.1)
        # all started, all seen: a helper mid-exec (setsid -> env -> sleep) can show
        # an empty command line for a moment (a full suite's run once saw 5 of 6)
        seen = time.monotonic() + 10
        while len(_left([tag], 0)) < 3 * ranks and time.monotonic() < seen:
            time.sleep(0.1)
        helpers = _left([tag], 0)
        assert len(helpers) == 3 * ranks, helpers
        agent.send_signal(getattr(signal, sig))
        agent.wait(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    # The watchers end their ranks within their teardown (torch elastic's 30 s grace),
    # or, the agent killed, as soon as they see it gone.
    left = _left([tag, str(tmp_path / "out")], 45)
    for pid in left:  # not to be left by this test either
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    log = log_path.read_text()
    assert not left, (left, log[-3000:])
    if sig == "SIGKILL":
        assert "the launcher (pid %d) is gone: ending the rank" % agent.pid in log, log


STOP_IN_ZYGOTE = '''
import os
with open("/proc/self/cmdline", "rb") as _f:
    if b"envcheck.launch.forkserver" in _f.read():
        import signal
        open(os.environ["STOPPED_FLAG"], "w").write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)  # stopped before any of its own code ran
'''


def test_a_host_zygote_stopped_early_in_its_life_ends_with_the_job(tmp_path):
    """The host zygote stopped (SIGSTOP) as its interpreter starts, before its own code
    runs (a sitecustomize stops it there): each rank forks itself after looking for the
    zygote, the job passes, and the zygote ends with local rank 0's watcher. (Before: its
    death-with-parent was set by its own code, after that point: it was left in state T
    with ppid 1.)"""
    starts_ranks("torchrun")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STOP_IN_ZYGOTE)
    flag = tmp_path / "stopped"
    env = launcher_env(STOPPED_FLAG=str(flag))
    env["PYTHONPATH"] = os.pathsep.join((str(site), env["PYTHONPATH"]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % free_port(), "-m", "envcheck.worker.launched",
           "--out", str(tmp_path / "out"), "-p", "collectives", "--timeout", "60"]
    log = tmp_path / "agent.log"  # not a pipe: a zygote left behind would hold it open
    with open(log, "w") as f:
        agent = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=f,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               timeout=240)
    assert agent.returncode == 0, log.read_text()[-3000:]
    zygote = int(flag.read_text())
    left = _left(["envcheck.launch.forkserver"], 10)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert zygote not in left and not left, left

"""Under torchrun, one import of torch per host (worker/hostzygote.py): local rank 0's
process starts the host's zygote, which imports torch once and forks every local rank for
that rank's own process, its watcher. Real torchrun, gloo on CPU."""

import pytest

import json
import os
import signal
import stat
import sys
import time

from conftest import STUCK, checks_by_id, load_report, torchrun
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks  # every test here starts real ranks


def _hellos(out, ranks):
    found = {}
    for rank in range(ranks):
        with open(os.path.join(out, "records-rank%d.jsonl" % rank)) as f:
            found[rank] = next(r for r in map(json.loads, f) if r["t"] == "hello")
    return found


def _gone(pid, seconds=10.0):
    """Has ``pid`` ended (or is it a zombie nobody reaped yet), within ``seconds``?"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_three_local_ranks_share_one_import_of_torch_and_nothing_outlives_the_job(tmp_path):
    out = tmp_path / "out"
    agent = torchrun(sys.executable, 1, 0, 3, free_port(),
                     ["--out", str(out), "--json", str(tmp_path / "r.json"), "-p", "launch",
                      "--timeout", "60"], str(tmp_path), "nodeA")
    stdout, stderr = agent.communicate(timeout=120)
    assert agent.returncode == 0, stderr
    hellos = _hellos(out, 3)
    zygotes = {h.get("zygote_pid") for h in hellos.values()}
    assert len(zygotes) == 1 and None not in zygotes, hellos  # one for the host
    zygote = zygotes.pop()
    assert zygote not in {h["pid"] for h in hellos.values()}
    assert _gone(zygote)
    for h in hellos.values():
        assert _gone(h["pid"])
    report = load_report(str(tmp_path / "r.json"))
    assert checks_by_id(report)["launch.rank_mapping"]["outcome"] == "passed"
    # the import the ranks share is the import the report shows, every rank the same
    imports = {r["rank"]: h["torch_import_s"] for r, h in
               ((r, hellos[r["rank"]]) for r in report["ranks"])}
    assert len(set(imports.values())) == 1, imports


def _wrapper(tmp_path, line):
    """A script torchrun starts for each rank (--no-python), in front of envcheck."""
    path = tmp_path / "wrap.sh"
    path.write_text("#!/bin/sh\n%s\nexec %s -m envcheck.worker.launched \"$@\"\n"
                    % (line, sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_rank_whose_environment_differs_imports_torch_itself(tmp_path):
    """A wrapper that exports a variable of its own per local rank: torch might read it
    as it imports, so each rank imports torch itself, and the job passes as before. With
    ENVCHECK_SHARED_IMPORT=0 on the other agent, neither asks the zygote."""
    import subprocess

    from conftest import launcher_env

    port = free_port()
    out = tmp_path / "out"
    wrap = _wrapper(tmp_path, "export OMP_PLACES=\"{$LOCAL_RANK}\"")
    agents = []
    for node, extra in ((0, {}), (1, {"ENVCHECK_SHARED_IMPORT": "0"})):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--node-rank", str(node), "--nproc-per-node", "2", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "envcheck-zygote",
               "--no-python"] + ([wrap] if node == 0 else [sys.executable, "-m",
                                                           "envcheck.worker.launched"]) + [
               "--out", str(out), "-p", "launch", "--timeout", "60"]
        agents.append(subprocess.Popen(
            cmd, cwd=str(tmp_path), env=launcher_env(ENVCHECK_HOST="node%d" % node, **extra),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL))
    results = [a.communicate(timeout=120) for a in agents]
    assert [a.returncode for a in agents] == [0, 0], results
    hellos = _hellos(out, 4)
    # node0: rank 0 has local rank 0's environment, the zygote's, and is forked by it;
    # rank 1 (OMP_PLACES={1}) is refused. node1: no zygote at all.
    assert [h.get("zygote_pid") is not None for h in hellos.values()] == [
        True, False, False, False], hellos
    assert "nothing unexpected" in results[0][0]


def test_a_watcher_killed_takes_its_rank_with_it(tmp_path):
    """torchrun's process for local rank 1 (its watcher) is SIGKILLed while rank 1 sleeps
    in a probe: the zygote, the rank's parent, kills the rank at once; torchrun then ends
    the job, and no process of it is left."""
    probe = tmp_path / "stuck.py"
    probe.write_text(STUCK)
    out = tmp_path / "out"
    agent = torchrun(sys.executable, 1, 0, 2, free_port(),
                     ["--out", str(out), "-p", "stuck", "--probe-path", str(probe),
                      "--timeout", "60"], str(tmp_path), "nodeA")
    try:
        rank1 = out / "records-rank1.jsonl"
        deadline = time.monotonic() + 120
        while not (rank1.exists() and b'"probe_start"' in rank1.read_bytes()):
            assert time.monotonic() < deadline and agent.poll() is None, agent.communicate()
            time.sleep(0.1)
        hellos = _hellos(out, 2)
        watchers = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                    if _parent(pid) == agent.pid and _local_rank(pid) == "1"]
        assert len(watchers) == 1, watchers
        os.kill(watchers[0], signal.SIGKILL)
        assert _gone(hellos[1]["pid"]), "rank 1 outlived its watcher"
        _, stderr = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()
    assert agent.returncode == 1, stderr
    for pid in (hellos[0]["pid"], hellos[0]["zygote_pid"]):
        assert _gone(pid), "left after the job: %d" % pid


def _parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _local_rank(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    except OSError:
        return None
    return env.get(b"LOCAL_RANK", b"").decode()


# In the host's zygote only: its import of torch never ends, as on a stalled filesystem.
STALLED_IMPORT = '''
import sys, time
with open("/proc/self/cmdline", "rb") as _f:
    _cmd = _f.read()
    if b"envcheck.launch.forkserver" in _cmd and b"--listen" in _cmd:
        class _Stall:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    time.sleep(3600)
        sys.meta_path.insert(0, _Stall())
'''


def test_a_zygote_stuck_importing_torch_leaves_each_rank_to_import_it_itself(tmp_path):
    """The watchers wait for the zygote's reply no longer than --startup-timeout; then
    each forks its rank itself, which imports torch with a startup timeout of its own,
    and the job passes. The stuck zygote ends with local rank 0's process. 12 s: a rank's
    import of torch took over 4 s beside another test's ranks (no progress for 4.0 s in
    startup, exit 124), and the zygote would stall for an hour."""
    import subprocess

    from conftest import launcher_env

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STALLED_IMPORT)
    out = tmp_path / "out"
    env = launcher_env()
    env["PYTHONPATH"] = os.pathsep.join((str(site), env["PYTHONPATH"]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % free_port(), "-m", "envcheck.worker.launched", "--out", str(out),
           "-p", "launch", "--timeout", "30", "--startup-timeout", "12"]
    t0 = time.monotonic()
    agent = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
    took = time.monotonic() - t0
    assert agent.returncode == 0, agent.stderr
    assert [h.get("zygote_pid") for h in _hellos(out, 2).values()] == [None, None]
    assert took < 60, took  # not the zygote's hour
    deadline = time.monotonic() + 10
    while [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
           if b"envcheck.launch.forkserver" in _cmdline(p)
           and str(site).encode() in _environ(p)]:
        assert time.monotonic() < deadline, "the zygote outlived the job"
        time.sleep(0.1)


def _proc_file(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read()
    except OSError:
        return b""


def _cmdline(pid):
    return _proc_file(pid, "cmdline")


def _environ(pid):
    return _proc_file(pid, "environ")

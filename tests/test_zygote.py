"""Ranks forked by a zygote that imported torch once: each still its own session and
process group, a child of envcheck (so exit codes and signals are read as before), with
its own environment; a --python wrapper script still runs once per rank."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, checks_by_id, leftovers, load_report, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks

PROBES = '''
CHECKS = ("where",)


def probe_whoami(ctx):
    """what this rank's process looks like from the inside"""
    import json
    import os

    with ctx.check("where") as c:
        c.data = {"pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
                  "ppid": os.getppid(), "rank_env": os.environ.get("RANK"),
                  "faulthandler": __import__("faulthandler").is_enabled()}
        with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
            c.data["parent"] = f.read().decode().split(chr(0))[1:4]
        c.detail = json.dumps(c.data)
'''


def _run(tmp_path, *args, env=None):
    probes = tmp_path / "whoami.py"
    probes.write_text(PROBES)
    report = tmp_path / "r.json"
    result = run_cli("run", "--probe-path", str(probes), "-p", "whoami", "--json",
                     str(report), "-q", *args, env=env, timeout=300)
    assert result.code == 0, result.stdout + result.stderr
    data = load_report(report)
    where = checks_by_id(data)["whoami.where"]["ranks"]
    return data, {int(r): e["data"] for r, e in where.items()}


def _start(args, marker, **env):
    """``python -m envcheck ARGS`` with the test marker (and ``env``) in its environment."""
    return subprocess.Popen([sys.executable, "-m", "envcheck", *args], cwd=ROOT,
                            env=dict(os.environ, ENVCHECK_TEST_MARKER=marker, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _zygote_of(marker, proc):
    """The PID of the run's zygote, once it exists (None if envcheck ended first)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for pid in leftovers(marker):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if b"envcheck.launch.forkserver" in f.read():
                        return pid
            except OSError:
                continue
        time.sleep(0.005)
    return None


def _starts(data):
    return [phases[0] for phases in data["attempts"][0]["timing"]["ranks"].values()]


def test_forked_ranks_are_sessions_of_their_own_and_children_of_envcheck(tmp_path):
    data, ranks = _run(tmp_path, "--nproc", "3")
    assert [s["forked"] for s in _starts(data)] == [True, True, True]
    # One import for all: every rank reports the zygote's.
    assert len({s["import_torch_s"] for s in _starts(data)}) == 1
    assert sorted(ranks) == [0, 1, 2]
    assert len({r["ppid"] for r in ranks.values()}) == 1
    for rank, r in ranks.items():
        # envcheck itself (the subreaper), not the zygote that forked them and exited.
        assert r["parent"] == ["-m", "envcheck", "run"]
        assert r["sid"] == r["pgid"] == r["pid"]
        assert r["rank_env"] == str(rank)
        assert r["faulthandler"] is True


def test_the_first_zygote_starts_before_the_options_are_parsed(tmp_path):
    """The head start: the first attempt's zygote began importing torch before the run was
    planned, unless --python names the interpreter (known only once resolved)."""
    data, _ = _run(tmp_path)
    timing = data["attempts"][0]["timing"]
    assert timing["prepared"] < timing["started"]
    assert [s["forked"] for s in _starts(data)] == [True, True]
    data, _ = _run(tmp_path, "--python", sys.executable)
    timing = data["attempts"][0]["timing"]
    assert "prepared" not in timing
    assert [s["forked"] for s in _starts(data)] == [True, True]


def test_a_head_start_not_taken_leaves_nothing_behind(tmp_path):
    """Bad input found after the head start began: exit 2, one line, and neither its
    zygote nor the run's directory outlives envcheck."""
    marker = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    result = run_cli("run", "--nproc", "0", env={"ENVCHECK_TEST_MARKER": marker,
                                                  "TMPDIR": str(tmpdir)})
    assert result.code == 2
    assert result.stderr == "envcheck: error: --nproc 0: need at least 1 rank\n"
    assert leftovers(marker) == []
    assert os.listdir(tmpdir) == []


def test_without_the_zygote_every_rank_is_its_own_interpreter(tmp_path):
    data, ranks = _run(tmp_path, env={"ENVCHECK_ZYGOTE": "0"})
    assert [s["forked"] for s in _starts(data)] == [False, False]
    assert all(r["sid"] == r["pid"] for r in ranks.values())


def test_a_python_wrapper_script_runs_once_per_rank(tmp_path):
    """A wrapper may do something per rank (here: note its RANK): it is not forked."""
    seen = tmp_path / "seen"
    seen.mkdir()
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\n[ -n "$RANK" ] && touch "%s/rank-$RANK"\nexec "%s" "$@"\n'
                       % (seen, sys.executable))
    wrapper.chmod(0o755)
    data, _ = _run(tmp_path, "--python", str(wrapper))
    assert sorted(os.listdir(seen)) == ["rank-0", "rank-1"]
    assert [s["forked"] for s in _starts(data)] == [False, False]


def test_a_zygote_killed_while_importing_torch_leaves_the_ranks_to_start_alone(tmp_path):
    """SIGKILL of the zygote before it forked: the attempt starts each rank the usual way
    and the run completes, with nothing left behind."""
    probes = tmp_path / "whoami.py"
    probes.write_text(PROBES)
    report = tmp_path / "r.json"
    marker = uuid.uuid4().hex
    proc = _start(["run", "--probe-path", str(probes), "-p", "whoami", "--json", str(report),
                   "-q"], marker)
    killed = _zygote_of(marker, proc)
    if killed:
        os.kill(killed, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert killed, "never saw the zygote"
    assert proc.returncode == 0, out + err
    data = load_report(report)
    assert [s["forked"] for s in _starts(data)] == [False, False]
    assert checks_by_id(data)["whoami.where"]["outcome"] == "passed"
    assert leftovers(marker) == []


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.4, 1.0])
def test_sigterm_while_the_head_start_imports_torch_leaves_nothing(tmp_path, delay):
    """SIGTERM once the head start's zygote exists, and ``delay`` seconds later (envcheck
    is then importing its CLI, parsing its options, planning, or watching the ranks
    start): exit 143, and no process or directory of the run is left."""
    marker = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = _start(["run", "-q"], marker, TMPDIR=str(tmpdir))
    assert _zygote_of(marker, proc), "never saw the zygote"
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out + err
    assert leftovers(marker) == []
    assert os.listdir(tmpdir) == []


def _catches(pid, sig):
    """Has process PID a handler of its own for SIG (SigCgt in /proc/PID/status)?"""
    try:
        with open("/proc/%d/status" % pid) as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (sig - 1)))


@pytest.mark.parametrize("sig,code,line", [
    (signal.SIGINT, 130, "envcheck: interrupted\n"),
    (signal.SIGTERM, 143, "envcheck: stopped by SIGTERM\n")])
@pytest.mark.parametrize("delay", [0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1,
                                   0.2, 0.4, 0.8])
def test_a_signal_at_any_instant_of_a_run_exits_without_a_traceback(tmp_path, delay, sig,
                                                                     code, line):
    """Ctrl-C (or SIGTERM) ``delay`` seconds after envcheck's first line ran (it then
    handles SIGTERM: the interpreter's own start, before any line of envcheck, is not
    envcheck's to handle). It may land while envcheck imports its head start or its CLI
    (inside an import, where Python would swallow or rewrap a KeyboardInterrupt), makes
    the run's directory, starts the zygote, plans, or watches the ranks start: always
    130 (143), one line at most and no traceback, no process and no directory left."""
    marker = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = _start(["run", "-p", "launch", "-q"], marker, TMPDIR=str(tmpdir))
    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.0005)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err in ("", line), err  # "": the supervisor took it (a partial report)
    assert leftovers(marker) == []
    assert os.listdir(tmpdir) == []


SLOW_TORCH = """
import sys, time
with open("/proc/self/cmdline", "rb") as f:
    if b"envcheck.launch.forkserver" in f.read():
        class SlowTorch:  # a cold shared filesystem: importing torch takes a minute
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    time.sleep(60)
        sys.meta_path.insert(0, SlowTorch())
"""


def test_sigkill_while_the_head_start_imports_torch_leaves_no_process(tmp_path):
    """Nothing runs in envcheck after SIGKILL, and no rank holds a lifeline yet: the
    zygote, a minute from done importing torch, dies with it (PR_SET_PDEATHSIG); the
    run's directory goes with the next run."""
    marker = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_TORCH)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    proc = _start(["run", "-q"], marker, TMPDIR=str(tmpdir), PYTHONPATH=path)
    assert _zygote_of(marker, proc), "never saw the zygote"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(marker) == []
    left = os.listdir(tmpdir)
    assert len(left) == 1 and left[0].startswith("envcheck-run-%d-" % proc.pid)
    result = run_cli("run", "-p", "launch", "-q", env={"TMPDIR": str(tmpdir)})
    assert result.code == 0, result.stdout + result.stderr
    assert os.listdir(tmpdir) == []

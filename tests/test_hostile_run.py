"""envcheck run in a broken or hostile environment (issue 28): never a wrong kill, nothing
left behind, a zygote that may die at any instant, closed standard streams, resource
limits. Every fault is real: real stray output on the zygote's stdout, a real SIGKILL of
the zygote right after its first fork, a real daemon, real closed fds, real ulimits."""

import os
import resource
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, checks_by_id, load_report

pytestmark = pytest.mark.ranks  # every test here starts real ranks

# Runs only in the zygote (python -m envcheck.launch.forkserver), from a sitecustomize on
# the PYTHONPATH envcheck passes on: before torch is imported, like a noisy library would.
IN_ZYGOTE = '''
import os
with open("/proc/self/cmdline", "rb") as _f:
    _ZYGOTE = b"envcheck.launch.forkserver" in _f.read()
'''


def _envcheck(args, tmp_path, site=None, env=None, preexec_fn=None, timeout=300, **kw):
    full_env = dict(os.environ)
    full_env.pop("SLURM_PROCID", None)
    if site is not None:
        (tmp_path / "site").mkdir(exist_ok=True)
        (tmp_path / "site" / "sitecustomize.py").write_text(IN_ZYGOTE + site)
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    full_env.update(env or {})
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=ROOT,
                          preexec_fn=preexec_fn, **kw)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_a_stray_line_shaped_like_a_fork_report_kills_nothing(tmp_path):
    """Lines in the zygote that name a process envcheck never started (a decoy in its own
    session): on its stdout ('RANK PID', the shape of the old protocol: no longer the
    channel) and, forged, on the very socket it answers on ('{"pid": DECOY, "id": 0}'):
    the decoy survives, the run passes, and the forged reply is a note. (Before:
    envcheck SIGKILLed the decoy's process group.)"""
    decoy = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        report = tmp_path / "r.json"
        site = ("if _ZYGOTE:\n"
                "    os.write(1, b'7 %d\\n0 %d\\n1 1\\nnoise from a library\\n')\n"
                "    _args = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
                "    _fd = int(_args[_args.index(b'--fd') + 1])\n"
                "    os.write(_fd, b'{\"pid\": %d, \"id\": 0}\\n{\"pid\": 1, \"id\": 1}\\n"
                "noise from a library\\n')\n"
                % (decoy.pid, decoy.pid, decoy.pid))
        proc = _envcheck(["run", "-p", "collectives", "-q", "--json", str(report)],
                         tmp_path, site=site)
        assert _alive(decoy.pid), "envcheck killed a process it did not start"
        assert proc.returncode == 0, proc.stdout + proc.stderr
        data = load_report(report)
        assert checks_by_id(data)["collectives.all_reduce"]["outcome"] == "passed"
        # the ranks are the zygote's own forks, not the forged PIDs
        starts = [p[0] for p in data["attempts"][0]["timing"]["ranks"].values()]
        assert [s["forked"] for s in starts] == [True, True]
        notes = " ".join(data["plan"]["notes"])
        assert "not its protocol" in notes and "noise from a library" in notes
        assert str(decoy.pid) in notes
    finally:
        decoy.kill()
        decoy.wait()


def test_a_zygote_killed_right_after_its_first_fork_leaves_no_rank_to_join(tmp_path):
    """SIGKILL of the zygote between forking rank 0 and saying its PID: that rank is
    killed with the failed fork, the attempt starts its ranks anew on a fresh port, and
    no note says a port was taken. (Before: the leftover rank 0 met the fresh ranks at
    the same rendezvous.)"""
    report = tmp_path / "r.json"
    site = ("if _ZYGOTE:\n"
            "    import signal\n"
            "    _fork = os.fork\n"
            "    def _dying_fork():\n"
            "        pid = _fork()\n"
            "        if pid:\n"
            "            os.kill(os.getpid(), signal.SIGKILL)\n"
            "        return pid\n"
            "    os.fork = _dying_fork\n")
    proc = _envcheck(["run", "-p", "collectives", "-q", "--timeout", "30", "--json",
                      str(report)], tmp_path, site=site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = load_report(report)
    assert not [n for n in data["plan"]["notes"] if "taken" in n], data["plan"]["notes"]
    assert len(data["attempts"]) == 1
    # Every rank of the report was started anew. (Before: rank 0 was the leftover of the
    # failed fork, "forked", joined by a fresh rank 1, while the fresh rank 0 waited for
    # a rendezvous of its own until the timeout, a hang no check reported.)
    starts = [phases[0] for phases in data["attempts"][0]["timing"]["ranks"].values()]
    assert [s["forked"] for s in starts] == [False, False], starts
    assert {c["outcome"] for c in data["checks"] if c["id"].startswith("collectives.")} \
        == {"passed"}


DAEMON = '''
CHECKS = ("spawn",)


def probe_daemon(ctx):
    """rank 0 leaves a daemon: double fork, setsid, environment cleared"""
    import os
    import subprocess
    import sys
    import time

    with ctx.check("spawn"):
        if ctx.rank == 0:
            pidfile = os.environ["DAEMON_PIDFILE"]
            code = ("import os\\n"
                    "if os.fork(): os._exit(0)\\n"
                    "os.setsid()\\n"
                    "if os.fork(): os._exit(0)\\n"
                    "open(%r + '.tmp', 'w').write(str(os.getpid()))\\n"
                    "os.rename(%r + '.tmp', %r)\\n"
                    "os.execve('/bin/sleep', ['sleep', '600'], {})\\n"
                    % (pidfile, pidfile, pidfile))
            subprocess.run([sys.executable, "-c", code], env={}, check=True)
            while not os.path.exists(pidfile):
                time.sleep(0.01)
'''


@pytest.mark.parametrize("cgroup", ["1", "0"])
def test_a_daemon_in_its_own_session_without_the_marker_ends_with_the_run(tmp_path, cgroup):
    """A probe's daemon that calls setsid and clears its environment (no marker left)
    is killed with the attempt: by the attempt's cgroup where there is one, else found
    below envcheck, its subreaper (ENVCHECK_CGROUP=0 rules the cgroup out)."""
    probes = tmp_path / "daemon.py"
    probes.write_text(DAEMON)
    pidfile = tmp_path / "daemon.pid"
    proc = _envcheck(["run", "--probe-path", str(probes), "-p", "daemon", "-q"], tmp_path,
                     env={"DAEMON_PIDFILE": str(pidfile), "ENVCHECK_CGROUP": cgroup})
    pid = int(pidfile.read_text())
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the daemon outlived envcheck"
    finally:
        if _alive(pid):
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if f.read().startswith(b"sleep\0600"):
                    os.kill(pid, signal.SIGKILL)


CGROUP = '''
CHECKS = ("where",)


def probe_cgroup(ctx):
    """the rank's cgroup v2 path"""
    with ctx.check("where") as c:
        with open("/proc/self/cgroup") as f:
            c.detail = [l[3:].strip() for l in f if l.startswith("0::")][0]
'''


def test_ranks_run_in_a_cgroup_of_their_attempt_where_the_machine_offers_one(tmp_path):
    from envcheck.launch import cgroup as containment

    group = containment.make()
    if group is None:
        pytest.skip("no writable cgroup v2 hierarchy here: the subreaper contains runs")
    group.close()
    probes = tmp_path / "cgroup.py"
    probes.write_text(CGROUP)
    report = tmp_path / "r.json"
    proc = _envcheck(["run", "--probe-path", str(probes), "-p", "cgroup", "-q", "--json",
                      str(report)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where = checks_by_id(load_report(report))["cgroup.where"]["detail"]
    assert os.path.basename(where).startswith("envcheck-"), where
    assert not os.path.exists(os.path.join(containment._mount(), where.lstrip("/")))


def test_a_daemon_left_by_a_killed_envcheck_ends_with_the_next_run(tmp_path):
    """envcheck SIGKILLed while a probe's daemon (own session, environment cleared) runs:
    the ranks' lifeline cannot find the daemon (no marker), but it stayed in the attempt's
    cgroup, and the next envcheck removes that cgroup with what is in it."""
    from envcheck.launch import cgroup as containment

    group = containment.make()
    if group is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    group.close()
    # Both envchecks run in a cgroup of this test's own: any envcheck sweeps what a dead
    # one left beside it, and under pytest -n 2 the other worker's would otherwise find
    # the daemon first.
    box = os.path.join(containment._mount(), containment._own_path().lstrip("/"),
                       "test-daemon-%d" % os.getpid())
    os.mkdir(box)

    def in_box():
        with open(os.path.join(box, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    probes = tmp_path / "daemon.py"
    probes.write_text(DAEMON.replace("time.sleep(0.01)\n", "time.sleep(0.01)\n"
                                     "            time.sleep(600)\n"))
    pidfile = tmp_path / "daemon.pid"
    env = dict(os.environ, DAEMON_PIDFILE=str(pidfile))
    env.pop("SLURM_PROCID", None)
    first = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "--probe-path",
                              str(probes), "-p", "daemon", "-q"], cwd=ROOT, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=in_box)
    pid = None
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        first.kill()
        first.wait()
        time.sleep(1.0)  # the ranks' lifeline ends what it can find
        assert _alive(pid), "nothing should have found the daemon yet"
        proc = _envcheck(["run", "-p", "launch", "-q"], tmp_path, preexec_fn=in_box)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not _alive(pid), "the daemon outlived the next run"
    finally:
        if pid and _alive(pid):
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if f.read().startswith(b"sleep\0600"):
                    os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            try:
                os.rmdir(box)  # empty once its processes are gone
                break
            except OSError:
                time.sleep(0.05)


def _close_fds(*fds):
    def close():
        for fd in fds:
            os.close(fd)
    return close


def test_closed_stdin_is_no_reason_for_the_ranks_to_die(tmp_path):
    """envcheck started with fd 0 closed (``<&-``): the run passes. (Before: the ranks'
    lifeline pipe took fd 0, was replaced by /dev/null in each rank, and every rank ended
    the run at startup: exit 1.)"""
    report = tmp_path / "r.json"
    proc = _envcheck(["run", "-p", "collectives", "-q", "--json", str(report)], tmp_path,
                     preexec_fn=_close_fds(0), stdin=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {c["outcome"] for c in load_report(report)["checks"]
            if c["id"].startswith("collectives.")} == {"passed"}


def test_closed_stdout_and_stderr_still_answer_with_the_exit_code(tmp_path):
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck", "run", "-p", "launch", "--json", str(report)],
        cwd=ROOT, preexec_fn=_close_fds(0, 1, 2), timeout=300)
    assert proc.returncode == 0
    assert load_report(report)["checks"]


def _limit(kind, value):
    def apply():
        resource.setrlimit(kind, (value, value))
    return apply


def _limit_report(proc, path):
    """The report of a run under a limit: written, and the limit its finding."""
    assert "Traceback" not in proc.stderr and "error:" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return checks_by_id(load_report(path))


@pytest.mark.parametrize("files, started", [(10, False), (40, True)])
def test_too_few_file_descriptors_is_a_finding_in_the_report(tmp_path, files, started):
    """``ulimit -n``: a fact about the host, not the user's input. At 10 envcheck run
    cannot start a rank (its zygote's import fails at 11): the supervisor writes the
    report, setup.open_files failed, nothing else run. At 40 the ranks start and find it
    themselves before init_process_group (2 gloo ranks need 44: measured, they fail at
    40 with 'Too many open files' in ddp-sync). (Before: exit 2, one line, no report: a
    CI gate lost its JSON.)"""
    report = tmp_path / "r.json"
    proc = _envcheck(["run", "-p", "launch", "--nproc", "2", "--json", str(report)],
                     tmp_path, preexec_fn=_limit(resource.RLIMIT_NOFILE, files))
    checks = _limit_report(proc, report)
    found = checks["setup.open_files"]
    # judged by the matrix (expected to pass) where the ranks said which torch; without
    # a rank, no torch is known and no expectation applies: a failure the matrix has no
    # word on; both fail the run
    assert (found["outcome"], found["verdict"]) == (
        "failed", "unexpected" if started else "failure"), found
    assert found["detail"].startswith(
        "ulimit -n is %d on %s; a rank of this 2-rank gloo job opens up to about 44 "
        % (files, socket.gethostname())), found["detail"]
    assert found["advice"].startswith("raise it: ulimit -n 65536")
    assert checks["launch.run" if not started else "setup.init_process_group"][
        "outcome"] == "skipped"
    assert ("setup.import_torch" in checks) == started  # the ranks' own setup, or none


def test_under_torchrun_each_host_finds_its_own_limit(tmp_path):
    """Launcher mode: torchrun's agent under ``ulimit -n 40``, 3 local ranks (gloo needs
    48 each): every rank finds it before init_process_group, rank 0 reports it, exit 1,
    and the agent's log has the host's one line with the fix. (Before: every rank waited
    in init_process_group or failed with 'Too many open files', far from its cause.)"""
    from conftest import launcher_env, starts_ranks
    from envcheck.run.supervisor import free_port

    starts_ranks("torchrun")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
           "--nproc-per-node", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:%d" % free_port(), "-m", "envcheck.worker.launched", "--out", str(out),
           "-p", "collectives", "--timeout", "60", "--json", str(tmp_path / "r.json")]
    agent = subprocess.run(cmd, cwd=str(tmp_path), env=launcher_env(ENVCHECK_HOST="nodeA"),
                           capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=240, preexec_fn=_limit(resource.RLIMIT_NOFILE, 40))
    assert agent.returncode != 0, agent.stdout + agent.stderr
    assert "Traceback" not in agent.stdout
    found = checks_by_id(load_report(tmp_path / "r.json"))["setup.open_files"]
    assert (found["outcome"], found["verdict"]) == ("failed", "unexpected"), found
    assert sorted(found["ranks"]) == ["0", "1", "2"]
    assert found["detail"].startswith("ulimit -n is 40 on nodeA; a rank of this 3-rank gloo "
                                      "job opens up to about 48 "), found
    assert "envcheck: nodeA: setup.open_files failed: ulimit -n is 40" in agent.stderr


def test_a_limit_a_run_fits_in_is_no_finding(tmp_path):
    """``ulimit -n 48``, 2 ranks, every default check: the run passes, and says what the
    limit is and what it needed. (Before: refused outright, exit 2: the floor was 64.)"""
    report = tmp_path / "r.json"
    proc = _envcheck(["run", "--nproc", "2", "--json", str(report)], tmp_path,
                     preexec_fn=_limit(resource.RLIMIT_NOFILE, 48))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = checks_by_id(load_report(report))["setup.open_files"]
    assert found["outcome"] == "passed"
    assert "ulimit -n is 48 on %s; a rank of this 2-rank gloo job needs about 44" % (
        socket.gethostname()) in found["detail"], found


def _counted_as_nobody(nproc):
    """``ulimit -u NPROC`` that binds: root is exempt from it (by its real uid, and by
    CAP_SYS_RESOURCE / CAP_SYS_ADMIN), so the real uid becomes nobody's and those two
    capabilities leave the bounding set; the effective uid stays root, to read the venv."""
    import ctypes

    def apply():
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (21, 24):  # CAP_SYS_ADMIN, CAP_SYS_RESOURCE
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setresuid(65534, 0, 0)
    return apply


@pytest.mark.parametrize("tasks, nproc", [(6, 8), (12, 1)])
def test_a_process_limit_is_a_finding_naming_the_ranks_it_stops(tmp_path, tasks, nproc):
    """``ulimit -u 6`` with 8 ranks, ``12`` with one: no room to start the ranks (each
    starts about 16 threads). The report says so, as setup.processes, on this host, for
    every rank that could not start; nothing else ran. (Before: exit 2, one line, no
    report.)"""
    import shutil
    import tempfile

    # envcheck checks --json's directory with the real uid, nobody's: one it may reach
    out = tempfile.mkdtemp(prefix="envcheck-nproc-", dir="/tmp")
    try:
        os.chmod(out, 0o777)
        report = os.path.join(out, "r.json")
        proc = _envcheck(["run", "-p", "launch", "--nproc", str(nproc), "--json", report],
                         tmp_path, preexec_fn=_counted_as_nobody(tasks))
        checks = _limit_report(proc, report)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    found = checks["setup.processes"]
    assert (found["outcome"], found["verdict"]) == ("failed", "failure"), found  # no rank: no torch
    assert found["detail"].startswith("ulimit -u is %d on %s, and this user has " % (
        tasks, socket.gethostname())), found["detail"]
    assert "%d rank(s) on this host need about %d more" % (nproc, 16 * nproc + 4) \
        in found["detail"], found["detail"]
    assert sorted(found["ranks"]) == [str(r) for r in range(nproc)]
    assert checks["launch.run"]["outcome"] == "skipped"


SLEEPY = '''
def probe_sleepy(ctx):
    """every rank sleeps in its check"""
    import time
    with ctx.check("nap"):
        time.sleep(600)
'''


def test_ranks_the_launcher_terminated_are_not_a_crash(tmp_path):
    """SIGTERM to torchrun: it terminates every rank, and each leaves its SIGTERM stack
    dump. The report says they were terminated by the launcher. (Before: "rank 0 ...
    crashed", exit 1, as if one had died on its own.)"""
    from conftest import torchrun, validate_report
    from envcheck.run.supervisor import free_port

    probe = tmp_path / "sleepy.py"
    probe.write_text(SLEEPY)
    out = tmp_path / "out"
    agent = torchrun(sys.executable, 1, 0, 2, free_port(),
                     ["--out", str(out), "-p", "sleepy", "--probe-path", str(probe),
                      "--timeout", "300"], str(tmp_path), "nodeA")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            files = [out / ("records-rank%d.jsonl" % r) for r in (0, 1)]
            if all(f.exists() and '"nap"' in f.read_text() for f in files):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the ranks never reached the probe")
        time.sleep(0.5)
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()
    res = _envcheck(["report", "--records", str(out), "--format", "json"], tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    report = validate_report(__import__("json").loads(res.stdout))
    nap = checks_by_id(report)["sleepy.nap"]
    assert nap["outcome"] != "crash", nap
    assert "terminated by the launcher (SIGTERM)" in nap["detail"], nap["detail"]
    assert "crashed" not in res.stdout
    assert res.returncode == 143  # SIGTERM, as for envcheck run: not "will not work"


def test_a_full_tmpdir_is_blamed_on_the_space(tmp_path):
    """TMPDIR on a 4 MiB tmpfs (mounted in a private mount namespace): the checkpoint
    probe's async snapshot runs out of space. The report says so and lays no blame on
    the user's code; the checks whose records could not be written at that moment are
    written once the probe's files are gone. (Before: async_snapshot and
    no_process_group vanished from the report, "nothing unexpected"; with a little more
    room, async_snapshot advised not to modify the state before the future completes.)"""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    full = tmp_path / "full"
    full.mkdir()
    report = tmp_path / "r.json"
    script = ("mount -t tmpfs -o size=4m tmpfs %s && exec %s -m envcheck run -p checkpoint "
              "-q --json %s" % (full, sys.executable, report))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, TMPDIR=str(full)), stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = checks_by_id(load_report(report))
    snap = checks["checkpoint.async_snapshot"]
    assert snap["outcome"] == "failed"
    assert snap["detail"].startswith("out of space (TMPDIR="), snap["detail"]
    assert "has 0 MiB free" in snap["detail"]
    assert snap["advice"].startswith("the filesystem is full, not the code under test")
    assert "do not modify the state" not in proc.stdout
    assert "checkpoint.no_process_group" in checks
    # and before any probe, every rank said there was not room enough for them
    room = checks["setup.tmpdir"]
    assert (room["outcome"], room["verdict"]) == ("failed", "unexpected"), room
    assert room["detail"].startswith("%s on %s has " % (full, load_report(report)["ranks"][0]
                                                         ["host"])), room
    assert " free: envcheck's checkpoint checks need " in room["detail"]


def _private_mounts(script, env, cwd=ROOT, timeout=300):
    """``script`` (sh) as root in a private mount namespace: its mounts end with it."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    full = {k: v for k, v in os.environ.items()
            if k not in ("TMPDIR", "TEMP", "TMP", "SLURM_PROCID")}
    full.update(env)
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=full, stdin=subprocess.DEVNULL)


# What the job's own Python and a program that takes TMPDIR as given do with it, run
# beside envcheck in the same mount namespace: the truth the report is held against.
BESIDE = ("%s -c 'import tempfile; print(\"python:\", tempfile.gettempdir())' 2>&1 | "
          "tail -n 1; mktemp 2>&1; " % sys.executable)


@pytest.mark.parametrize("launcher", ["run", "torchrun"])
def test_a_read_only_tmpdir_is_named_with_the_directory_used_instead(tmp_path, launcher):
    """TMPDIR on a read-only bind mount, 2 ranks, the checkpoint checks: Python's tempfile
    passes over it in silence (observed beside the run) and mktemp fails, so every rank's
    setup.tmpdir names TMPDIR, why it cannot be written, and the directory Python uses
    instead, a known warning; the checkpoint checks run there and pass. Under envcheck
    run (its ranks get a TMPDIR of its own) and under torchrun (the user's). (Before:
    the run passed without a word about TMPDIR.)"""
    from conftest import launcher_env
    from envcheck.run.supervisor import free_port

    ro = tmp_path / "ro"
    ro.mkdir()
    report = tmp_path / "r.json"
    if launcher == "run":
        run = "%s -m envcheck run -p checkpoint -n 2 -q --json %s" % (sys.executable, report)
        env = {}
    else:
        run = ("%s -m torch.distributed.run --nnodes 1 --nproc-per-node 2 --rdzv-backend "
               "c10d --rdzv-endpoint 127.0.0.1:%d -m envcheck.worker.launched --out %s -p "
               "checkpoint --timeout 60 --json %s" % (
                   sys.executable, free_port(), tmp_path / "out", report))
        env = {k: v for k, v in launcher_env().items() if k not in ("TMPDIR", "TEMP", "TMP")}
    script = "mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && {beside}exec {run}"
    proc = _private_mounts(script.format(ro=ro, beside=BESIDE, run=run),
                           dict(env, TMPDIR=str(ro)))
    assert "Traceback" not in proc.stdout + proc.stderr
    python_uses = proc.stdout.splitlines()[0]
    assert python_uses.startswith("python: ") and python_uses != "python: %s" % ro
    assert "mktemp: failed to create file via template '%s/tmp.XXXXXXXXXX': Read-only " \
        "file system" % ro in proc.stdout.replace("\u2018", "'").replace("\u2019", "'")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = load_report(report)
    host = r["ranks"][0]["host"]
    checks = checks_by_id(r)
    found = checks["setup.tmpdir"]
    assert (found["outcome"], found["verdict"]) == ("failed", "known"), found
    assert sorted(found["ranks"]) == ["0", "1"]
    assert found["detail"].startswith(
        "TMPDIR=%s on %s cannot be written (Read-only file system): Python's tempfile, and "
        "torch with it, silently use %s instead (" % (ro, host, python_uses[8:])), found
    assert found["advice"].startswith("point TMPDIR at a writable directory")
    assert checks["checkpoint.async_snapshot"]["outcome"] == "passed"


def test_no_usable_temporary_directory_is_a_report_naming_each_candidate(tmp_path):
    """TMPDIR, /tmp and /var/tmp read-only, /usr/tmp missing here, the working directory
    read-only: Python's tempfile has nowhere to go (observed beside the run). envcheck
    run starts no rank and writes its report (to a directory that can be written) with
    setup.tmpdir failed, every candidate and why, exit 1. (Before: exit 2, 'no usable
    temporary directory for the run', and no report.)"""
    if os.path.exists("/usr/tmp"):
        pytest.skip("/usr/tmp exists here: tempfile could fall back to it")
    ro, out = tmp_path / "ro", tmp_path / "out"
    ro.mkdir()
    out.mkdir()
    report = out / "r.json"
    script = ("mount -t tmpfs -o size=8m tmpfs {out} && mount --bind {ro} {ro} && "
              "mount -o remount,bind,ro {ro} && mount --rbind /tmp /tmp && "
              "mount -o remount,bind,ro /tmp && mount --bind /var/tmp /var/tmp && "
              "mount -o remount,bind,ro /var/tmp && {beside}{py} -m envcheck run -n 3 "
              "--json {report}; echo rc=$?; cat {report}")
    proc = _private_mounts(script.format(out=out, ro=ro, beside=BESIDE, py=sys.executable,
                                         report=report), {"TMPDIR": str(ro)}, cwd=str(ro))
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("FileNotFoundError: [Errno 2] No usable temporary "
                               "directory found in ['%s', '/tmp', '/var/tmp', '/usr/tmp', "
                               "'%s']" % (ro, ro)), proc.stdout
    assert "rc=1" in lines, proc.stdout + proc.stderr
    import json

    r = json.loads(proc.stdout.split("rc=1\n", 1)[1])
    found = checks_by_id(r)["setup.tmpdir"]
    # no rank ran, so no torch to judge by: a failure of the environment
    assert (found["outcome"], found["verdict"]) == ("failed", "failure"), found
    host = r["ranks"][0]["host"]
    assert found["detail"] == (
        "no usable temporary directory on %s: TMPDIR=%s: Read-only file system; /tmp: "
        "Read-only file system; /var/tmp: Read-only file system; /usr/tmp: No such file or "
        "directory; the working directory %s: Read-only file system: Python's tempfile "
        "raises 'No usable temporary directory found', and whatever writes a temporary "
        "file fails (torch.compile, checkpoint staging)" % (host, ro, ro)), found
    assert sorted(found["ranks"]) == ["0", "1", "2"]
    assert {v["detail"] for v in found["ranks"].values()} == {"not started"}
    assert r["checks"][1]["detail"].startswith("not run: no usable temporary directory")


STARTED = '''
CHECKS = ("where",)


def probe_started(ctx):
    """rank 0 says it runs, then every rank waits to be interrupted"""
    import os
    import time

    with ctx.check("where"):
        if ctx.rank == 0:
            open(os.environ["ENVCHECK_TEST_STARTED"], "w").close()
        time.sleep(600)
'''


def test_an_interrupt_before_the_zygote_has_exited_keeps_what_its_ranks_did(tmp_path):
    """Ctrl-C once the forked ranks run a probe but before envcheck saw their zygote exit
    (it has forked every rank; on a loaded node, tearing down a process that imported
    torch takes a while): the partial report still holds what the ranks did. (Before:
    no rank was tracked yet, and the report said nothing ran, torch unknown.)"""
    probes = tmp_path / "started.py"
    probes.write_text(STARTED)
    started = tmp_path / "started"
    report = tmp_path / "r.json"
    site = ("if _ZYGOTE:\n"
            "    import time\n"
            "    _exit = os._exit\n"
            "    def _slow_exit(code):\n"
            "        time.sleep(30)\n"
            "        _exit(code)\n"
            "    os._exit = _slow_exit\n")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(IN_ZYGOTE + site)
    env = dict(os.environ, ENVCHECK_TEST_STARTED=str(started), PYTHONPATH=os.pathsep.join(
        p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p))
    env.pop("SLURM_PROCID", None)
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "--probe-path",
                             str(probes), "-p", "started", "--json", str(report), "-q"],
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    data = load_report(report)
    checks = checks_by_id(data)
    assert checks["setup.init_process_group"]["outcome"] == "passed"
    where = checks["started.where"]
    assert (where["outcome"], where["detail"]) == ("skipped",
                                                   "interrupted (SIGINT) while in where")
    assert data["environment"]["torch"]

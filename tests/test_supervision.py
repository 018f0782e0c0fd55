"""Real faults injected through custom probes (--probe-path): hangs, crashes, signals.

For each: the outcome envcheck reports, that the probes after the faulty one still ran,
stacks in the JSON for hangs, the exit code, a complete JSON report, and no process of
the run left behind (found by a marker in the environment every child inherits).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, checks_by_id, leftovers, load_report, run_cli
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks  # every test here starts real ranks

FAULTS = '''
import os
import time


def probe_raise_one(ctx):
    """an exception in one rank only"""
    with ctx.check("boom") as c:
        if ctx.rank == 1:
            raise ValueError("rank one broke")
        c.detail = "fine here"


def probe_hang_one(ctx):
    """rank 1 never joins the all_reduce"""
    import torch
    import torch.distributed as dist
    with ctx.check("stuck") as c:
        if ctx.rank == 1:
            time.sleep(3600)
        dist.all_reduce(torch.ones(1))


def probe_hang_all(ctx):
    """every rank sleeps"""
    with ctx.check("sleeping") as c:
        marker = os.environ.get("ENVCHECK_TEST_STARTED")
        if marker and ctx.rank == 0:
            open(marker, "w").close()
        time.sleep(3600)


def probe_half_done(ctx):
    """rank 0 finishes the check; rank 1 is still inside it when envcheck is stopped"""
    marker = os.environ.get("ENVCHECK_TEST_STARTED")
    with ctx.check("half") as c:
        if ctx.rank == 1:
            while not os.path.exists(marker + ".rank0"):
                time.sleep(0.01)
            open(marker, "w").close()
            time.sleep(3600)
    if ctx.rank == 0:
        open(marker + ".rank0", "w").close()
    time.sleep(3600)


def probe_setsid_child(ctx):
    """rank 1 starts a grandchild in a session of its own (out of every process group)"""
    import subprocess
    import sys
    with ctx.check("spawn") as c:
        if ctx.rank == 1:
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
            marker = os.environ.get("ENVCHECK_TEST_STARTED")
            if marker:
                open(marker, "w").close()
        if os.environ.get("ENVCHECK_TEST_HOLD"):
            time.sleep(3600)


def probe_tmp_hold(ctx):
    """every rank writes a checkpoint-like file in a private temp dir, then waits"""
    with ctx.check("holding") as c:
        with ctx.private_tmpdir(prefix="envcheck-ckpt-") as d:
            with open(os.path.join(d, "model.pt"), "wb") as f:
                f.write(b"x" * 1024)
            marker = os.environ.get("ENVCHECK_TEST_STARTED")
            if marker and ctx.rank == 1:
                open(marker, "w").close()
            time.sleep(3600)


def probe_segfault(ctx):
    """rank 1 dereferences NULL"""
    with ctx.check("segv") as c:
        if ctx.rank == 1:
            import ctypes
            ctypes.string_at(0)
        time.sleep(3600)


def probe_exit_one(ctx):
    """rank 1 calls os._exit(3)"""
    with ctx.check("gone") as c:
        if ctx.rank == 1:
            os._exit(3)
        import torch
        import torch.distributed as dist
        dist.all_reduce(torch.ones(1))


def _publish_pid():
    path = os.environ["ENVCHECK_TEST_PIDFILE"]
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)


def probe_wait_for_kill(ctx):
    """rank 1 publishes its pid and waits to be killed"""
    with ctx.check("victim") as c:
        if ctx.rank == 1:
            _publish_pid()
        time.sleep(3600)


def probe_pause_one(ctx):
    """rank 1 publishes its pid and sleeps (to be stopped); the others wait in a barrier"""
    import torch.distributed as dist
    with ctx.check("paused") as c:
        if ctx.rank == 1:
            _publish_pid()
            time.sleep(3600)
        dist.barrier()


def probe_after(ctx):
    """runs after the faulty probe: the run must go on"""
    import torch.distributed as dist
    with ctx.check("ran") as c:
        dist.barrier()
        c.detail = "fresh ranks after the fault"
'''


@pytest.fixture
def faults(write_probes):
    return write_probes(FAULTS, name="faults.py")


def run_faults(faults, tmp_path, *probes, timeout=4, extra_env=None):
    marker = uuid.uuid4().hex
    report = tmp_path / "report.json"
    args = ["run", "--probe-path", faults, "--timeout", str(timeout), "--json", str(report),
            "-q"]
    for p in probes:
        args += ["-p", p]
    t0 = time.monotonic()
    result = run_cli(*args, env=dict(extra_env or {}, ENVCHECK_TEST_MARKER=marker))
    wall = time.monotonic() - t0
    assert report.exists(), result.stderr
    data = load_report(report)
    assert leftovers(marker) == [], "processes left behind"
    return result, data, wall


def test_exception_in_one_rank_and_hang_in_a_collective(faults, tmp_path):
    result, data, wall = run_faults(faults, tmp_path, "raise-one", "hang-one", "after")
    checks = checks_by_id(data)
    assert result.code == 1

    boom = checks["raise-one.boom"]
    assert boom["outcome"] == "failed"
    assert boom["root_rank"] == 1
    assert boom["ranks"]["0"]["outcome"] == "passed"
    assert boom["error"]["type"] == "ValueError"
    assert "rank one broke" in boom["error"]["message"]
    assert boom["detail"].startswith("rank 1:")

    stuck = checks["hang-one.stuck"]
    assert stuck["outcome"] == "hang"
    # Rank 0 reached its deadline first, waiting for rank 1 in all_reduce: rank 1, stuck
    # outside torch.distributed, is the cause.
    assert stuck["root_rank"] == 1
    assert stuck["detail"].startswith("rank 1: no progress for ")
    assert re.fullmatch(r"stopped by envcheck while in stuck after rank 1 hung; it was "
                        r"waiting in all_reduce \(distributed_c10d\.py:\d+ all_reduce\)",
                        stuck["ranks"]["0"]["detail"])
    # Rank 1 sat in time.sleep inside the probe; rank 0 waited in the all_reduce.
    assert "probe_hang_one" in stuck["ranks"]["1"]["stack"]
    assert "all_reduce" in stuck["ranks"]["0"]["stack"]
    assert "timeout 4 s" in stuck["detail"]

    assert checks["after.ran"]["outcome"] == "passed"
    assert [a["abort"]["kind"] if a["abort"] else None for a in data["attempts"]] == \
        ["hang", None]
    # The hang needs action: it leads the screen, where every rank was with it.
    assert result.stdout.startswith("✗ Not ready for distributed training: 2 FAILURES\n")
    assert "\nNeeds action:\n  ✗ raise-one.boom (FAILURE)\n" in result.stdout
    assert "\n  ⧗ hang-one.stuck (FAILURE)\n" in result.stdout
    assert "full Python stacks: --json PATH" in result.stdout


def test_hang_everywhere_is_bounded_by_the_timeout(faults, tmp_path):
    result, data, wall = run_faults(faults, tmp_path, "hang-all", "after", timeout=3)
    checks = checks_by_id(data)
    assert result.code == 1
    hang = checks["hang-all.sleeping"]
    assert hang["outcome"] == "hang"
    for rank in ("0", "1"):
        assert "probe_hang_all" in hang["ranks"][rank]["stack"]
    assert checks["after.ran"]["outcome"] == "passed"
    abort = data["attempts"][0]["abort"]
    # Stacks and kill after the deadline take seconds, not another timeout.
    assert abort["stop_s"] < 4
    assert 3 <= abort["waited_s"] < 5
    # Two attempts of ~3 s startup each, plus the 3 s timeout: nowhere near 2x timeout
    # per rank or an unbounded wait.
    assert wall < 3 + 30


def test_segfault_in_one_rank_is_a_crash_with_its_signal(faults, tmp_path):
    result, data, _ = run_faults(faults, tmp_path, "segfault", "after")
    checks = checks_by_id(data)
    assert result.code == 1
    segv = checks["segfault.segv"]
    assert segv["outcome"] == "crash"
    assert segv["root_rank"] == 1
    assert segv["ranks"]["1"]["signal"] == "SIGSEGV"
    assert "Segmentation fault" in segv["ranks"]["1"]["stderr_tail"]
    assert "killed by SIGSEGV" in segv["detail"]
    assert checks["after.ran"]["outcome"] == "passed"


def test_os_exit_in_one_rank_is_a_crash_with_its_exit_code(faults, tmp_path):
    result, data, _ = run_faults(faults, tmp_path, "exit-one", "after")
    checks = checks_by_id(data)
    gone = checks["exit-one.gone"]
    assert gone["outcome"] == "crash"
    assert gone["root_rank"] == 1
    assert gone["ranks"]["1"]["exit_code"] == 3
    assert "exited with code 3" in gone["detail"]
    assert checks["after.ran"]["outcome"] == "passed"
    assert result.code == 1


def _start_envcheck(faults, tmp_path, probes, marker, extra_env, timeout=60):
    report = tmp_path / "report.json"
    args = [sys.executable, "-m", "envcheck", "run", "--probe-path", faults, "--timeout",
            str(timeout), "--json", str(report), "-q"]
    for p in probes:
        args += ["-p", p]
    env = dict(os.environ, ENVCHECK_TEST_MARKER=marker, **extra_env)
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, report


def _wait_for(path, proc, limit=60):
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the probe never started"
        time.sleep(0.05)


def test_sigkill_of_a_rank_from_outside(faults, tmp_path):
    marker, pidfile = uuid.uuid4().hex, str(tmp_path / "rank1.pid")
    proc, report = _start_envcheck(faults, tmp_path, ["wait-for-kill", "after"], marker,
                                   {"ENVCHECK_TEST_PIDFILE": pidfile})
    _wait_for(pidfile, proc)
    os.kill(int(open(pidfile).read()), signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    data = load_report(report)
    checks = checks_by_id(data)
    victim = checks["wait-for-kill.victim"]
    assert victim["outcome"] == "crash"
    assert victim["root_rank"] == 1
    assert victim["ranks"]["1"]["signal"] == "SIGKILL"
    assert checks["after.ran"]["outcome"] == "passed"
    assert proc.returncode == 1
    assert leftovers(marker) == []


def test_a_rank_stopped_from_outside_is_killed_at_once(faults, tmp_path):
    """SIGSTOP of rank 1 mid-probe, as Ctrl-Z or a debugger would: a stopped process runs
    no handler, so asking it for its stack or sending it SIGTERM only waits. It is killed
    at once, with no stack wait and no SIGTERM grace for it."""
    from envcheck.core.blame import DUMP_WAIT_S
    from envcheck.run.supervisor import TERM_GRACE_S

    marker, pidfile = uuid.uuid4().hex, str(tmp_path / "rank1.pid")
    proc, report = _start_envcheck(faults, tmp_path, ["pause-one", "after"], marker,
                                   {"ENVCHECK_TEST_PIDFILE": pidfile}, timeout=3)
    _wait_for(pidfile, proc)
    os.kill(int(open(pidfile).read()), signal.SIGSTOP)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    data = load_report(report)
    checks = checks_by_id(data)
    paused = checks["pause-one.paused"]
    assert (paused["outcome"], paused["root_rank"]) == ("hang", 1)
    assert re.fullmatch(r"rank 1: no progress for \d+\.\d s \(timeout 3 s\) in paused; "
                        r"stopped \(state T: SIGSTOP, Ctrl-Z or a debugger\), so it showed "
                        r"no stack and was killed at once \(SIGKILL\)", paused["detail"]), \
        paused["detail"]
    assert paused["ranks"]["1"]["signal"] == "SIGKILL"
    assert re.fullmatch(r"stopped by envcheck while in paused after rank 1 hung; it was "
                        r"waiting in barrier \(distributed_c10d\.py:\d+ barrier\)",
                        paused["ranks"]["0"]["detail"]), paused["ranks"]["0"]["detail"]
    # Waiting for the stopped rank's stack and out its SIGTERM grace took at least both
    # in full; now only the running rank is waited for.
    assert data["attempts"][0]["abort"]["stop_s"] < DUMP_WAIT_S + TERM_GRACE_S
    assert checks["after.ran"]["outcome"] == "passed"
    assert leftovers(marker) == []


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                      (signal.SIGHUP, 129)])
def test_signal_to_envcheck_writes_a_partial_report(faults, tmp_path, sig, code):
    marker, started = uuid.uuid4().hex, str(tmp_path / "started")
    proc, report = _start_envcheck(faults, tmp_path, ["launch", "hang-all", "after"], marker,
                                   {"ENVCHECK_TEST_STARTED": started})
    _wait_for(started, proc)
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == code, err
    assert "Traceback" not in err
    data = load_report(report)
    assert data["interrupted"] == signal.Signals(sig).name
    checks = checks_by_id(data)
    assert checks["launch.env"]["outcome"] == "passed"  # what ran before is kept
    assert checks["hang-all.sleeping"]["outcome"] == "skipped"
    assert "interrupted" in checks["hang-all.sleeping"]["detail"]
    assert "interrupted" in checks["after.run"]["detail"]
    assert "INTERRUPTED" in out
    assert leftovers(marker) == []


def _gone(marker, limit=30):
    """Processes that still carry the marker once they had LIMIT seconds to go."""
    deadline = time.monotonic() + limit
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leftovers(marker)


def test_a_setsid_grandchild_does_not_outlive_a_clean_run(faults, tmp_path):
    result, data, _ = run_faults(faults, tmp_path, "setsid-child")  # asserts no leftovers
    assert checks_by_id(data)["setsid-child.spawn"]["outcome"] == "passed"
    assert result.code == 0


def test_sigkill_of_envcheck_takes_every_rank_and_grandchild_with_it(faults, tmp_path):
    """Nothing can run in envcheck after SIGKILL: the ranks notice their lifeline end,
    kill everything of the run (the setsid grandchild too) and remove its directory."""
    marker, started = uuid.uuid4().hex, str(tmp_path / "started")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, _ = _start_envcheck(faults, tmp_path, ["setsid-child"], marker,
                              {"ENVCHECK_TEST_STARTED": started, "ENVCHECK_TEST_HOLD": "1",
                               "TMPDIR": str(tmp)})
    _wait_for(started, proc)
    assert len(leftovers(marker)) == 4  # envcheck, two ranks and the grandchild
    assert [n for n in os.listdir(tmp) if n.startswith("envcheck-run-")]
    proc.kill()
    proc.communicate(timeout=30)
    left = _gone(marker)
    assert left == [], [open("/proc/%d/cmdline" % p, "rb").read() for p in left]
    deadline = time.monotonic() + 10
    while os.listdir(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.listdir(tmp) == []  # the run's directory, the ranks' TMPDIR inside it


def test_ctrl_c_while_checkpoint_files_exist_leaves_no_file(faults, tmp_path):
    """Ctrl-C while ranks hold checkpoint files: no envcheck-ckpt-* (nor torch's caches)
    left in the user's temp dir: the ranks' TMPDIR is inside the run's directory."""
    marker, started = uuid.uuid4().hex, str(tmp_path / "started")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, report = _start_envcheck(faults, tmp_path, ["tmp-hold"], marker,
                                   {"ENVCHECK_TEST_STARTED": started, "TMPDIR": str(tmp)})
    _wait_for(started, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert load_report(report)["interrupted"] == "SIGINT"
    assert os.listdir(tmp) == []
    assert leftovers(marker) == []


def test_a_check_cut_short_on_one_rank_is_interrupted_not_passed(faults, tmp_path):
    """Rank 0 passed the check, rank 1 was still in it: proved nothing, so no verdict
    (it used to read "passed" and be judged against the matrix)."""
    marker, started = uuid.uuid4().hex, str(tmp_path / "started")
    proc, report = _start_envcheck(faults, tmp_path, ["half-done"], marker,
                                   {"ENVCHECK_TEST_STARTED": started})
    _wait_for(started, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    half = checks_by_id(load_report(report))["half-done.half"]
    assert (half["outcome"], half["verdict"]) == ("skipped", None)
    assert half["ranks"]["0"]["outcome"] == "passed"
    assert half["detail"] == "interrupted (SIGINT) while in half"
    assert leftovers(marker) == []


def test_taken_rendezvous_port_is_retried_on_a_free_one(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(8)  # answers connects but never speaks the store protocol
        port = taken.getsockname()[1]
        report = tmp_path / "r.json"
        result = run_cli("run", "-p", "launch", "--master-port", str(port), "--json",
                         str(report), "-q")
    assert result.code == 0, result.stdout
    data = load_report(report)
    assert data["plan"]["notes"] == ["port %d is in use by another program; used a free "
                                     "port instead" % port]
    assert data["attempts"][0]["port"] != port
    assert checks_by_id(data)["setup.init_process_group"]["outcome"] == "passed"
    assert "note: port %d is in use by another program" % port in result.stdout


def test_another_jobs_live_store_on_the_port_is_never_touched(tmp_path):
    """A real TCPStore of another job holds the port: envcheck sees the port taken
    before any rank starts, so not one key lands in that job's store."""
    import datetime

    import torch.distributed as dist

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=30))
    store.set("theirs", "1")
    before = store.num_keys()
    report = tmp_path / "r.json"
    result = run_cli("run", "-p", "launch", "--nproc", "2", "--master-port", str(port),
                     "--json", str(report), "-q")
    assert result.code == 0, result.stdout
    assert store.num_keys() == before
    assert load_report(report)["attempts"][0]["port"] != port


def _rank_1_never_starts(tmp_path, *args):
    """``envcheck run -p launch ARGS`` where rank 1's interpreter never starts (a wrapper
    sleeps first, as a hung filesystem would): the result and the report."""
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\n[ "$RANK" = "1" ] && sleep 600\nexec "%s" "$@"\n'
                       % sys.executable)
    wrapper.chmod(0o755)
    marker = uuid.uuid4().hex
    report = tmp_path / "r.json"
    res = run_cli("run", "--python", str(wrapper), "-p", "launch", "--json", str(report),
                  *args, env={"ENVCHECK_TEST_MARKER": marker})
    assert res.code == 1, res.stderr
    assert leftovers(marker) == []
    return res, load_report(report)


def test_a_rank_stuck_before_python_starts_follows_the_startup_timeout(tmp_path):
    """Rank 1's interpreter never starts: reported at --startup-timeout, not after a
    fixed two minutes."""
    # 8 s: long enough for rank 0 to have imported torch and to wait at the rendezvous
    # even on a busy 2-core machine, so that the one rank past its startup limit is 1.
    res, data = _rank_1_never_starts(tmp_path, "--startup-timeout", "8", "-q")
    assert data["plan"]["startup_timeout"] == 8
    imported = checks_by_id(data)["setup.import_torch"]
    assert imported["outcome"] == "hang" and imported["root_rank"] == 1, imported
    assert re.fullmatch(r"rank 1: no progress for \d+\.\d s \(startup timeout 8 s\) in "
                        r"startup.*", imported["detail"]), imported["detail"]
    assert checks_by_id(data)["launch.run"]["detail"] == \
        "not run: the ranks did not start (see setup.import_torch)"


def test_the_rank_that_never_started_is_blamed_not_the_rank_waiting_for_it(tmp_path):
    """Rank 1's interpreter never starts; rank 0 waits for it at the rendezvous (inside
    TCPStore's C++ constructor: no torch.distributed frame in its stack) until its setup
    timeout runs out, long before rank 1's startup timeout. Rank 1 is the cause."""
    res, data = _rank_1_never_starts(tmp_path, "--timeout", "3")
    assert data["plan"]["startup_timeout"] == 120  # rank 1's own limit is far away
    abort = data["attempts"][0]["abort"]
    assert (abort["root_rank"], abort["phase"]) == (1, "startup")
    checks = checks_by_id(data)
    imported = checks["setup.import_torch"]
    assert (imported["outcome"], imported["root_rank"]) == ("hang", 1)
    assert re.fullmatch(r"rank 1: no progress for \d+\.\d s in startup; rank 0 waited for "
                        r"it at the rendezvous past the timeout \(3 s\)",
                        imported["detail"]), imported["detail"]
    init = checks["setup.init_process_group"]
    assert re.fullmatch(r"stopped by envcheck while in setup after rank 1 hung; it was "
                        r"waiting in init_process_group \(runtime\.py:\d+ "
                        r"_init_process_group\)", init["detail"]), init["detail"]
    assert checks["launch.run"]["detail"] == \
        "not run: the ranks did not start (see setup.import_torch)"
    # The table says the same, in the same words (wrapped: compare words).
    assert re.search(r"rank 1: no progress for \d+\.\d s in startup; rank 0 waited for it "
                     r"at the rendezvous past the timeout \(3 s\)",
                     " ".join(res.stdout.split())), res.stdout


def test_startup_timeout_must_be_positive():
    res = run_cli("run", "--startup-timeout", "0")
    assert (res.code, res.stderr) == (
        2, "envcheck: error: --startup-timeout 0: must be at least 1 s (less is a hang "
           "before anything starts) and at most 86400 (a day)\n")


def test_a_rank_that_runs_out_of_memory_while_starting_says_so(tmp_path):
    """Rank 1 under a memory limit cannot map torch's libraries: the report names the real
    error and the limit, not a traceback frame and not 'reinstall torch'."""
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\n[ "$RANK" = "1" ] && ulimit -v 400000\nexec "%s" "$@"\n'
                       % sys.executable)
    wrapper.chmod(0o755)
    report = tmp_path / "r.json"
    res = run_cli("run", "--python", str(wrapper), "-p", "launch", "--json", str(report),
                  "-q")
    assert res.code == 1, res.stderr
    imported = checks_by_id(load_report(report))["setup.import_torch"]
    assert (imported["outcome"], imported["root_rank"]) == ("crash", 1)
    assert imported["detail"].startswith("rank 1 could not start: ")
    assert 'File "' not in imported["detail"]
    assert imported["advice"].startswith("the rank ran out of memory while starting")


def test_the_line_that_says_what_went_wrong():
    from envcheck.run.merge import meaningful_line

    tail = ('Traceback (most recent call last):\n'
            '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            "terminate called after throwing an instance of 'std::bad_alloc'\n"
            "  what():  std::bad_alloc\n"
            '  File "<frozen runpy>", line 88, in _run_code\n')
    assert meaningful_line(tail) == \
        "terminate called after throwing an instance of 'std::bad_alloc'"
    assert meaningful_line('x\n  File "a.py", line 1, in f\n    ^^^^\n') == "x"


MEMORY = '''
def probe_memory(ctx):
    """rank 1 raises a bare MemoryError"""
    with ctx.check("alloc"):
        if ctx.rank == 1:
            raise MemoryError()
'''


def test_an_error_without_a_message_is_named_by_its_type(write_probes, tmp_path):
    path = write_probes(MEMORY, name="memory.py")
    report = tmp_path / "r.json"
    res = run_cli("run", "--probe-path", path, "-p", "memory", "--json", str(report), "-q")
    assert res.code == 1
    alloc = checks_by_id(load_report(report))["memory.alloc"]
    assert alloc["detail"] == "rank 1: MemoryError"


TORCH_WAIT = '''
def probe_torchwait(ctx):
    """the rank waits in a torch call that is no collective and never returns"""
    import torch
    with ctx.check("wait"):
        torch.futures.Future().wait()
'''


def test_a_hang_in_a_torch_call_names_the_job_s_line_and_the_call(write_probes):
    """A rank stuck in torch's own Python code outside torch.distributed (on a GPU,
    torch.cuda.synchronize behind a kernel that never ends: the H100 run said "at
    __init__.py:1162 synchronize", which names no file a user knows): the hang names the
    line of the job's code that called torch, and the call by its module's name."""
    path = write_probes(TORCH_WAIT, "torchwait.py")
    result = run_cli("run", "--nproc", "1", "-p", "torchwait", "--probe-path", path,
                     "--timeout", "3", "--format", "json")
    assert result.code == 1, result.stderr
    check = checks_by_id(json.loads(result.stdout))["torchwait.wait"]
    assert check["outcome"] == "hang", check
    assert re.fullmatch(r"rank 0: no progress for \d+\.\d s \(timeout 3 s\) in wait; at "
                        r"torchwait\.py:6 probe_torchwait, in torch\.futures\.wait",
                        check["detail"]), check["detail"]

"""The run model both drivers share (envcheck.core), and the proof that they share it:
one scenario run by ``envcheck run`` and by ranks under torchrun gives the same report."""

import os
import re
import sys

import pytest

from conftest import ROOT, STUCK, checks_by_id, load_report, run_cli, torchrun
from envcheck.core import blame, records
from envcheck.core.phases import PhaseTracker, replay
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks  # every test here starts real ranks

TORN = '{"t": "hello", "rank": 1, "time": 1.0, "host": "b"}\n{"t": "env", "ra'


def test_a_torn_line_in_the_middle_is_skipped_and_counted():
    # What rank 0 gathers when rank 1 was killed mid-write: its torn last line ends up
    # in the middle of records.jsonl, followed by rank 2's stream.
    text = TORN + "\n" + '{"t": "hello", "rank": 2, "time": 2.0}\nnot json\n[1, 2]\n'
    recs, torn = records.parse(text)
    assert [(r["t"], r["rank"]) for r in recs] == [("hello", 1), ("hello", 2)]
    assert torn == 3


def test_record_tail_waits_for_a_partial_line_and_skips_a_torn_one(tmp_path):
    path = tmp_path / "records-rank0.jsonl"
    tail = records.RecordTail(str(path))
    assert tail.poll() == []  # no file yet
    path.write_bytes(b'{"t": "hello", "rank": 0, "time": 1}\n{"t": "se')
    assert [r["t"] for r in tail.poll()] == ["hello"]
    with open(path, "ab") as f:
        f.write(b'tup_start", "rank": 0, "time": 2}\n\xff\xfe garbage\n')
    assert [r["t"] for r in tail.poll()] == ["setup_start"]
    assert tail.torn == 1


def test_phase_tracker_follows_a_rank_through_its_life():
    kinds = [("hello", {}), ("setup_start", {}), ("probe_start", {"probe": "p"}),
             ("check_start", {"probe": "p", "check": "c"})]
    tracker = replay([dict(extra, t=t, rank=0, time=float(i)) for i, (t, extra)
                      in enumerate(kinds)])
    assert (tracker.phase, tracker.check, tracker.probe, tracker.started) == \
        ("probe:p", "c", "p", 2.0)
    t = PhaseTracker(started=0.0)
    for rec in ({"t": "check"}, {"t": "probe_end"}, {"t": "teardown_start"}, {"t": "bye"}):
        t.observe(rec, now=5.0)
    assert (t.phase, t.check, t.probe) == ("done", None, None)


def test_hang_blames_the_rank_outside_torch_distributed_before_the_earliest_deadline():
    suspects = [blame.Suspect(0, True, 10.0), blame.Suspect(1, False, 10.2),
                blame.Suspect(2, True, 9.0)]
    assert blame.hang_root(suspects) == 1
    assert blame.hang_root([blame.Suspect(3, True, 5.0), blame.Suspect(1, True, 6.0)]) == 3
    assert blame.hang_root([blame.Suspect(3, False, 5.0), blame.Suspect(1, False, 5.0)]) == 1


def test_hang_blames_the_rank_still_starting_not_the_ranks_at_the_rendezvous():
    """The rendezvous waits for every rank: a rank in setup, whatever its stack shows,
    is waiting for the rank still in startup, even though its own deadline came first."""
    suspects = [blame.Suspect(0, False, 10.0, "setup"), blame.Suspect(1, False, 120.0,
                                                                       "startup"),
                blame.Suspect(2, False, 10.5, "setup")]
    assert blame.hang_root(suspects) == 1
    assert blame.waiting_for(suspects, 1) == [0, 2]
    assert blame.waiting_for(suspects, 0) == []
    # Once every rank is past startup, the stacks decide again.
    assert blame.hang_root([blame.Suspect(0, False, 10.0, "setup"),
                            blame.Suspect(1, True, 9.0, "setup")]) == 0


def test_crash_blames_the_rank_that_did_not_only_react_to_a_peer():
    assert blame.crash_root([blame.Casualty(0, True, 1.0), blame.Casualty(2, False, 3.0),
                             blame.Casualty(1, False, 4.0)]) == 2


def test_the_main_thread_of_a_faulthandler_dump_decides_waiting():
    waiting = ('Thread 0x00007f01 (most recent call first):\n'
               '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n\n'
               'Current thread 0x00007f00 (most recent call first):\n'
               '  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", '
               'line 81 in wrapper\n  File "/tmp/p.py", line 9 in probe_stuck\n')
    sleeping = ('Thread 0x00007f01 (most recent call first):\n'
                '  File "/v/site-packages/torch/distributed/elastic/agent.py", line 1 in x\n\n'
                'Current thread 0x00007f00 (most recent call first):\n'
                '  File "/tmp/p.py", line 7 in probe_stuck\n')
    assert blame.waiting_in_distributed(waiting) is True
    assert blame.waiting_in_distributed(sleeping) is False
    assert blame.waiting_in_distributed("") is False


TORN_WHILE_UNWINDING = os.path.join(ROOT, "tests", "data", "launcher-torn-while-unwinding")


def test_a_rank_torn_down_while_it_unwound_is_judged_by_its_first_dump(tmp_path):
    """A full suite's run of test_launcher's hang test (its --out, kept as it was): rank
    1 sleeps in its check, rank 0 waits in barrier. Rank 0's watcher asked for its stacks
    at its deadline (in barrier: a grace), rank 1's wrote its hang record and ended,
    rank 0's barrier then failed, and torchrun's SIGTERM came while rank 0 formatted that
    error: its stacks file holds both dumps, and no hang record. The first dump is where
    it waited; the second, read before, made rank 0 the root, 'at linecache.py'."""
    with open(os.path.join(TORN_WHILE_UNWINDING, "stacks-rank0.txt")) as f:
        dumps = f.read()
    first = blame.first_dump(dumps)
    assert len(first) < len(dumps) and dumps.startswith(first)
    assert blame.waiting_in_distributed(first) is True
    assert blame.waiting_in_distributed(dumps[len(first):]) is False  # the unwinding
    assert blame.waiting_in_distributed(dumps) is True
    assert [f.function for f in blame.frames(dumps)][:2] == ["barrier", "wrapper"]
    path = tmp_path / "r.json"
    res = run_cli("report", "--records", TORN_WHILE_UNWINDING, "--json", str(path),
                  "--no-color")
    assert res.code == 1, res.stderr
    wait = checks_by_id(load_report(str(path)))["stuck.wait"]
    assert (wait["outcome"], wait["root_rank"]) == ("hang", 1), wait["detail"]
    screen = " ".join(res.stdout.split())
    assert "rank 1: no progress for 3.0 s (timeout 3 s) in wait; at stuck.py:8 " \
           "probe_stuck rank 0: waiting in barrier (distributed_c10d.py:5356 barrier)" \
           in screen, res.stdout


INIT_CLOSED_BY_A_DEAD_PEER = os.path.join(ROOT, "tests", "data",
                                          "launcher-init-closed-by-a-peer-that-died")


def test_an_init_closed_by_a_peer_that_passed_its_own_and_died_is_that_peers_crash(
        tmp_path):
    """A full suite's run (-n 3) of test_launcher's DIE job (its records, kept as they
    were): rank 1's init_process_group passed, it started its check and os._exit'ed there,
    while rank 0's gloo init was still connecting, and failed: 'Connection closed by peer
    ... typically caused by a remote worker crashing'. The report named rank 0's setup as
    the root and held no die.exit (twice in CI before, unexplained); the root is rank 1's
    death."""
    path = tmp_path / "r.json"
    res = run_cli("report", "--records", INIT_CLOSED_BY_A_DEAD_PEER, "--json", str(path),
                  "--no-color")
    assert res.code == 1, res.stderr
    report = load_report(str(path))
    abort = report["attempts"][0]["abort"]
    assert (abort["kind"], abort["root_rank"], abort["phase"]) == ("crash", 1, "probe:die")
    die = checks_by_id(report)["die.exit"]
    assert (die["outcome"], die["root_rank"]) == ("crash", 1)
    assert die["detail"] == ("rank 1 stopped without a hang record or a SIGTERM stack "
                             "dump: it crashed or was killed (its exit code is in the "
                             "launcher's log) in exit")
    # rank 0's own error stays, with the advice that reads it as a peer's end
    init = checks_by_id(report)["setup.init_process_group"]
    assert init["ranks"]["0"]["outcome"] == "failed"
    assert init["advice"].startswith("a rank's connection to another rank was closed: "
                                     "that peer exited or crashed first")


def _normal(text):
    """Timings vary run to run (which rank was slowest too), and so does the free space
    of the temporary directory (other tests write there); the words must not."""
    text = re.sub(r"\(rank \d+, slowest of", "(rank R, slowest of", text or "")
    text = re.sub(r"\(\d+(\.\d+)? [KMGT]iB free\)", "(N free)", text)
    return re.sub(r"\d+\.\d+ ?s\b", "N s", text)


# The rendezvous pre-checks describe each driver's own rendezvous (envcheck run's store
# on 127.0.0.1, skipped; torchrun's agent store on localhost, connected to): only that
# neither finds a fault must agree.
_PRECHECKS = ("setup.master_addr", "setup.master_port", "setup.host_name",
              "setup.socket_interface")


def _essence(report):
    assert all(c["outcome"] in ("passed", "skipped") for c in report["checks"]
               if c["id"] in _PRECHECKS)
    return [(c["id"], c["outcome"], c["root_rank"], c["verdict"], _normal(c["detail"]))
            for c in report["checks"] if c["id"] not in _PRECHECKS]


def test_one_scenario_both_ways_gives_the_same_report(tmp_path):
    """Collectives pass, then rank 1 hangs while rank 0 waits in a barrier: envcheck run
    and a torchrun job must give the same checks, outcomes, root ranks, verdicts, words."""
    probe = tmp_path / "stuck.py"
    probe.write_text(STUCK)
    args = ["-p", "collectives", "-p", "stuck", "--probe-path", str(probe),
            "--timeout", "3"]
    local = tmp_path / "local.json"
    res = run_cli("run", "--nproc", "2", "--json", str(local), "-q", *args)
    assert res.code == 1, res.stderr

    out = tmp_path / "out"
    job = torchrun(sys.executable, 1, 0, 2, free_port(), ["--out", str(out), *args],
                   str(tmp_path))
    job.communicate(timeout=120)
    assert job.returncode != 0  # the hung rank exited 124, torchrun tore the job down
    launched = tmp_path / "launched.json"
    res = run_cli("report", "--records", str(out), "--json", str(launched))
    assert res.code == 1, res.stderr

    a, b = load_report(str(local)), load_report(str(launched))
    assert _essence(a) == _essence(b)
    wait = checks_by_id(a)["stuck.wait"]
    assert (wait["outcome"], wait["root_rank"]) == ("hang", 1)
    assert _normal(wait["detail"]) == \
        "rank 1: no progress for N s (timeout 3 s) in wait; at stuck.py:8 probe_stuck"
    assert [(x["abort"]["kind"], x["abort"]["root_rank"], x["abort"]["phase"])
            for x in (a["attempts"][0], b["attempts"][0])] == [("hang", 1, "probe:stuck")] * 2
    for report in (a, b):
        assert "probe_stuck" in checks_by_id(report)["stuck.wait"]["ranks"]["1"]["stack"]


STRAGGLER = '''
import os
import time


def probe_straggler(ctx):
    """one rank (ENVCHECK_TEST_STUCK) sleeps in its own code; the others wait in a barrier"""
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == int(os.environ["ENVCHECK_TEST_STUCK"]):
            time.sleep(600)
        dist.barrier()


def probe_lingering(ctx):
    """rank 0 sleeps in its own code; rank 2 keeps running past SIGTERM (a handler of
    its own, as a framework's graceful shutdown has); ranks 1 and 2 wait in a barrier"""
    import signal
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == 0:
            time.sleep(600)
        if ctx.rank == 2:
            signal.signal(signal.SIGTERM, lambda signum, frame: None)
        dist.barrier()


def probe_stopped(ctx):
    """rank 1 stops itself (SIGSTOP), as Ctrl-Z or a debugger would"""
    import signal
    import torch.distributed as dist
    with ctx.check("frozen"):
        if ctx.rank == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.barrier()
'''


def _run_straggler(tmp_path, probe, nproc=3, env=None):
    """envcheck run of one of STRAGGLER's probes, --timeout 3: (result, checks by id)."""
    path = tmp_path / "straggler.py"
    path.write_text(STRAGGLER)
    report = tmp_path / "r.json"
    res = run_cli("run", "--nproc", str(nproc), "--probe-path", str(path), "-p", probe,
                  "--timeout", "3", "--json", str(report), env=env)
    assert res.code == 1, res.stderr
    return res, checks_by_id(load_report(report))


@pytest.mark.parametrize("stuck", [0, 1, 2])
def test_the_straggler_is_named_whichever_rank_it_is(tmp_path, stuck):
    res, checks = _run_straggler(tmp_path, "straggler", env={"ENVCHECK_TEST_STUCK": str(stuck)})
    wait = checks["straggler.wait"]
    assert (wait["outcome"], wait["root_rank"]) == ("hang", stuck)
    assert re.fullmatch(r"rank %d: no progress for \d+\.\d s \(timeout 3 s\) in wait; "
                        r"at straggler\.py:11 probe_straggler" % stuck, wait["detail"])
    others = ",".join(str(r) for r in range(3) if r != stuck)
    # The table itself says where every rank is: no JSON needed.
    lines = [line.strip() for line in res.stdout.splitlines()]
    assert "rank %d: at straggler.py:11 probe_straggler" % stuck in lines
    assert any(re.fullmatch(r"ranks %s: waiting in barrier \(distributed_c10d\.py:\d+ "
                            r"barrier\)" % others, line) for line in lines), res.stdout


def test_a_rank_that_outlives_its_sigterm_is_still_where_the_hang_found_it(tmp_path):
    # envcheck stops the ranks of a hang: rank 0, the straggler, exits at its SIGTERM;
    # rank 2 does not, and its barrier then fails with gloo's "Connection closed by
    # peer", which it records. That is its reaction to the stop, not its outcome: the
    # report says where the hang found it, as when its own SIGTERM comes first (a CI
    # run read rank 2's record so, this process descheduled between the two SIGTERMs).
    res, checks = _run_straggler(tmp_path, "lingering")
    wait = checks["lingering.wait"]
    assert (wait["outcome"], wait["root_rank"]) == ("hang", 0), wait
    assert wait["ranks"]["2"]["outcome"] == "hang", wait["ranks"]["2"]
    assert wait["ranks"]["2"]["where"]["waiting_in"] == "barrier", wait["ranks"]["2"]
    lines = [line.strip() for line in res.stdout.splitlines()]
    assert any(re.fullmatch(r"ranks 1,2: waiting in barrier \(distributed_c10d\.py:\d+ "
                            r"barrier\)", line) for line in lines), res.stdout


def test_a_stopped_rank_is_said_to_be_stopped(tmp_path):
    res, checks = _run_straggler(tmp_path, "stopped", nproc=2)
    frozen = checks["stopped.frozen"]
    assert (frozen["outcome"], frozen["root_rank"]) == ("hang", 1)
    assert frozen["detail"].endswith(
        "in frozen; stopped (state T: SIGSTOP, Ctrl-Z or a debugger), so it showed no "
        "stack and was killed at once (SIGKILL)")
    assert frozen["ranks"]["1"]["where"] == {"at": None, "waiting_in": None, "stopped": True}
    assert "rank 1: stopped (state T), no stack" in res.stdout


def test_a_rank_meets_rank_0s_store_the_moment_it_listens():
    """Ranks forked at one instant: a store client that connects before rank 0 listens
    sleeps torch's backoff (0.5 to 1.5 s). The others wait for the listener instead, read
    from /proc/net/tcp: a bound socket is not enough, a listening one (IPv4 or IPv6) is."""
    import socket
    import threading

    from envcheck.worker.runtime import _await_listener

    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, 0))
            except OSError:  # a machine without IPv6: the IPv4 case above still ran
                assert family == socket.AF_INET6
                continue
            port = s.getsockname()[1]
            assert _await_listener(port, 0.05) is False
            timer = threading.Timer(0.2, s.listen)
            timer.start()
            try:
                assert _await_listener(port, 60) is True
            finally:
                timer.join()


def test_a_device_index_taken_from_the_global_rank_gets_the_seeds_fix():
    # launch.device runs on GPUs only; its judgement is this function (seed 004).
    from envcheck.probes.launch import LOCAL_FROM_GLOBAL_ADVICE, device_problem

    assert device_problem(2, 0, 2, 0, 0) is None
    assert device_problem(2, 0, 2, 2, 2) == (
        "rank 2 (local rank 0) uses cuda:2, expected cuda:0: its device index is the "
        "global rank", LOCAL_FROM_GLOBAL_ADVICE)
    # on the first host RANK == LOCAL_RANK: the same mistake is invisible there
    assert device_problem(1, 1, 2, 1, 1) is None
    assert device_problem(1, 0, 2, 0, 1) == (
        "rank 1 (local rank 0) uses cuda:1, expected cuda:0",
        "call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) in every rank")

"""``envcheck/launch/`` is the one place a process is made or signalled, or takes signals.

A new engineer asks where a process is born and where it is killed: ``launch.procs``.
These tests read every module of envcheck and fail when one outside ``launch/`` makes a
process (subprocess, fork, exec, spawn), sends a signal (kill, killpg, pidfd) or sets
a handler (signal.signal: ``launch/signals.py``), and
when ``launch/`` itself reaches beyond the stdlib (ranks import it under an interpreter
with only torch) or into the worker, the run driver or the probes.
"""

import ast
import os
import sys

import pytest

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "envcheck")
LAUNCH = os.path.join(PACKAGE, "launch")

# Calls that make a process or send a signal, as ``module.function``.
MAKES = {"os.fork", "os.forkpty", "os.system", "os.popen", "os.posix_spawn",
         "os.posix_spawnp", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
         "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.execv", "os.execve",
         "os.execvp", "os.execvpe", "os.execl", "os.execle", "os.execlp", "os.execlpe",
         "pty.fork", "pty.spawn"}
SIGNALS = {"os.kill", "os.killpg", "signal.pidfd_send_signal", "signal.pthread_kill"}
# Handlers: which signals a process takes, and how, is launch/signals.py's.
HANDLES = {"signal.signal"}
# Modules whose only use is to make processes.
PROCESS_MODULES = {"subprocess", "multiprocessing", "concurrent.futures.process"}
# Methods that signal a process a Popen or multiprocessing handle holds.
SIGNAL_METHODS = {"send_signal", "terminate"}


def _files(top):
    for root, _, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def offences(source):
    """Where ``source`` makes a process or sends a signal: ['line N: what']."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROCESS_MODULES or alias.name in PROCESS_MODULES:
                    found.append("line %d: import %s" % (node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module.split(".")[0] in PROCESS_MODULES or module in PROCESS_MODULES:
                found.append("line %d: from %s import" % (node.lineno, module))
            for alias in node.names:
                if "%s.%s" % (module, alias.name) in MAKES | SIGNALS | HANDLES:
                    found.append("line %d: from %s import %s" % (node.lineno, module,
                                                                 alias.name))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if isinstance(func.value, ast.Name):
                name = "%s.%s" % (func.value.id, func.attr)
                if name in MAKES | SIGNALS | HANDLES:
                    found.append("line %d: %s()" % (node.lineno, name))
            if func.attr in SIGNAL_METHODS:
                found.append("line %d: .%s()" % (node.lineno, func.attr))
    return found


def test_the_reader_finds_every_way_to_make_or_signal_a_process():
    """The guard below is only as good as this reader: each of these must be caught."""
    cases = {
        "import subprocess": 1,
        "from subprocess import Popen": 1,
        "import multiprocessing.pool": 1,
        "from concurrent.futures.process import ProcessPoolExecutor": 1,
        "import os\npid = os.fork()": 1,
        "import os\nos.kill(1, 9)": 1,
        "import os\nos.killpg(1, 9)": 1,
        "from os import kill": 1,
        "import os\nos.execv('/bin/true', ['true'])": 1,
        "import signal\nsignal.pidfd_send_signal(3, 9)": 1,
        "proc.send_signal(15)": 1,
        "proc.terminate()": 1,
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)": 1,
        # what is not: reading a process, or a procs call
        "import os\nos.getpid(); os.waitpid(1, 0)": 0,
        "from envcheck.launch import procs\nprocs.send(1, 9)": 0,
    }
    for source, count in cases.items():
        assert len(offences(source)) == count, (source, offences(source))


@pytest.mark.parametrize("path", [p for p in sorted(_files(PACKAGE))
                                  if not p.startswith(LAUNCH + os.sep)],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_no_module_outside_launch_makes_or_signals_a_process(path):
    with open(path, encoding="utf-8") as f:
        bad = offences(f.read())
    assert not bad, ("%s makes or signals a process, or handles a signal, itself; use "
                     "envcheck.launch.procs or envcheck.launch.signals: %s"
                     % (os.path.relpath(path, ROOT), bad))


def test_launch_does_make_and_signal_processes():
    """The rule has a home: procs is where those calls are (else the guard is vacuous)."""
    with open(os.path.join(LAUNCH, "procs.py"), encoding="utf-8") as f:
        found = " ".join(offences(f.read()))
    for call in ("import subprocess", "os.fork()", "os.kill()", "os.killpg()",
                 "signal.pidfd_send_signal()"):
        assert call in found, call


def _imports(path):
    package = os.path.relpath(os.path.dirname(path), ROOT).split(os.sep)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - (node.level - 1)])
                module = base + ("." + node.module if node.module else "")
                if not node.module:
                    for alias in node.names:
                        yield "%s.%s" % (module, alias.name)
                    continue
                yield module
            else:
                yield node.module


@pytest.mark.parametrize("path", sorted(_files(LAUNCH)), ids=lambda p: os.path.relpath(p, ROOT))
def test_launch_imports_only_the_stdlib_and_itself(path):
    stdlib = set(sys.stdlib_module_names)
    allowed = ("envcheck.launch", "envcheck.core.errors")
    bad = [name for name in _imports(path) if name.split(".")[0] not in stdlib
           and not any(name == a or name.startswith(a + ".") for a in allowed)]
    assert not bad, "launch/ is stdlib only (ranks import it): %s" % bad


def test_one_deadline_rule_startup_phase_and_one_grace_per_phase():
    """The rule both drivers follow (launch/watchdog.py), on the phase tracker they use."""
    from envcheck.core.phases import PhaseTracker
    from envcheck.launch.watchdog import Watchdog, grace_for

    tracker = PhaseTracker(started=100.0)
    dog = Watchdog(tracker, timeout=10.0, startup_timeout=120.0, limits={"report": 300.0},
                   grace=grace_for(10.0))
    # startup: the startup limit, from when the start began
    assert (dog.limit(), dog.deadline()) == (120.0, 220.0)
    assert not dog.expired(220.0) and dog.expired(220.5)
    # a later phase: the phase limit, counted afresh
    tracker.observe({"t": "setup_start"}, now=130.0)
    assert (dog.limit(), dog.deadline()) == (10.0, 140.0)
    # one grace for the phase (a rank waiting on a peer), never a second
    assert dog.extend() is True
    assert dog.deadline() == 142.0
    assert dog.extend() is False
    assert dog.deadline() == 142.0
    # the next phase starts without it, and may have it once again
    tracker.observe({"t": "probe_start", "probe": "collectives"}, now=141.0)
    assert dog.deadline() == 151.0
    assert dog.extend() is True and dog.deadline() == 153.0
    # a phase with a limit of its own
    tracker.observe({"t": "report_start"}, now=200.0)
    assert dog.limit() == 300.0
    # the supervisor's: no grace at all
    plain = Watchdog(PhaseTracker(started=0.0), timeout=10.0, startup_timeout=60.0)
    assert plain.extend() is False and plain.limit() == 60.0
    assert [grace_for(t) for t in (1, 10, 60)] == [1.0, 2.0, 5.0]


def test_the_fork_server_imports_what_its_forks_will_run_once_before_forking():
    """--resolve: the rank's module is imported in the server (every fork shares it),
    not after each fork (17 ms a rank for envcheck.worker.rank with torch imported); a
    target that cannot be imported is left for the fork to meet."""
    import subprocess

    code = ("import sys\n"
            "from envcheck.launch.forkserver import Server, _args\n"
            "args = _args(['--init', 'x:y', '--resolve', 'envcheck.worker.rank:main',\n"
            "              '--resolve', 'envcheck.no_such_module:main'])\n"
            "assert 'envcheck.worker.rank' not in sys.modules\n"
            "Server(None).resolve(args.resolve)\n"
            "print('envcheck.worker.rank' in sys.modules, 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    # imported, and importing the rank's module does not import torch by itself
    assert proc.stdout.split() == ["True", "False"]


def test_both_drivers_start_their_fork_server_with_the_ranks_target():
    from envcheck.run import spawn
    from envcheck.worker import hostzygote, launched

    for path, target in ((spawn.__file__, spawn.RANK_TARGET),
                         (hostzygote.__file__, hostzygote.RANK_TARGET)):
        with open(path, encoding="utf-8") as f:
            assert '"--resolve", RANK_TARGET' in f.read(), path
    assert launched.RANK_TARGET == hostzygote.RANK_TARGET


def test_a_rank_group_ends_its_ranks_and_their_children_and_signals_only_its_own(tmp_path):
    """launch/group.py with real processes: close() ends every rank and what each
    started in its session (SIGTERM ignored: SIGKILL after the grace); a rank seen to
    end is not signalled again; a rank whose proof fails is not signalled at all."""
    import signal
    import subprocess
    import time

    from envcheck.launch.group import RankGroup

    child_pids = tmp_path / "children"
    script = ("import os, signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "open(sys.argv[1] + sys.argv[2], 'w').write(str(c.pid))\n"
              "time.sleep(60)\n")
    group = RankGroup()
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(child_pids), str(r)],
                              start_new_session=True) for r in range(3)]
    for rank, proc in enumerate(ranks):
        group.add(rank, proc)
    deadline = time.monotonic() + 30
    while not all(os.path.exists("%s%d" % (child_pids, r)) for r in range(3)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    children = [int(open("%s%d" % (child_pids, r)).read()) for r in range(3)]
    assert group.alive() == [0, 1, 2]
    # The proof decides: a rank it does not prove is never signalled.
    refused = RankGroup()
    refused.add(0, ranks[0], proof=lambda pid: False)
    assert refused.signal(0, signal.SIGKILL) is False and ranks[0].poll() is None
    group.close(grace=0.3)
    assert group.ended() and [p.returncode for p in ranks] == [-signal.SIGKILL] * 3
    for pid in children:  # in the ranks' sessions: gone with them
        deadline = time.monotonic() + 10
        while os.path.exists("/proc/%d" % pid) and open(
                "/proc/%d/stat" % pid).read().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline, "child %d outlived its rank" % pid
            time.sleep(0.05)
    assert group.signal(1, signal.SIGTERM) is False  # seen to end: its PID is not its own

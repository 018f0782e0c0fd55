"""Shared helpers: run the real CLI in a subprocess and read its JSON report.

No mocks of torch.distributed anywhere: every run starts real ranks with real gloo
process groups on CPU.
"""

import dataclasses
import fcntl
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "envcheck", "report", "schema", "report.schema.json")


@dataclasses.dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


# The test being run: run_cli and torchrun refuse to start ranks for a test not marked
# so, which keeps the quick lane (pytest -m "not ranks and not cluster") quick.
_running = []


def pytest_configure(config):
    """Compile envcheck's modules once, before any test starts a process that imports
    them. The tests start thousands (the CLI, ranks, zygotes, relays), and where
    PYTHONDONTWRITEBYTECODE is set (as on this project's machines) each compiled its
    modules again from source: about 60 ms of each CLI start. A wheel's install compiles
    them too, so this is how users run envcheck. Once, in xdist's controller."""
    if not hasattr(config, "workerinput"):
        import compileall

        compileall.compile_dir(os.path.join(ROOT, "envcheck"), quiet=2)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _running[:] = [item]


def starts_ranks(what):
    """Fail the current test unless it is marked ``ranks`` or ``cluster``: it is about to
    start real ranks (``what``), which the quick lane never does."""
    item = _running[0] if _running else None
    if item is not None and not (item.get_closest_marker("ranks")
                                 or item.get_closest_marker("cluster")):
        pytest.fail("%s starts real ranks (%s): mark it @pytest.mark.ranks (or the "
                    "module's pytestmark), so that the quick lane leaves it out"
                    % (item.nodeid, what), pytrace=False)


def run_cli(*args, timeout=180, env=None, cwd=None):
    if args[:1] == ("run",) and not {"--help", "-h"} & set(args):
        starts_ranks("envcheck run")
    full_env = dict(os.environ)
    full_env.pop("SLURM_PROCID", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd or ROOT,
                          stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@functools.lru_cache(maxsize=None)
def _report_validator():
    """The report schema's validator, its schema checked once: jsonschema.validate checks
    the schema and builds a validator again at every call (60 ms each, over 8 times the
    validation itself, in hundreds of tests)."""
    import jsonschema

    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_report(data):
    import jsonschema

    error = jsonschema.exceptions.best_match(_report_validator().iter_errors(data))
    if error is not None:
        raise error
    return data


def load_report(path):
    with open(path, encoding="utf-8") as f:
        return validate_report(json.load(f))


def checks_by_id(report):
    return {c["id"]: c for c in report["checks"]}


def torch_only_python():
    """An interpreter with this torch and nothing else (no numpy, none of envcheck's
    dependencies), in a venv built once per machine (about 30 s)."""
    version = importlib.metadata.version("torch").split("+")[0]
    base = os.environ.get("ENVCHECK_TEST_VENVS") or os.path.join(
        tempfile.gettempdir(), "envcheck-test-venvs")
    os.makedirs(base, exist_ok=True)
    venv = os.path.join(base, "nonumpy-torch%s" % version)
    python = os.path.join(venv, "bin", "python")
    done = os.path.join(venv, ".envcheck-complete")
    with open(os.path.join(base, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build, however many test processes
        if not os.path.exists(done):
            shutil.rmtree(venv, ignore_errors=True)
            steps = ([sys.executable, "-m", "venv", venv],
                     [python, "-m", "pip", "install", "-q", "torch==%s" % version])
            for step in steps:
                proc = subprocess.run(step, capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    shutil.rmtree(venv, ignore_errors=True)
                    pytest.skip("cannot build a venv with torch==%s and no numpy (%s): %s"
                                % (version, " ".join(step[:3]),
                                   (proc.stderr or proc.stdout).strip()[-300:]))
            open(done, "w").close()
    probe = subprocess.run([python, "-c", "import numpy"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("the venv at %s has numpy after all: torch pulled it in" % venv)
    return python


def leftovers(marker):
    """PIDs of live processes that inherited this run's marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if ("ENVCHECK_TEST_MARKER=%s" % marker).encode() in env.split(b"\0") and state != "Z":
            found.append(int(pid))
    return found


@pytest.fixture
def write_probes(tmp_path):
    """Write a custom probe file (``def probe_NAME(ctx)``) and return its path."""
    def write(source, name="my_probes.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return str(path)
    return write


# A hang as users meet it: rank 1 is stuck in its own code, rank 0 waits for it.
STUCK = '''
def probe_stuck(ctx):
    """rank 1 sleeps; the others wait for it in a barrier"""
    import time
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == 1:
            time.sleep(600)
        dist.barrier()
'''


def launcher_env(**extra):
    """This environment without any launcher's variables, envcheck on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in (
               "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT", "GROUP_RANK")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def torchrun(python, nnodes, node_rank, nproc, port, args, cwd, host=None, env=None):
    """One torchrun agent running launcher mode (ENVCHECK_HOST=host plays a node). The
    rendezvous id is this test process's own: two tests in two xdist workers that were
    handed the same free port would otherwise join one rendezvous, each agent pairing
    with the other test's (one test's agent then waited out its timeout for a peer that
    had joined the other test)."""
    starts_ranks("torchrun")
    cmd = [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
           "--node-rank", str(node_rank), "--nproc-per-node", str(nproc),
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:%d" % port,
           "--rdzv-id", "envcheck-test-%d" % os.getpid(), "-m", "envcheck.worker.launched",
           *args]
    extra = dict(env or {}, **({"ENVCHECK_HOST": host} if host else {}))
    return subprocess.Popen(cmd, cwd=cwd, env=launcher_env(**extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


# --- The test cluster (tests/cluster): one per test session, shared by every test ---

REQUIRE_CLUSTER = "ENVCHECK_REQUIRE_CLUSTER"  # set by .ci/run: a skip is then a failure


def _require(what, why):
    """Skip with one line where ``what`` cannot run here; fail instead under CI
    (REQUIRE_CLUSTER), which must never skip these tests."""
    if not why:
        return
    if os.environ.get(REQUIRE_CLUSTER):
        pytest.fail("the %s is required here (%s=1) but cannot start: %s"
                    % (what, REQUIRE_CLUSTER, why))
    pytest.skip("no %s on this machine: %s" % (what, why))


@pytest.fixture(scope="session")
def _cluster_session():
    from cluster import Cluster, unavailable

    _require("test cluster", unavailable())
    # The SLURM fixture's directory: kept visible at the same path on every host.
    base = tempfile.mkdtemp(prefix="envcheck-cluster-")
    slurm_dir = os.path.join(base, "slurm")
    os.makedirs(slurm_dir)
    try:
        with Cluster(3, base=base, keep=(slurm_dir,)) as c:
            c.slurm_dir = slurm_dir
            yield c
    finally:
        shutil.rmtree(base, ignore_errors=True)  # the hosts' /tmp and the shared dir too


@pytest.fixture
def cluster(_cluster_session):
    """The session's 3-host cluster, as it was built: whatever a test changed (links,
    /etc/hosts) is put back after it, and a test that leaves a process fails."""
    c = _cluster_session
    yield c
    left = c.wait_gone(15.0)
    for h in c.hosts:
        h.kill_all()
        h.link(True)
        h.write_hosts()
    assert not left, "processes left on the cluster's hosts: %s" % left


@pytest.fixture(scope="session")
def _slurm_session(_cluster_session):
    from cluster.slurm import Slurm, unavailable

    _require("test SLURM", unavailable())
    with Slurm(_cluster_session, _cluster_session.slurm_dir) as s:
        yield s


@pytest.fixture
def slurm(_slurm_session, cluster):
    """A real SLURM on the session's cluster (tests/cluster/slurm.py): munged, slurmctld
    on node1, a slurmd on every host, all idle. Started once per session; after each
    test, as ``cluster``, nothing may be left on a host (slurmd itself excepted) and
    every node must be idle again."""
    _slurm_session.wait_idle(60.0)  # after a torchrun test that cut a host's link, say
    yield _slurm_session
    _slurm_session.wait_idle(30.0)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's ``-n 2 --dist loadgroup``): every test on the
    test cluster runs in the same worker, the one that builds it, once: the cluster's
    hosts have fixed names and addresses, so two workers cannot each build one. Those
    tests are marked ``cluster`` (the quick lane leaves them out)."""
    for item in items:
        if {"cluster", "slurm", "_cluster_session"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("cluster"))
            item.add_marker(pytest.mark.cluster)


def srun_tasks(cwd, hosts, args, extra=None, job_id="36"):
    """Launcher-mode ranks started as srun starts them, one task per host (ENVCHECK_HOST
    plays each host), with extra[rank] added to that rank's environment; their
    (stdout, stderr) after they end, and the Popen objects."""
    from envcheck.run.supervisor import free_port

    starts_ranks("srun")
    port, procs, n = free_port(), [], len(hosts)
    for rank, host in enumerate(hosts):
        env = launcher_env(SLURM_PROCID=str(rank), SLURM_LOCALID="0", SLURM_NODEID=str(rank),
                           SLURM_NTASKS=str(n), SLURM_NNODES=str(n),
                           SLURM_STEP_TASKS_PER_NODE="1(x%d)" % n,
                           SLURM_TASKS_PER_NODE="1(x%d)" % n, SLURM_JOB_ID=job_id,
                           SLURM_STEP_ID="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                           ENVCHECK_HOST=host, **((extra or {}).get(rank) or {}))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "envcheck.worker.launched", *args], env=env, cwd=str(cwd),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL))
    return [p.communicate(timeout=180) for p in procs], procs

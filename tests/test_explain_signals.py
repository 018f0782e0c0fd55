"""torchrun stopped by a signal from outside (issue #34, phase Y), observed here with a
real torchrun (2 ranks) started under nohup, and a real signal; the log it leaves is what
explain reads:

- SIGHUP, the terminal's end: torch elastic installs its own SIGHUP handler, which
  replaces nohup's ignore, and stops every rank (launch.hangup);
- SIGTERM, what a scheduler or kill sends: the agent's SignalException is its reaction,
  never the job's own error (launch.agent_signalled).
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import launcher_env, starts_ranks
from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks

# Each rank says it started, then trains (sleeps) until it is stopped
TRAIN = '''
import os
import sys
import time
open(os.path.join(sys.argv[1], "rank%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(600)
'''


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig, cause, says", [
    (signal.SIGHUP, "launch.hangup", "nohup does not keep it running"),
    (signal.SIGTERM, "launch.agent_signalled", "which is not the job's own error"),
], ids=["SIGHUP", "SIGTERM"])
def test_torchrun_ended_by_a_signal_is_named_by_it(sig, cause, says, tmp_path):
    starts_ranks("torchrun")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    log = tmp_path / "train.log"
    with open(log, "w") as out:
        job = subprocess.Popen(
            ["nohup", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
             "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:%d" % free_port(),
             str(script), str(tmp_path)],
            cwd=tmp_path, env=launcher_env(), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / ("rank%d" % r)).exists() for r in (0, 1)):
            assert job.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(0.5)  # both ranks past their marker (a rank may be writing its pid)
        ranks = [int((tmp_path / ("rank%d" % r)).read_text()) for r in (0, 1)]
        job.send_signal(sig)  # SIGHUP: what the terminal's end sends nohup's child
        assert job.wait(60) != 0, log.read_text()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in ranks)  # nohup kept nothing running
    text = log.read_text()
    # the signal by its number: Python 3.11 formats signal.Signals so
    assert "Received %d death signal, shutting down workers" % sig in text, text
    assert "got signal: %d" % sig in text, text
    result = command.explain([str(log)], matrix=matrix_load.load())
    assert [f.signature.id for f in result.findings] == [cause], text
    assert says in result.findings[0].cause

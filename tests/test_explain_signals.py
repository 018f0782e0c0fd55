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
from envcheck.launch import procs
from envcheck.matrix import load as matrix_load
from envcheck.run.supervisor import free_port

pytestmark = pytest.mark.ranks

# Each rank says it started (its pid, in a file renamed into place whole), then trains
# (sleeps) until it is stopped
TRAIN = '''
import os
import sys
import time
mark = os.path.join(sys.argv[1], "rank%s" % os.environ["RANK"])
with open(mark + ".part", "w") as f:
    f.write(str(os.getpid()))
os.rename(mark + ".part", mark)
time.sleep(600)
'''


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
    marks = [tmp_path / ("rank%d" % r) for r in (0, 1)]
    try:
        deadline = time.monotonic() + 120
        while not all(m.exists() for m in marks):
            assert job.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        ranks = [int(m.read_text()) for m in marks]
        job.send_signal(sig)  # SIGHUP: what the terminal's end sends nohup's child
        assert job.wait(60) != 0, log.read_text()
        deadline = time.monotonic() + 30
        while any(procs.alive(pid) for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(procs.alive(pid) for pid in ranks)  # nohup kept nothing running
    finally:  # a failed test leaves no torchrun and no rank behind
        if job.poll() is None:
            job.kill()
            job.wait()
        for m in marks:
            if m.exists() and procs.alive(int(m.read_text())):
                os.kill(int(m.read_text()), signal.SIGKILL)
    text = log.read_text()
    # the signal by its number: Python 3.11 formats signal.Signals so
    assert "Received %d death signal, shutting down workers" % sig in text, text
    assert "got signal: %d" % sig in text, text
    result = command.explain([str(log)], matrix=matrix_load.load())
    assert [f.signature.id for f in result.findings] == [cause], text
    assert says in result.findings[0].cause

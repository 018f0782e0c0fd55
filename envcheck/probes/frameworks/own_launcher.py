"""Fabric under its own launcher: ``python train.py`` with ``Fabric(devices=2).launch()``,
where rank 0 starts the other ranks itself.

Rank 0's launcher then holds the ``subprocess.Popen`` handles of the ranks it started,
and the model ``fabric.setup`` returns reaches the launcher through its strategy:
``copy.deepcopy`` of it fails on rank 0 only ("cannot pickle '_thread.lock' object"),
even for a model that holds no process group, and rank 1, whose launcher started
nothing, copies fine and then dies at its next collective when rank 0 exits ("Connection
closed by peer"). Under torchrun, srun or envcheck's own ranks the launcher starts
nothing and the same deepcopy works (observed with Lightning 2.6.6 and torch 2.13.0).

envcheck's ranks were started by envcheck, so this cannot be seen in them: rank 0 runs
a small real job the way a user does, as a subprocess in its own session, with none of
the launcher's variables, and reads what each of its ranks wrote.
"""

import json
import os
import re
import signal
import sys
import time

from ...launch import procs

# The job: each rank writes what it did, a JSON line per step, to OUT/rank{N}.jsonl. A
# rank whose deepcopy of the Fabric-wrapped model raised exits on it, as an uncaught
# exception in a training script would; the others go on to the next collective.
SCRIPT = r'''
import copy, json, os, sys, traceback
out = sys.argv[1]
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
path = os.path.join(out, "rank%d.jsonl" % fabric.global_rank)


def say(step, error=None):
    with open(path, "a") as f:
        f.write(json.dumps({"step": step, "error": error}) + "\n")


def first(exc):
    lines = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, lines[0][:300] if lines else "")


torch.manual_seed(0)
model = fabric.setup(torch.nn.Linear(4, 4))
say("setup")
try:
    copy.deepcopy(model.module)
    say("deepcopy_module")
except Exception as exc:
    say("deepcopy_module", first(exc))
try:
    copy.deepcopy(model)
    say("deepcopy_wrapped")
except Exception as exc:
    say("deepcopy_wrapped", first(exc))
    sys.exit(1)
try:
    fabric.barrier()
    say("barrier")
except Exception as exc:
    say("barrier", first(exc))
    sys.exit(1)
'''

# The variables that make Fabric believe another launcher started it.
_LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "ROLE_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
_LAUNCHER_PREFIXES = ("TORCHELASTIC_", "SLURM_", "PMI_", "OMPI_", "ACCELERATE_")

# Why the check did not run, where Lightning is installed but not asked for: the job costs
# more than the rest of the default suite together. What it would show, from envcheck's
# own observed runs (matrix: frameworks.toml, with their evidence), and how to run it.
NOT_ASKED = (
    "not run (a job of its own, 10-45 s): envcheck run --framework lightning runs it. "
    "Known from envcheck's own runs (Lightning 2.6.6, torch 2.13.0; its matrix, "
    "frameworks.toml): under Fabric's own launcher (python train.py), copy.deepcopy of "
    "the model fabric.setup returned raises on rank 0 only (TypeError: cannot pickle "
    "'_thread.lock' object) and rank 1 then dies at its next collective (Connection "
    "closed by peer); copy.deepcopy(model.module) works")

# Two Python processes importing torch and Lightning: seconds each, more on a loaded
# machine. Past this the job is killed and the check says so.
JOB_TIMEOUT_S = 45.0


def _environment():
    env = {k: v for k, v in os.environ.items()
           if k not in _LAUNCHER_VARS and not k.startswith(_LAUNCHER_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_job(workdir, timeout_s=JOB_TIMEOUT_S):
    """{"ranks": {rank: {step: error or None}}, "exit": code or None, "tail": text,
    "timed_out": bool}: the job run under Fabric's launcher in ``workdir``."""
    script = os.path.join(workdir, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    log = os.path.join(workdir, "job.log")
    with open(log, "wb") as out:
        # Its own session: the whole job (rank 0 and the rank it starts) can be killed
        # as one, and nothing of it outlives the check.
        proc = procs.popen([sys.executable, script, workdir], cwd=workdir,
                           env=_environment(), stdin=procs.DEVNULL, stdout=out,
                           stderr=procs.STDOUT, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except procs.TimeoutExpired:
            timed_out = True
        finally:
            procs.send_group(proc.pid, signal.SIGKILL)  # rank 1 may outlive rank 0
            proc.wait()
    ranks = {}
    for rank in (0, 1):
        path = os.path.join(workdir, "rank%d.jsonl" % rank)
        steps = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    steps[entry["step"]] = entry.get("error")
        ranks[rank] = steps
    with open(log, "rb") as f:
        tail = f.read()[-2000:].decode("utf-8", "replace")
    return {"ranks": ranks, "exit": None if timed_out else proc.returncode, "tail": tail,
            "timed_out": timed_out, "seconds": time.monotonic()}


def _short(error):
    """gloo's words without its source path and its closing hint: "RuntimeError:
    Connection closed by peer [127.0.0.1]:15575"."""
    text = re.sub(r"\[[^\]]*\.cc:\d+\]\s*", "", error or "")
    return text.split(". This is typically")[0][:200]


def verdict(job):
    """(failed, words): what the job says about deepcopy under Fabric's own launcher."""
    if job["timed_out"]:
        return True, ("the job under Fabric's own launcher did not finish in %g s (killed)"
                      % JOB_TIMEOUT_S)
    r0, r1 = job["ranks"][0], job["ranks"][1]
    if "setup" not in r0 or "setup" not in r1:
        last = (job["tail"].strip().splitlines() or ["no output"])[-1]
        return True, ("the job under Fabric's own launcher did not reach fabric.setup on "
                      "both ranks (exit %s): %s" % (job["exit"], last[:300]))
    wrapped = {r: steps.get("deepcopy_wrapped") for r, steps in ((0, r0), (1, r1))
               if "deepcopy_wrapped" in steps}
    module_ok = all("deepcopy_module" in s and s["deepcopy_module"] is None for s in (r0, r1))
    failed = sorted(r for r, e in wrapped.items() if e)
    module = ("copy.deepcopy(model.module) worked on both ranks" if module_ok else
              "copy.deepcopy(model.module) failed too")
    if not failed:
        return False, ("under Fabric's own launcher (python train.py, rank 0 started rank 1) "
                       "copy.deepcopy of the model fabric.setup returned worked on both "
                       "ranks; %s" % module)
    words = ["under Fabric's own launcher (python train.py, rank 0 started rank 1), "
             "copy.deepcopy of the model fabric.setup returned raised on rank(s) %s%s: %s"
             % (",".join(map(str, failed)), " only" if len(failed) < 2 else "",
                wrapped[failed[0]])]
    for r, steps in ((0, r0), (1, r1)):
        if r not in failed and steps.get("barrier"):
            words.append("rank %d copied it, then died at its next collective: %s"
                         % (r, _short(steps["barrier"])))
    words.append(module)
    return True, "; ".join(words)

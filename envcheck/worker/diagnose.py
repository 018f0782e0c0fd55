"""Turn environment hazards hidden in exception messages into advice a user can act on.

Each entry is (substring of the message, advice). Only hazards of the *environment* go
here; what a probe knows about its own check it says with ``c.advice``.
"""

_KNOWN = (
    ("Numpy is not available",
     "numpy is not installed in this environment, and torch needs it for this "
     "(all_gather_object, torch.distributed.checkpoint): pip install numpy"),
    ("No module named 'numpy'",
     "numpy is not installed in this environment: pip install numpy"),
    ("cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object",
     "a process group cannot be pickled or deep-copied: keep communication objects "
     "out of modules you copy or save (build the copy fresh and load_state_dict)"),
    ("Address already in use",
     "the rendezvous port is taken: pick another MASTER_PORT"),
    ("NCCL error",
     "NCCL failed: rerun with NCCL_DEBUG=INFO to see which transport or device broke"),
)


def advice_for(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    for needle, advice in _KNOWN:
        if needle in text:
            return advice
    return None

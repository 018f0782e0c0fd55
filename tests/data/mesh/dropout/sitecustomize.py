"""A rank of one mesh group that drops out, for tests/test_mesh.py: a real fault in a
real rank, kept out of envcheck's own code (tests/test_probe_suite.py forbids test hooks
there).

On PYTHONPATH, Python imports this at every start (the supervisor, the zygote, the
ranks forked from it). With MESH_DROPOUT=DIM:RANK:SECONDS, rank RANK sleeps SECONDS
before it starts DIM's ops on its group, while that group's other ranks wait in the
first op: the mesh probe's ``ops.run`` is wrapped, nothing of torch is touched.
"""

import os
import time

_SPEC = os.environ.get("MESH_DROPOUT")

if _SPEC:
    from envcheck.probes.mesh import ops as _ops

    _DIM, _RANK, _SECONDS = _SPEC.split(":")
    _run = _ops.run

    def _late_run(torch, dist, ctx, dim, *args, **kwargs):
        if dim == _DIM and ctx.rank == int(_RANK):
            time.sleep(float(_SECONDS))  # the rank that dropped out of its group
        return _run(torch, dist, ctx, dim, *args, **kwargs)

    _ops.run = _late_run

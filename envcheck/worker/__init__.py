"""Rank side of envcheck: runs inside every rank, imports only the stdlib and torch.

Words used throughout:

- *rank*: the global index of a process in the job, ``0 .. world size - 1`` (``RANK``).
- *local rank*: the index of a process among those on the same host (``LOCAL_RANK``);
  on GPUs a rank uses ``cuda:LOCAL_RANK``.
- *world size*: how many ranks the job has (``WORLD_SIZE``); *local world size*: how
  many of them run on this host (``LOCAL_WORLD_SIZE``).

Nothing in this package may import envcheck's CLI dependencies (typer, tabulate,
packaging): ranks may run under another interpreter (``--python``) that has only torch.
A test guards that boundary.
"""

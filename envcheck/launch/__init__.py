"""Where every process envcheck starts is born, and where it is signalled and contained.

- ``procs``: the only place a process is made (``popen``, ``run``, ``fork``) or sent a
  signal (``send``, ``send_group``, ``send_proven``), and what ``/proc`` says of one.
- ``contain``: nothing outlives the run: the marker, the lifeline, the subreaper, death
  with the parent, the run's directory.
- ``cgroup``: a cgroup per attempt, where the machine offers one.
- ``enclosure``: launcher mode's containment, one rank at a time: what a rank starts
  ends with it.

stdlib only, and nothing from the worker, the run driver or the probes: both sides use
it, ranks under an interpreter that has nothing but torch. ``tests/test_launch.py``
guards both rules.
"""

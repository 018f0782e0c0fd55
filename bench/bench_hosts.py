"""What the hosts probe (skew, clock, /dev/shm, memlock, open files) adds to a 2-host run.

Two hosts of the test cluster (tests/cluster), one torchrun agent each, 2 ranks per host,
c10d rendezvous, gloo, launcher mode. Paired runs, A then B, each the wall clock from
starting both agents to the last agent's exit:

- A: ``-p launch -p hosts``;
- B: ``-p launch``.

Printed (bench/probe_cost.py, shared with bench_bandwidth.py): A's and B's walls, the
difference A - B pair by pair (min / median / max), and the probe's own time inside A
(``probe_end`` in the ranks' records: the slowest rank, as the ``probe:hosts`` phase of
the report's timing, and the rank that reached it last). Target: 0.3 s (issue 23). The
wall difference carries the noise of two whole jobs (seconds of torch imports on two
shared cores); the probe's own time is the figure to quote. Needs root (the cluster's namespaces).

    sudo .venv/bin/python bench/bench_hosts.py [--pairs 5]
"""

from probe_cost import main

if __name__ == "__main__":
    main("hosts")

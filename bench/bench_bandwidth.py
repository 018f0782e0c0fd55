"""What the slow-host check (the bandwidth probe) adds to a 2-host run: probe_cost.py for
``bandwidth`` (A: ``-p launch -p bandwidth``, B: ``-p launch``, paired; the probe's own
time is the figure to quote; target 0.3 s, issue 23). Needs root.

    sudo .venv/bin/python bench/bench_bandwidth.py [--pairs 5]
"""

from probe_cost import main

if __name__ == "__main__":
    main("bandwidth")

"""By hand: ``python -m tests.cluster [N]`` starts N hosts (default 2) until Ctrl-C.

Prints, per host, the line that opens a shell on it, and the directory they share.
"""

import argparse
import shutil
import signal
import sys
import tempfile
import time

from . import SHARED, Cluster, unavailable


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.cluster",
                                description="Start the test cluster's hosts; Ctrl-C stops "
                                            "and removes everything.")
    p.add_argument("hosts", nargs="?", type=int, default=2)
    args = p.parse_args(argv)
    if not 1 <= args.hosts <= 200:
        sys.exit("hosts: 1 to 200")
    why = unavailable()
    if why:
        sys.exit("cannot start the test cluster here: %s" % why)
    base = tempfile.mkdtemp(prefix="envcheck-cluster-")

    def stop(signum, frame):
        raise KeyboardInterrupt

    # SIGINT too: started in the background by a script (job control off), a process
    # begins with SIGINT ignored, and Ctrl-C (or kill -INT) would leave the hosts up
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    try:
        with Cluster(args.hosts, base=base) as c:
            for h in c.hosts:
                print("%s %s: nsenter --target %d --net --uts --mount -- bash" % (
                    h.name, h.addr, h.holder.pid))
            print("shared by every host at %s: %s" % (SHARED, c.shared))
            print("Ctrl-C stops it all and removes %s" % base)
            sys.stdout.flush()
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

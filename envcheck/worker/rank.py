"""Entry point of one rank started by ``envcheck run``:
``python -m envcheck.worker.rank --plan PLAN.json --out DIR`` (see ``runtime.py``)."""

import argparse

from ..core import plan as plan_mod
from . import identity, runtime


def main(argv=None, forked=None):
    """``forked``: in a rank a zygote forked, its pid and how long torch took to import
    there (``worker/zygote.py``)."""
    parser = argparse.ArgumentParser(prog="envcheck.worker.rank")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    ctx = runtime.run_rank(plan_mod.read(args.plan), args.out, identity.read_identity(),
                           forked=forked)
    runtime.finish(ctx.records)


if __name__ == "__main__":
    main()

"""Entry point of one rank started by ``envcheck run``:
``python -m envcheck.worker --plan PLAN.json --out DIR`` (see ``runtime.py``)."""

import argparse
import json

from . import runtime


def main(argv=None):
    parser = argparse.ArgumentParser(prog="envcheck.worker")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    identity = runtime.read_identity()
    records, host = runtime.start(plan, args.out, identity)
    ctx = runtime.setup(plan, records, host, identity)
    if ctx is None:
        runtime.finish(records, runtime.EXIT_SETUP_FAILED)
    runtime.run_probes(ctx, plan["probes"])
    if not runtime.teardown(ctx):
        runtime.finish(records, runtime.EXIT_TEARDOWN_FAILED)
    runtime.finish(records)


if __name__ == "__main__":
    main()

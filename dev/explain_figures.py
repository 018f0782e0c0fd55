"""The held-out figures of `envcheck explain` (issue #34), from what was recorded when each
batch was measured, never re-graded: tests/data/explain_unseen.toml (each log's batch and
family; a family no signature named then is kept as ``family_when_measured``) and the
misses tests/test_explain_unseen.py records per batch (``BATCHn_MISSED``).

    python dev/explain_figures.py            # per batch, then per family
    python dev/explain_figures.py --from 10  # batches 10 and later only

Batches 4 and later were each committed with their causes before explain first ran on
them, and measured once on the rules of that moment; the figure per batch is that run's.
Batches 1-3 were measured before rules were written from some of their logs: their
figure is test_explain_unseen.MEASURED, not per family here.
"""

import argparse
import collections
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import test_explain_unseen as unseen  # noqa: E402


def measured():
    """{batch: (entries, missed sources)} for every batch recorded with its misses."""
    out = {}
    for name, value in vars(unseen).items():
        if name.startswith("BATCH") and name.endswith("_MISSED"):
            batch = int(name[len("BATCH"):-len("_MISSED")])
            entries = [e for e in unseen.ENTRIES if e.get("batch") == batch]
            out[batch] = (entries, set(value))
    return dict(sorted(out.items()))


def family(entry):
    """The family as measured: a `new.*` cause stays new though a rule names it since."""
    return entry.get("family_when_measured", entry["family"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="first", type=int, default=4,
                        help="the first batch counted (default 4)")
    args = parser.parse_args(argv)
    batches = {b: v for b, v in measured().items() if b >= args.first}
    if not batches:
        parser.error("no measured batch from %d on (the last is %d)"
                     % (args.first, max(measured())))
    print("| batch | logs | user code | right at its first run |")
    print("|---|---|---|---|")
    total = right_total = 0
    for batch, (entries, missed) in batches.items():
        right = sum(e["source"] not in missed for e in entries)
        users = sum(family(e) == "user" for e in entries)
        print("| %d | %d | %d | %d (%.0f%%) |" % (batch, len(entries), users, right,
                                                 100.0 * right / len(entries)))
        total += len(entries)
        right_total += right
    print("| **all** | %d | | **%d (%.0f%%)** |" % (total, right_total,
                                                     100.0 * right_total / total))
    print()
    hits = collections.defaultdict(lambda: [0, 0])
    for entries, missed in batches.values():
        for entry in entries:
            key = family(entry)
            key = "new.* (no signature then)" if key.startswith("new.") else key
            hits[key][0] += 1
            hits[key][1] += entry["source"] not in missed
    print("| family (as measured) | held-out logs | right |")
    print("|---|---|---|")
    for key, (n, right) in sorted(hits.items(), key=lambda kv: (-kv[1][0], kv[0])):
        print("| %s | %d | %d |" % (key, n, right))
    return 0


if __name__ == "__main__":
    sys.exit(main())

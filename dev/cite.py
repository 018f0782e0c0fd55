#!/usr/bin/env python3
"""Rewrite the ``observed`` lists of the built-in expectations from the evidence files.

    python dev/cite.py            # rewrite matrix/expectations/*.toml, list what disagrees
    python dev/cite.py --check    # only list; exit 1 when an entry's range holds a release
                                  # whose evidence disagrees with it

For every ``[[expectation]]``, each evidence file whose run the entry applies to (torch in
its range; model, backend, numpy, Python, platform and build as the entry says) and that
ran one of its checks is read: the entry is cited for that release when every check of
it that ran there agrees (the outcome is one the entry allows and a failure matches its
message). One file per release series is cited, the 2-rank run first (the nproc and
numpy variants were diffed by dev/observe.py, which is what says they agree). A
release whose evidence disagrees is listed, never cited. Only the ``observed = [...]``
array of each entry is rewritten: comments and every other key stay as written.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from envcheck.matrix import evidence as evidence_mod, load as matrix_load, versions  # noqa: E402

HEADER = re.compile(r"(?m)^\[\[expectation\]\][^\n]*\n")
OBSERVED = re.compile(r"(?ms)^observed = \[\n.*?^\]\n")


def evidence_runs(matrix):
    """(file name, Target, evidence dict, its last run) for every evidence file of the
    matrix (envcheck.matrix.evidence reads them), 2-rank runs first."""
    out = [(ev.name, ev.target(), ev.data, ev.run) for ev in evidence_mod.load(matrix)]
    out.sort(key=lambda x: (x[3].get("nproc") != 2, len(x[0]), x[0]))
    return out


def verdict_of(entry, ev, overlaid=()):
    """'agree', 'disagree: ...' or None (none of its checks ran there). ``overlaid``:
    checks an ``unsupported`` entry judges on this run, not this one."""
    ran = False
    for check in entry.checks:
        if check in overlaid:
            continue
        o = (ev.get("checks") or {}).get(check)
        if not o or o["outcome"] == "skipped":
            continue
        ran = True
        if o["outcome"] not in entry.outcome:
            return "disagree: %s %s" % (check, o["outcome"])
        if o["outcome"] != "passed":
            text = "%s: %s" % (o.get("error_type") or "", o.get("message") or "") \
                if o.get("error_type") or o.get("message") else (o.get("detail") or "")
            if not entry.matches_message(text):
                return "disagree: %s %s: %s" % (check, o["outcome"], text[:100])
    return "agree" if ran else None


def judged_elsewhere(entry, target, ev, matrix):
    """The entry's checks that the matrix judges on this run by another entry that
    agrees with it (an unsupported combination overlaying the general entry, or one
    unsupported entry of two that apply): not this entry's to cite or dispute."""
    from envcheck.matrix import verdicts
    from envcheck.report.model import CheckResult

    out = set()
    for check in entry.checks:
        o = (ev.get("checks") or {}).get(check)
        if not o or o["outcome"] == "skipped":
            continue
        probe, _, name = check.partition(".")
        result = CheckResult(probe, name, o["outcome"], detail=o.get("detail") or "",
                             error={"type": o.get("error_type"), "message": o.get("message")}
                             if o.get("error_type") or o.get("message") else None)
        verdict, used = verdicts.judge(result, matrix.applicable(check, target))
        if used is not None and used is not entry and verdict is not None and \
                verdict.value in ("ok", "known", "unsupported"):
            out.add(check)
    return out


def _ran(entry, ev, overlaid):
    """How many of the entry's checks this run ran (skipped ones not counted)."""
    return sum(1 for c in entry.checks if c not in overlaid
               and ((ev.get("checks") or {}).get(c) or {}).get("outcome") not in (None,
                                                                                   "skipped"))


def citations(entry, runs, matrix):
    """(observed lines, disagreements) for one entry."""
    cited, problems = {}, []
    considered = []
    for name, target, ev, run in runs:
        if not entry.applies(target):
            continue
        overlaid = judged_elsewhere(entry, target, ev, matrix)
        considered.append((bool(overlaid), name, target, ev, run, overlaid))
    # A run where another entry judged some of the checks is cited last: torch 2.1 is
    # best shown passing with numpy<2, not with NumPy 2 (an unsupported combination).
    # Then the run that ran the most of the entry's checks: an -fsdp run holds setup's
    # checks but none of the collectives, and cannot stand for the baseline.
    considered.sort(key=lambda x: (x[0], -_ran(entry, x[3], x[5])))
    for _, name, target, ev, run, overlaid in considered:
        series = versions.series(target.torch)
        verdict = verdict_of(entry, ev, overlaid)
        if verdict is None:
            continue
        if verdict != "agree":
            problems.append("%s: %s" % (name, verdict))
            continue
        if series not in cited:
            # The framework versions a frameworks run had: its facts hold for those.
            found = {k: v for k, v in sorted((ev.get("frameworks") or {}).items()) if v}
            extra = ", frameworks = {%s}" % ", ".join(
                '%s = "%s"' % kv for kv in found.items()) if found and any(
                c.startswith("frameworks.") for c in entry.checks) else ""
            cited[series] = '  {torch = "%s", envcheck = "%s", date = "%s", evidence = ' \
                            '"../evidence/%s"%s},' % (ev["torch"], run.get("envcheck", "?"),
                                                       run.get("date", "?"), name, extra)
    lines = [cited[s] for s in sorted(cited, key=versions.parse_version)]
    return lines, problems


def rewrite(path, entries, runs, matrix, write=True):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    starts = [m.start() for m in HEADER.finditer(text)]
    if len(starts) != len(entries):
        raise SystemExit("%s: %d [[expectation]] headers but %d entries loaded"
                         % (path, len(starts), len(entries)))
    pieces, problems = [text[:starts[0]] if starts else text], []
    for i, (start, entry) in enumerate(zip(starts, entries)):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        block = text[start:end]
        lines, bad = citations(entry, runs, matrix)
        problems += ["%s #%d %s: %s" % (entry.where.file, entry.where.index,
                                         "/".join(entry.checks)[:60], b) for b in bad]
        if lines:
            new = "observed = [\n%s\n]\n" % "\n".join(lines)
            if OBSERVED.search(block):
                block = OBSERVED.sub(lambda m: new, block, count=1)
            else:
                body = block.rstrip("\n")
                block = body + "\n" + new + block[len(body) + 1:]
        pieces.append(block)
    out = "".join(pieces)
    if write and out != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(out)
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="list only, write nothing")
    args = ap.parse_args(argv)
    matrix = matrix_load.load()
    runs = evidence_runs(matrix)
    by_file = {}
    for e in matrix.expectations:
        by_file.setdefault(e.where.path, []).append(e)
    problems = []
    for path, entries in sorted(by_file.items()):
        if not os.path.basename(os.path.dirname(path)) == "expectations":
            continue
        problems += rewrite(path, sorted(entries, key=lambda e: e.where.index), runs,
                            matrix, write=not args.check)
    matrix_load.load()  # still valid
    for p in problems:
        print("disagrees: %s" % p)
    print("%d disagreement(s)" % len(problems) if problems else "every cited run agrees")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""The runs behind the matrix: committed evidence judged again, and what covers each check
on each release.

Evidence files (``evidence/*.json`` beside the expectations, written by
``dev/observe.py --save``) are trimmed observed runs on a healthy node: per check its
outcome, error type and first message line. Two questions are asked of them, by
``envcheck matrix --coverage`` and by the tests that guard the matrix in CI (no torch
needed there):

* **Judged again** with today's matrix, does any run read as anything but fine? A
  healthy node's run may hold ``ok`` and ``known`` verdicts, and ``unsupported`` only
  where the entry that says so names the Python or NumPy the run had.
* **Coverage**: does every check have, on every release of releases.toml, an
  expectation backed by a run of that release (``observed``: the entry cites an evidence
  file of that release series that holds the check) or by a public source (``fact``)?
  A check that every committed run of a release skipped (FSDP2 checks before 2.4, NCCL
  checks on CPU) is ``skipped`` there: it is never judged on what was seen. Anything
  else is a gap, named with its check and releases.
"""

import dataclasses
import glob
import json
import os
from typing import Optional, Tuple

from . import versions
from .values import Target, platform_of

OBSERVED, FACT, SKIPPED = "observed", "fact", "skipped"
# What a healthy node's run may read as (unsupported: only as its entry's own condition).
FINE = ("ok", "known", "unsupported")


@dataclasses.dataclass(frozen=True)
class Evidence:
    name: str  # file name, "torch-2.6.0-cu124-nproc4.json"
    path: str
    data: dict

    @property
    def torch(self):
        return self.data.get("torch")

    @property
    def series(self):
        return versions.series(self.torch)

    @property
    def run(self):
        """The last run merged into the file (its nproc, backend, model, launcher)."""
        runs = self.data.get("runs") or [{}]
        return runs[-1]

    def target(self):
        d = self.data
        return Target(versions.parse_version(d["torch"]),
                      versions.observed_variant(d["torch"], d.get("cuda")), d.get("python"),
                      platform_of(d.get("os")), self.run.get("backend"),
                      bool(self.run.get("model")), d.get("numpy"))

    def checks(self):
        return self.data.get("checks") or {}


def matrix_roots(matrix):
    """The matrix directories the loaded files came from (built-in first)."""
    roots = []
    for f in matrix.files:
        root = f.path[:-len(f.name)] if f.path.endswith(f.name) else os.path.dirname(f.path)
        root = os.path.normpath(root or ".")
        if root not in roots:
            roots.append(root)
    return roots


def load(matrix):
    """Every evidence file of the matrix's directories, by name."""
    found, seen = [], set()
    for root in matrix_roots(matrix):
        for path in sorted(glob.glob(os.path.join(root, "evidence", "*.json"))):
            real = os.path.realpath(path)  # a directory linked twice is read once
            if real in seen:
                continue
            seen.add(real)
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict) and data.get("torch") and data.get("checks"):
                found.append(Evidence(os.path.basename(path), real, data))
    return found


@dataclasses.dataclass(frozen=True)
class Judged:
    evidence: str
    check: str
    outcome: str
    verdict: Optional[str]
    entry: Optional[str]  # "expectations/ddp-sync.toml #3"
    text: str  # what a message pattern was searched in

    def __str__(self):
        return "%s: %s %s -> %s (%s)%s" % (
            self.evidence, self.check, self.outcome, self.verdict, self.entry or "no entry",
            ": " + self.text[:160] if self.text else "")


def rejudge(ev, matrix):
    """Every check of one evidence file judged with ``matrix``, as ``envcheck report
    --matrix`` would judge the run it came from."""
    from ..report.model import CheckResult, Report
    from . import verdicts

    d = ev.data
    checks = []
    for cid, o in sorted(ev.checks().items()):
        probe, _, name = cid.partition(".")
        error = None
        if o.get("error_type") or o.get("message"):
            error = {"type": o.get("error_type"), "message": o.get("message")}
        checks.append(CheckResult(probe, name, o["outcome"], detail=o.get("detail") or "",
                                  error=error))
    run = ev.run
    plan = {"nproc": run.get("nproc"), "probes": run.get("probes"),
            "options": {"model": {"spec": run["model"]}} if run.get("model") else {}}
    env = {k: d.get(k) for k in ("torch", "cuda", "nccl", "python", "numpy", "os")}
    report = Report(d.get("envcheck") or "", run.get("date") or "", plan, env,
                    [{"backend": run.get("backend")}], checks, 0.0)
    verdicts.apply(report, matrix)
    out = []
    for c in report.checks:
        e = c.expectation
        out.append(Judged(ev.name, c.id, c.outcome, c.verdict,
                          "%s #%d" % (e["file"], e["entry"]) if e else None,
                          verdicts.error_text(c) if c.outcome != "passed" else ""))
    return out


def wrongly_judged(ev, matrix):
    """The checks of a healthy node's run that today's matrix does not read as fine: a
    failure, unexpected, new or fixed verdict, or ``unsupported`` from an entry whose
    Python or NumPy condition the run does not meet."""
    bad = []
    target = ev.target()
    for j in rejudge(ev, matrix):
        if j.verdict is None and j.outcome == "skipped":
            continue
        if j.verdict not in FINE:
            bad.append(j)
        elif j.verdict == "unsupported" and not _unsupported_holds(j, target, matrix):
            bad.append(j)
    return bad


def _unsupported_holds(j, target, matrix):
    """An unsupported verdict stands where the release's own facts say so: a Python the
    release does not support (releases.toml), or the entry's NumPy condition."""
    entry = next((e for e in matrix.expectations
                  if "%s #%d" % (e.where.file, e.where.index) == j.entry), None)
    if entry is None or not entry.unsupported:
        return False
    if entry.python is not None:
        release = matrix.release(target.torch)
        if release is None or not target.python:
            return False
        py = ".".join(target.python.split(".")[:2])
        return py not in release.supported_pythons
    return entry.numpy is not None and entry.matches_numpy(target.numpy)


@dataclasses.dataclass(frozen=True)
class Cover:
    kind: Optional[str]  # OBSERVED, FACT, SKIPPED or None (a gap)
    how: str  # the entry, the evidence file, the source or why it is a gap


def _cited_files(entry):
    """{evidence path on disk: series} for an entry's observed runs."""
    base = os.path.dirname(entry.where.path)
    return {os.path.realpath(os.path.join(base, o.evidence)): versions.series(o.torch)
            for o in entry.observed if o.evidence}


def coverage(matrix, evidence, check_ids):
    """{check: {series: Cover}} for every release series of the matrix."""
    by_path = {ev.path: ev for ev in evidence}
    runs_of = {}  # series -> evidence files
    for ev in evidence:
        runs_of.setdefault(ev.series, []).append(ev)
    out = {}
    for cid in check_ids:
        # An unsupported entry counts: it is what the run of that release showed (torch
        # 1.13's DCP on Python 3.11), with its evidence, for the Pythons it names.
        entries = [e for e in matrix.expectations if cid in e.checks]
        row = {}
        for release in matrix.releases:
            here = [e for e in entries if any(e.matches_torch(p) for p in release.patches)]
            row[release.series] = _cover(cid, release.series, here, by_path,
                                         runs_of.get(release.series, []))
        out[cid] = row
    return out


def _cover(cid, series, entries, by_path, runs):
    for e in entries:
        for path, seen in _cited_files(e).items():
            ev = by_path.get(path)
            if seen == series and ev is not None and cid in ev.checks():
                return Cover(OBSERVED, "%s #%d, %s" % (e.where.file, e.where.index, ev.name))
    for e in entries:
        if e.source:
            return Cover(FACT, "%s #%d: %s" % (e.where.file, e.where.index, e.source))
    held = [ev for ev in runs if cid in ev.checks()]
    if held and all(ev.checks()[cid]["outcome"] == "skipped" for ev in held):
        return Cover(SKIPPED, "skipped in all %d run(s) of %s (%s)" % (
            len(held), series, held[0].checks()[cid].get("detail") or "no reason given"))
    if held:
        ran = sorted({ev.checks()[cid]["outcome"] for ev in held} - {"skipped"})
        return Cover(None, "%s on %s in %s, and no expectation backed by a run of %s or a "
                     "source" % ("/".join(ran), series, held[0].name, series))
    return Cover(None, "no run of %s holds it, and no expectation with a source covers it"
                 % series)


def gaps(cov):
    """[(check, (series, ...))]: what no expectation, run or source covers."""
    out = []
    for cid, row in cov.items():
        missing = tuple(s for s, c in row.items() if c.kind is None)
        if missing:
            out.append((cid, missing))
    return out


def catalog_checks(probe_paths=()):
    """Every check id the probes declare (built-in and ``probe_paths``), besides the
    ``PROBE.run`` each probe may report when it breaks outside its checks and the setup
    checks that exist only as a fault (``catalog.FAULT_ONLY``)."""
    from ..probes import catalog

    out = []
    for probe, (names, _) in catalog.known_checks(probe_paths).items():
        out += ["%s.%s" % (probe, n) for n in sorted(names) if n != catalog.RUN]
    return sorted(c for c in out if c not in catalog.FAULT_ONLY)


def spans(series_list, matrix):
    """'1.13-2.2, 2.5': consecutive release series of the matrix joined."""
    order = [r.series for r in matrix.releases]
    out = []
    for s in series_list:
        if out and order.index(s) == order.index(out[-1][-1]) + 1:
            out[-1].append(s)
        else:
            out.append([s])
    return ", ".join(sp[0] if len(sp) == 1 else "%s-%s" % (sp[0], sp[-1]) for sp in out)


def summary_rows(cov, matrix) -> Tuple[tuple, ...]:
    """(check, observed, fact, skipped, gaps) as release spans, a row per check."""
    rows = []
    for cid, row in cov.items():
        cols = []
        for kind in (OBSERVED, FACT, SKIPPED, None):
            cols.append(spans([s for s, c in row.items() if c.kind == kind], matrix))
        rows.append((cid,) + tuple(cols))
    return tuple(rows)

#!/usr/bin/env python3
"""Run envcheck against one torch interpreter and diff what it saw with the matrix.

    python dev/observe.py /path/to/venv-torch2.1.2/bin/python             # run, print diff
    python dev/observe.py VENV_PY --probe serialization --save       # also keep evidence
    python dev/observe.py --from-json report.json                    # no run: diff a report
    python dev/observe.py --release 2.2.2 --save                     # a whole release (below)

What it prints, per check: the observed outcome, error type and first message line, the
matrix entry that applies (file and entry number) and the verdict. Lines that need a
look are marked: `new` (passed, no expectation: add a "passed" entry if it should keep
passing), `failure` (no expectation), `unexpected` and `fixed`. Then the release facts
(CUDA, NCCL, compiled archs) the matrix holds for this build against what torch reported.

With --save, the trimmed observation (per check: outcome, error type, first line of the
message) is merged into envcheck/matrix/data/evidence/torch-VERSION-VARIANT.json, the
file that expectations cite in their `observed = [{..., evidence = ...}]`. Only the
checks of the probes that ran are replaced, so probes can be observed one at a time.

With --release VERSION it observes one PyPI release end to end: a throw-away venv
(pip install --no-cache-dir torch==VERSION numpy), every variant of VARIANTS (2 and 4
ranks, with and without the Open-Sora-shaped --model in dev/models/), and for releases
built against NumPy 1.x (torch < 2.3) all of it again with numpy<2; each diffed, saved
with --save (label e.g. numpy1-nproc4), its full report kept under --reports; then the
venv is deleted. The next release is one command. --table prints the release x check
table of saved reports (--from-json, repeatable).

Exit status: 0 when observation and matrix agree, 1 when something needs a look,
2 when envcheck could not run. Runs envcheck from /tmp (a venv's torch must not see
this checkout).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from envcheck.matrix import load as matrix_load, verdicts, versions  # noqa: E402
from envcheck.matrix.model import Target  # noqa: E402
from envcheck.report import model as report_mod  # noqa: E402

EVIDENCE_DIR = os.path.join(ROOT, "envcheck", "matrix", "data", "evidence")
NEEDS_LOOK = ("new", "failure", "unexpected", "fixed")
MODEL_DIR = os.path.join(ROOT, "dev", "models")
MODEL_SPEC = "mymodels.stdit:build_model"
# (label, ranks, with the Open-Sora-shaped --model, probes: [] = all). With --model only
# the probes that use it run.
VARIANTS = (
    ("", 2, False, []),
    ("nproc4", 4, False, []),
    ("opensora-model", 2, True, ["serialization", "checkpoint"]),
    ("nproc4-opensora-model", 4, True, ["serialization", "checkpoint"]),
)


def numpy_sets(release):
    """(label, pip requirement): torch < 2.3 was built against NumPy 1.x, so it is
    observed with what `pip install numpy` gives today (2.x) and with numpy<2."""
    sets = [("", "numpy")]
    if versions.parse_version(release) < versions.parse_version("2.3"):
        sets.append(("numpy1", "numpy<2"))
    return sets


def run_envcheck(python, probes, extra, cwd=None):
    fd, path = tempfile.mkstemp(prefix="envcheck-observe-", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, "-m", "envcheck", "run", "--python", python, "--json", path,
           "-q", "--format", "json"]
    for p in probes:
        cmd += ["--probe", p]
    cmd += list(extra)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(cmd, cwd=cwd or tempfile.gettempdir(), env=env,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not os.path.getsize(path):
        sys.exit("envcheck run failed (exit %d): %s" % (proc.returncode,
                                                        proc.stderr.strip()[-2000:]))
    return path


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def trim(report):
    """The observation an expectation can cite: small, stable, no tracebacks."""
    env = report.environment or {}
    checks = {}
    for c in report.checks:
        err = c.error or {}
        checks[c.id] = {"outcome": c.outcome, "error_type": err.get("type"),
                        "message": _first_line(err.get("message")) or None,
                        "detail": _first_line(c.detail) or None}
    return {
        "envcheck": report.envcheck_version,
        "date": report.created[:10],
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "nccl": env.get("nccl"),
        "arch_list": env.get("arch_list") or [],
        "python": env.get("python"),
        "numpy": env.get("numpy"),
        "os": env.get("os"),
        "nproc": (report.plan or {}).get("nproc"),
        "backend": report.ranks[0].get("backend") if report.ranks else None,
        "probes": (report.plan or {}).get("probes"),
        "model": ((report.plan or {}).get("options") or {}).get("model", {}).get("spec"),
        "checks": checks,
    }


def evidence_name(obs, label=None):
    version = versions.parse_version(obs["torch"])
    variant = versions.observed_variant(obs["torch"], obs.get("cuda"))
    return "torch-%s-%s%s.json" % (version.public, variant, "-" + label if label else "")


def save(obs, directory=EVIDENCE_DIR, label=None):
    """Merge into the evidence file: replace the checks of the probes that ran."""
    path = os.path.join(directory, evidence_name(obs, label))
    old = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    ran = set(obs["probes"] or []) | {"setup"}
    checks = {k: v for k, v in (old.get("checks") or {}).items()
              if k.split(".")[0] not in ran}
    checks.update(obs["checks"])
    runs = [r for r in old.get("runs", []) if set(r.get("probes") or []) - ran]
    runs.append({"date": obs["date"], "envcheck": obs["envcheck"], "probes": obs["probes"],
                 "nproc": obs["nproc"], "backend": obs["backend"], "model": obs["model"]})
    merged = {k: obs[k] for k in ("torch", "cuda", "nccl", "arch_list", "python", "numpy",
                                  "os")}
    merged["runs"] = runs
    merged["checks"] = dict(sorted(checks.items()))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def fact_lines(matrix, env):
    """The matrix's release facts for this build against what torch reported."""
    target = Target.from_environment(env)
    if target is None:
        return ["  torch did not import: no facts to compare"]
    release = matrix.release(target.torch)
    if release is None:
        return ["  the matrix has no release %s" % versions.series(target.torch)]
    variant = release.variant(target.variant)
    if variant is None:
        return ["  release %s has no variant %s" % (release.series, target.variant)]
    out = []

    def row(name, expected, seen):
        mark = " " if expected == seen else "!"
        out.append("%s %-9s matrix %-40s observed %s" % (mark, name, expected, seen))

    known = target.torch.public in release.patches
    out.append("%s %-9s matrix %-40s observed %s" % (
        " " if known else "!", "patch", " ".join(release.patches), target.torch.public))
    if variant.cuda:
        row("cuda", variant.cuda, env.get("cuda"))
        row("nccl", variant.nccl, env.get("nccl"))
        seen = sorted(a for a in env.get("arch_list") or [])
        expected = sorted(list(variant.archs) + list(variant.ptx))
        row("archs", " ".join(expected), " ".join(seen) or "(empty: no GPU?)")
    return out


def diff(path, matrix, save_to=None, label=None):
    """Print the diff of one report against the matrix; the number of lines that need a
    look. ``save_to``: merge the trimmed observation into that evidence directory."""
    report = report_mod.load(path)
    verdicts.apply(report, matrix)
    obs = trim(report)
    print("torch %s (cuda %s, nccl %s), Python %s, numpy %s, %s, %s ranks%s, envcheck %s, %s"
          % (obs["torch"], obs["cuda"], obs["nccl"], obs["python"], obs["numpy"],
             obs["backend"], obs["nproc"], ", --model " + obs["model"] if obs["model"] else "",
             obs["envcheck"], obs["date"]))
    look = 0
    for c in report.checks:
        o = obs["checks"][c.id]
        entry = c.expectation
        where = "%s #%d" % (entry["file"], entry["entry"]) if entry else "-"
        mark = "!" if c.verdict in NEEDS_LOOK else " "
        look += mark == "!"
        what = "%s: %s" % (o["error_type"], o["message"]) if o["error_type"] else (
            o["detail"] or "")
        print("%s %-42s %-8s %-11s %-34s %s" % (mark, c.id, c.outcome, c.verdict or "-",
                                               where, what[:110]))
    print("release facts:")
    facts = fact_lines(matrix, report.environment)
    look += sum(line.startswith("!") for line in facts)
    print("\n".join(facts))
    if save_to:
        print("saved %s" % save(obs, save_to, label))
    print("%d line(s) need a look" % look if look else "observation and matrix agree")
    return look


def _pip(venv, *args):
    cmd = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
           "--no-cache-dir", "--disable-pip-version-check"] + list(args)
    print("$ %s" % " ".join(cmd[3:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit("pip failed (exit %d): %s" % (proc.returncode, proc.stderr.strip()[-2000:]))


def observe_release(args, matrix):
    """Every variant of one release in a throw-away venv; (variant, lines to look at)."""
    release = args.release
    venv = os.path.join(args.venv_dir, "torch-%s" % release)
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(args.venv_dir, exist_ok=True)
    os.makedirs(args.reports, exist_ok=True)
    results = []
    try:
        subprocess.run([args.venv_python or sys.executable, "-m", "venv", venv], check=True)
        py_label = ""
        if args.venv_python:
            py_label = "py" + subprocess.run(
                [args.venv_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, check=True).stdout.strip()
        python = os.path.join(venv, "bin", "python")
        sets = [x for x in numpy_sets(release)
                if args.numpy == "both" or (x[0] == "numpy1") == (args.numpy == "1")]
        for n, (np_label, np_req) in enumerate(sets):
            if n == 0:
                _pip(venv, args.torch_spec or "torch==%s" % release, np_req)
            else:
                _pip(venv, np_req)
            for label, nproc, model, probes in VARIANTS:
                name = "-".join(x for x in (py_label, np_label, label) if x) or None
                extra = ["-n", str(nproc)] + (["--model", MODEL_SPEC] if model else [])
                print("\n=== torch %s, %s, variant %s ===" % (release, np_req, name or "default"),
                      flush=True)
                path = run_envcheck(python, probes, extra + list(args.extra),
                                    cwd=MODEL_DIR if model else None)
                kept = os.path.join(args.reports, "torch-%s%s.json"
                                    % (release, "-" + name if name else ""))
                shutil.move(path, kept)
                print("full report: %s" % kept)
                look = diff(kept, matrix, args.evidence_dir if args.save else None, name)
                results.append((name or "default", look))
                sys.stdout.flush()
    finally:
        if not args.keep_venv:
            shutil.rmtree(venv, ignore_errors=True)
    print("\ntorch %s:" % release)
    for name, look in results:
        print("  %-28s %s" % (name, "%d line(s) need a look" % look if look
                              else "observation and matrix agree"))
    return results


def table(paths, matrix):
    """Release x check: each report's outcome/verdict per check, one column a report."""
    cols, rows = [], {}
    for path in paths:
        report = report_mod.load(path)
        verdicts.apply(report, matrix)
        cols.append(os.path.basename(path)[len("torch-"):-len(".json")])
        for c in report.checks:
            short = {"passed": "pass", "failed": "FAIL", "skipped": "skip"}.get(c.outcome,
                                                                              c.outcome)
            rows.setdefault(c.id, {})[cols[-1]] = (
                short if c.verdict in (None, "ok") else "%s/%s" % (short, c.verdict))
    width = max(len(k) for k in rows)
    widths = [max([len(c)] + [len(cells.get(c, "")) for cells in rows.values()])
              for c in cols]
    print("| %-*s | %s |" % (width, "check", " | ".join(
        "%-*s" % (w, c) for w, c in zip(widths, cols))))
    print("|%s|%s|" % ("-" * (width + 2), "|".join("-" * (w + 2) for w in widths)))
    for check, cells in rows.items():
        print("| %-*s | %s |" % (width, check, " | ".join(
            "%-*s" % (w, cells.get(c, "")) for w, c in zip(widths, cols))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("python", nargs="?", help="interpreter of the torch venv to observe")
    ap.add_argument("--probe", action="append", default=[], help="only this probe (repeatable)")
    ap.add_argument("--from-json", action="extend", nargs="+", default=[], metavar="REPORT",
                    help="diff these saved reports instead of running")
    ap.add_argument("--release", help="observe this PyPI release in a throw-away venv, "
                                      "every variant (see above)")
    ap.add_argument("--torch-spec", help="with --release: the pip requirement for torch "
                                         "[default: torch==RELEASE]")
    ap.add_argument("--venv-dir", default=os.environ.get("ENVCHECK_OBSERVE_VENVS")
                    or tempfile.gettempdir(), help="with --release: where the venv goes "
                    "(deleted after) [default: $ENVCHECK_OBSERVE_VENVS or the temp dir]")
    ap.add_argument("--keep-venv", action="store_true", help="with --release: keep it")
    ap.add_argument("--venv-python", help="with --release: build the venv with this Python "
                                          "(its evidence is labelled pyX.Y) [default: this one]")
    ap.add_argument("--numpy", choices=("both", "2", "1"), default="both",
                    help="with --release of a torch < 2.3: which numpy majors [default: both]")
    ap.add_argument("--reports", help="with --release: keep the full reports here "
                                      "[default: VENV_DIR/envcheck-reports]")
    ap.add_argument("--table", action="store_true",
                    help="with --from-json: print the check x report table instead")
    ap.add_argument("--matrix", action="append", default=[], help="extra matrix directory")
    ap.add_argument("--save", action="store_true", help="merge the observation into evidence/")
    ap.add_argument("--evidence-dir", default=EVIDENCE_DIR)
    ap.add_argument("--label", help="suffix of the evidence file, for runs that differ by "
                                    "more than the torch build (e.g. opensora-model)")
    ap.add_argument("extra", nargs="*", help="more envcheck run arguments (after --)")
    args = ap.parse_args(argv)
    if not args.python and not args.from_json and not args.release:
        ap.error("give an interpreter, --release or --from-json")
    try:
        matrix = matrix_load.load(args.matrix)
    except matrix_load.MatrixError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.release:
        args.reports = args.reports or os.path.join(args.venv_dir, "envcheck-reports")
        return 1 if any(look for _, look in observe_release(args, matrix)) else 0
    if args.table:
        table(args.from_json, matrix)
        return 0
    paths = args.from_json or [run_envcheck(args.python, args.probe, args.extra)]
    if not args.from_json:
        print("full report: %s (diff it again with --from-json)" % paths[0])
    looks = []
    for path in paths:
        looks.append(diff(path, matrix, args.evidence_dir if args.save else None,
                          args.label))
    if len(paths) > 1:
        print("\n%d reports:" % len(paths))
        for path, look in zip(paths, looks):
            print("  %-50s %s" % (os.path.basename(path), "%d line(s) need a look" % look
                                  if look else "observation and matrix agree"))
    return 1 if any(looks) else 0


if __name__ == "__main__":
    sys.exit(main())

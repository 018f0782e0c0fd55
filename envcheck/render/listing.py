"""``envcheck matrix``: show (a filtered part of) the matrix, or just validate it; with
``--coverage`` (or ``--check``), what each check's verdict rests on, release by release."""

import shutil
import textwrap

from tabulate import tabulate

from ..matrix import evidence as evidence_mod, load as matrix_load, versions
from ..core.errors import UsageError
from ..matrix.versions import sm_tuple


def _filters(torch, cuda):
    version = variant = None
    if torch:
        try:
            version = versions.parse_version(torch)
        except ValueError as exc:
            raise UsageError("--torch: %s" % exc) from None
        variant = versions.local_variant(version)
    if cuda:
        try:
            variant = versions.variant_for_cuda(cuda)
        except ValueError as exc:
            raise UsageError("--cuda: %s" % exc) from None
    return version, variant


def _archs(v):
    text = " ".join(sorted(v.archs, key=sm_tuple))
    if v.ptx:
        text += " +PTX " + " ".join(v.ptx)
    return text


def _flag(obj, field):
    return " (UNCONFIRMED)" if field in obj.unconfirmed else ""


def _releases(matrix, version, variant):
    rows = []
    for r in matrix.releases:
        if version is not None and r.series != versions.series(version):
            continue
        names = [v.name + ("*" if v.name == r.default_variant else "") +
                 ("?" if v.is_unconfirmed("exists") else "")
                 for v in r.variants if variant is None or v.name == variant]
        if variant is not None and not names:
            continue
        # A wheel for a Python the release does not support (1.13's cp311): marked "!".
        python = " ".join(p + ("!" if r.python_supported and p not in r.python_supported
                               else "") for p in r.python)
        rows.append((r.series, " ".join(r.patches), python, " ".join(names), r.glibc))
    headers = ["torch", "patches", "Python (!wheel, unsupported)",
               "variants (*PyPI default, ?UNCONFIRMED)", "glibc ≥"]
    return _fit(rows, headers, [None, 14, 18, 20, None])


def _fit(rows, headers, narrow):
    """The table; where it is wider than the terminal, again with the columns of
    ``narrow`` wrapped at those widths."""
    table = tabulate(rows, headers=headers, disable_numparse=True)
    if max(len(line) for line in table.splitlines()) <= shutil.get_terminal_size().columns:
        return table
    return tabulate(rows, headers=headers, disable_numparse=True, maxcolwidths=narrow,
                    maxheadercolwidths=narrow)


def _variant_detail(matrix, version, variant):
    out = []
    for r in matrix.releases:
        if r.series != versions.series(version):
            continue
        for v in r.variants:
            if variant is not None and v.name != variant:
                continue
            if not v.cuda:
                out.append("  %-6s CPU build%s" % (v.name, _flag(v, "exists")))
                continue
            out.append("  %-6s CUDA %s, NCCL %s%s, cuDNN %s%s, glibc ≥ %s%s" % (
                v.name, v.cuda, v.nccl or "?", _flag(v, "nccl"), v.cudnn or "?",
                _flag(v, "cudnn"), r.glibc_for(v), _flag(v, "exists").replace(
                    "(UNCONFIRMED)", "(variant UNCONFIRMED)")))
            out.append("         archs %s%s" % (_archs(v), _flag(v, "archs")))
        for p in r.per_patch:  # a patch whose wheels differ from the series'
            out += textwrap.wrap("%s wheels: Python %s%s (source: %s)" % (
                p.patch, " ".join(p.python), " (UNCONFIRMED)" if p.unconfirmed else "",
                p.source), 96, initial_indent="  ", subsequent_indent="    ")
        out += textwrap.wrap("source: " + r.source, 96, initial_indent="  ",
                             subsequent_indent="    ")
    return "\n".join(out)


def _toolkits(matrix, variant):
    rows = []
    for t in matrix.toolkits:
        if variant is not None and versions.variant_for_cuda(t.version) != variant:
            continue
        rows.append((t.version, t.compat_driver, (t.min_driver or "?") + _flag(t, "min_driver"),
                     " ".join(sorted(t.archs, key=sm_tuple)) + _flag(t, "archs")))
    return _fit(rows, ["CUDA", "driver ≥ (minor-version compat)", "full-feature driver",
                       "archs"], [None, 10, 15, 38])


def _condition(key, value):
    if key == "model":
        return "with --model" if value else "built-in model"
    if key == "unsupported":
        return "UNSUPPORTED combination" if value else ""
    return "%s %s" % (key, value if isinstance(value, str) else "/".join(value))


def _expectations(matrix, version, variant, check):
    rows = []
    for e in matrix.expectations:
        if check and not any(c == check or c.startswith(check + ".") for c in e.checks):
            continue
        if version is not None and not e.matches_torch(version):
            continue
        if variant is not None and not e.matches_build(variant):
            continue
        cond = e.conditions()
        torch = cond.pop("torch")
        extra = ", ".join(_condition(k, v) for k, v in cond.items())
        checks = [c for c in e.checks if not check or c == check or c.startswith(check + ".")]
        evidence = "%d run%s" % (len(e.observed), "" if len(e.observed) == 1 else "s") \
            if e.observed else ""
        if e.source:
            evidence = (evidence + "; " if evidence else "") + "source"
        gaps = e.gaps(matrix.releases)
        if e.observed and gaps:
            # The range claims these releases, but no run of this entry saw them.
            evidence += "\nnot observed: %s" % evidence_mod.spans(gaps, matrix)
        rows.append(("\n".join(checks), torch + ("\n" + extra if extra else ""),
                     "/".join(e.outcome),
                     textwrap.shorten(e.message.pattern, 40, placeholder="…")
                     if e.message else "", evidence, "%s #%d" % (e.where.file, e.where.index)))
    if not rows:
        return "(no expectation matches)"
    table = tabulate(rows, headers=["check", "torch", "outcome", "message", "evidence",
                                    "entry"], disable_numparse=True)
    width = shutil.get_terminal_size().columns
    if max(len(line) for line in table.splitlines()) <= width:
        return table
    # Narrower than the table: one block per entry, every line wrapped to the width.
    blocks = []
    for checks, torch, outcome, message, evidence, entry in rows:
        lines = [", ".join(checks.splitlines())]
        lines.append("  torch %s: %s   (%s)" % (torch.replace("\n", ", "), outcome, entry))
        if message:
            lines.append("  message: %s" % message)
        if evidence:
            lines.append("  evidence: %s" % evidence.replace("\n", "; "))
        blocks.append("\n".join(textwrap.fill(line, width - 1, subsequent_indent="    ")
                                for line in lines))
    return "\n".join(blocks)


def _coverage(matrix, check, version, probe_paths):
    """(text, gaps): a row per check, the releases its verdict rests on a run of, and
    those it rests on a public source alone or on runs that all skipped it; the releases
    with none of these are errors."""
    from ..probes import catalog

    ids = [c for c in evidence_mod.catalog_checks(probe_paths)
           if not check or c == check or c.startswith(check + ".")]
    cov = evidence_mod.coverage(matrix, evidence_mod.load(matrix), ids)
    if version is not None:
        series = versions.series(version)
        cov = {c: {s: v for s, v in row.items() if s == series} for c, row in cov.items()}
    rows = []
    for cid, observed, fact, skipped, missing in evidence_mod.summary_rows(cov, matrix):
        rest = ["%s: %s" % (label, text) for label, text in
                (("source alone", fact), ("skipped in every run", skipped),
                 ("NO DATA", missing)) if text]
        rows.append((cid, observed or "-", "\n".join(rest)))
    shown = sorted({s for row in cov.values() for s in row}, key=versions.parse_version)
    width = max(shutil.get_terminal_size().columns, 60) - 1
    out = ["Coverage: what each check's verdict rests on, by torch release (%s)"
           % evidence_mod.spans(shown, matrix),
           _fit(rows, ["check", "observed runs", "otherwise"], [None, 12, 24]), ""]
    by_source = {}  # the same entry backs several checks: said once
    for cid, row in cov.items():
        for s, c in row.items():
            if c.kind == evidence_mod.FACT:
                by_source.setdefault(c.how, {}).setdefault(cid, []).append(s)
    if by_source:
        out.append("Judged by a public source alone (no run of those releases):")
        for how, found in by_source.items():
            entry, _, source = how.partition(": ")
            said = ", ".join("%s (%s)" % (cid, evidence_mod.spans(series, matrix))
                             for cid, series in found.items())
            out += textwrap.wrap("%s: %s; source: %s" % (entry, said, source), width,
                                 initial_indent="  ", subsequent_indent="      ")
        out.append("")
    if not check:
        out += textwrap.wrap("Reported only as a fault (a rank that hangs or dies outside "
                             "any probe), never judged by release: %s"
                             % ", ".join(catalog.FAULT_ONLY), width) + [""]
    gaps = evidence_mod.gaps(cov)
    for cid, missing in gaps:
        out += textwrap.wrap("error: %s has neither a run nor a source on torch %s"
                             % (cid, evidence_mod.spans(missing, matrix)), width,
                             subsequent_indent="    ")
    if gaps:
        out += textwrap.wrap("Observe every release (python dev/observe.py --release all "
                             "--save, docs/matrix.md) and set the ranges from the runs.",
                             width)
    return "\n".join(out).rstrip("\n"), gaps


def run(torch=None, cuda=None, check=None, validate=False, matrix_dirs=(), probe_paths=(),
        coverage=False):
    """(text to print, exit code); MatrixError (exit 2) when the matrix is invalid. The
    exit code is 1 where ``coverage`` or ``check`` finds a release that neither a run nor
    a source covers."""
    matrix = matrix_load.load(matrix_dirs, probe_paths)
    files = ["  %s%s" % (f.path, "" if f.builtin else "  (--matrix)") for f in matrix.files]
    if validate:
        return ("matrix OK: %d releases, %d CUDA toolkits, %d expectations, %d failure "
                "signatures from %d files\n%s\n"
                % (len(matrix.releases), len(matrix.toolkits), len(matrix.expectations),
                   len(matrix.signatures), len(matrix.files), "\n".join(files))), 0
    version, variant = _filters(torch, cuda)
    if version is not None and matrix.release(version) is None:
        raise UsageError("--torch %s: the matrix knows releases %s" % (
            torch, ", ".join(r.series for r in matrix.releases)))
    declared = evidence_mod.catalog_checks(probe_paths)
    if check and not any(c == check or c.startswith(check + ".") for c in declared):
        probes = sorted({c.split(".")[0] for c in declared})
        raise UsageError("--check %s: no such check or probe (probes: %s; 'envcheck probes "
                         "--checks' lists every check)" % (check, ", ".join(probes)))
    if coverage:
        text, gaps = _coverage(matrix, check, version, probe_paths)
        return text + "\n", 1 if gaps else 0
    out = []
    if not check:
        out += ["Releases (Linux x86_64 wheels)", _releases(matrix, version, variant), ""]
        if version is not None:
            out += ["Builds of %s" % versions.series(version),
                    _variant_detail(matrix, version, variant), ""]
        out += ["CUDA toolkits (Linux driver)", _toolkits(matrix, variant), ""]
    out += ["Expectations", _expectations(matrix, version, variant, check), ""]
    code = 0
    if check:
        text, gaps = _coverage(matrix, check, version, probe_paths)
        out += [text, ""]
        code = 1 if gaps else 0
    out += ["Files:"] + files
    return "\n".join(out) + "\n", code

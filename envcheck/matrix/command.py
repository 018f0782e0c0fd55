"""``envcheck matrix``: show (a filtered part of) the matrix, or just validate it."""

import shutil
import textwrap

from tabulate import tabulate

from . import load as matrix_load, versions
from ..core.errors import UsageError
from .versions import sm_tuple


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


def _series_spans(gaps, matrix):
    """'2.2, 2.5-2.9': consecutive release series of the matrix joined into spans."""
    order = [r.series for r in matrix.releases]
    spans = []
    for s in gaps:
        if spans and order.index(s) == order.index(spans[-1][-1]) + 1:
            spans[-1].append(s)
        else:
            spans.append([s])
    return ", ".join(sp[0] if len(sp) == 1 else "%s-%s" % (sp[0], sp[-1]) for sp in spans)


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
            evidence += "\nnot observed: %s" % _series_spans(gaps, matrix)
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


def run(torch=None, cuda=None, check=None, validate=False, matrix_dirs=(), probe_paths=()):
    """The text to print; MatrixError (exit 2) when the matrix is invalid."""
    matrix = matrix_load.load(matrix_dirs, probe_paths)
    files = ["  %s%s" % (f.path, "" if f.builtin else "  (--matrix)") for f in matrix.files]
    if validate:
        return ("matrix OK: %d releases, %d CUDA toolkits, %d expectations, %d failure "
                "signatures from %d files\n%s\n"
                % (len(matrix.releases), len(matrix.toolkits), len(matrix.expectations),
                   len(matrix.signatures), len(matrix.files), "\n".join(files)))
    version, variant = _filters(torch, cuda)
    if version is not None and matrix.release(version) is None:
        raise UsageError("--torch %s: the matrix knows releases %s" % (
            torch, ", ".join(r.series for r in matrix.releases)))
    if check and not any(c == check or c.startswith(check + ".")
                         for e in matrix.expectations for c in e.checks):
        known = sorted({c for e in matrix.expectations for c in e.checks})
        raise UsageError("--check %s: no expectation for it (expectations exist for %s)"
                         % (check, ", ".join(known) or "nothing"))
    out = []
    if not check:
        out += ["Releases (Linux x86_64 wheels)", _releases(matrix, version, variant), ""]
        if version is not None:
            out += ["Builds of %s" % versions.series(version),
                    _variant_detail(matrix, version, variant), ""]
        out += ["CUDA toolkits (Linux driver)", _toolkits(matrix, variant), ""]
    out += ["Expectations", _expectations(matrix, version, variant, check), "",
            "Files:"] + files
    return "\n".join(out) + "\n"

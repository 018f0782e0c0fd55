"""envcheck as a library: each command's work, returning data. Nothing here prints.

The CLI (``cli.py``) is a set of short adapters over these functions: it parses the
options, calls one of them, and hands the result to a renderer. A program that wants
envcheck's answer (a CI gate, a scheduler's prolog, a notebook) calls them the same way::

    from envcheck import api

    report = api.run(api.plan(api.RunOptions(nproc=4)))
    if api.exit_code(report):
        ...

Bad input raises ``core.errors.UsageError`` (the CLI's one line and exit 2). Judging a
report against the matrix happens in one place, ``judge``: a run, a saved report given a
new matrix, the records of a launched job (rank 0 runs ``envcheck report --records``),
and the live view's lines all go through it. Only the matrix's check of its own evidence
(``matrix/evidence.py``, which this module cannot be imported by) calls its verdicts step
directly, as ``judge(..., live=True)`` would.

Supervisor side: never imports torch (a run's ranks do, in their own processes).
"""

from typing import Callable, Optional, Sequence

from .core.outcomes import ExitCode
from .run.runner import RunOptions

__all__ = ["RunOptions", "load_matrix", "judge", "plan", "LiveJudge", "run", "load_report",
           "exit_code", "check", "summarize", "explain"]


def load_matrix(matrix_dirs: Sequence[str] = (), probe_paths: Sequence[str] = ()):
    """The built-in matrix plus the files in ``matrix_dirs`` (``matrix.load.Matrix``);
    the custom probes' checks are known ids."""
    from .matrix import load as matrix_load

    return matrix_load.load(tuple(matrix_dirs), tuple(probe_paths))


def judge(report, matrix, live: bool = False):
    """Judge ``report`` against ``matrix``, in place, and return it: each check's verdict
    (expected, known issue, unexpected) and advice, then what the run as a whole says
    (the diagnosis of its failures, a framework's words for the advice).

    ``live``: only the verdicts, for the lines of a run still going (the live view): the
    whole-run steps need every check."""
    from .matrix import verdicts

    verdicts.apply(report, matrix)
    if live:
        return report
    from .explain.diagnose import diagnose
    from .matrix import framework_advice

    from .report import model_answer

    diagnose(report, matrix)
    framework_advice.advise(report)
    model_answer.settle(report)  # last: a model's failures keep only remedies tried here
    return report


def plan(options: RunOptions):
    """What a run will do (``run.runner.Plan``), every option checked before a rank
    starts."""
    from .run import runner

    return runner.make_plan(options)


class LiveJudge:
    """The lines of a run still going (the live view), judged as the report will be:
    ``judge(checks, environment, backend)`` sets their verdicts once ``run`` has loaded
    the matrix, and does nothing before."""

    def __init__(self, plan):
        self.plan, self.matrix = plan, None

    def __call__(self, checks, environment, backend):
        if self.matrix is None or not environment:
            return
        from . import __version__
        from .report.model import Report

        judge(Report(__version__, "", self.plan.to_dict(), environment,
                     [{"backend": backend}], checks, 0.0), self.matrix, live=True)


def run(plan, matrix_dirs: Sequence[str] = (),
        on_event: Optional[Callable] = None, head=None,
        while_starting: Optional[Callable] = None, live: Optional[LiveJudge] = None):
    """Start the ranks of ``plan``, run its probes, and return the judged ``Report``.

    The matrix is loaded while the ranks import torch (a bad one still stops the run:
    UsageError), and ``while_starting`` runs then too. ``on_event``: called with each
    record as the ranks write it. ``live``: judges the live view's lines once the matrix
    is there. ``head``: a head start (a fork server already importing torch)."""
    from .run import runner

    matrix: list = []
    # The custom probes' checks are known ids of the matrix (--probe-path files).
    probe_paths = tuple(dict.fromkeys(p.path for p in plan.probes if p.path))

    def starting():
        matrix.append(load_matrix(matrix_dirs, probe_paths))
        if live is not None:
            live.matrix = matrix[0]
        if while_starting:
            while_starting()

    report = runner.execute(plan, on_event=on_event, while_starting=starting, head=head)
    return judge(report, matrix[0] if matrix else load_matrix(matrix_dirs, probe_paths))


def load_report(path: Optional[str] = None, records: Optional[str] = None,
                matrix_dirs: Sequence[str] = (), matrix=None):
    """A saved report (``path``), or one built from a launched job's records
    (``records``: rank 0's records.jsonl or a directory of per-rank records).

    A saved report keeps the verdicts it was rendered with, unless ``matrix_dirs`` asks
    for a new judgement, or it was never judged (records; reports from before the
    matrix). ``matrix``: one already loaded, to judge with."""
    from .core.errors import UsageError
    from .report import model as report_mod

    if (path is None) == (records is None):
        raise UsageError("give either a saved report (FILE.json) or --records FILE|DIR")
    if records:
        from .run.launcher import build

        report = build(records)
    else:
        report = report_mod.load(path)
    if matrix_dirs or report.matrix is None:
        judge(report, matrix or load_matrix(matrix_dirs))
    return report


def exit_code(report, strict: bool = False) -> ExitCode:
    """0 when nothing unexpected (with ``strict``, nothing failed at all), 1 otherwise;
    130/143 when the run was interrupted."""
    from .run import runner

    return runner.exit_code(report, strict)


def check(requirement: Optional[str] = None, requirements_file: Optional[str] = None,
          cuda: Optional[str] = None, driver: Optional[str] = None,
          gpus: Sequence[str] = (), python_version: Optional[str] = None,
          suggest: bool = False, matrix_dirs: Sequence[str] = (),
          glibc: Optional[str] = None, index_url: Optional[str] = None,
          extra_index_urls: Sequence[str] = (), arch: Optional[str] = None):
    """Will this torch wheel work on this node (or the one described)? The answer
    (``preinstall.checker.CheckResult``), from the matrix; torch is never imported."""
    from .preinstall import checker

    return checker.run(requirement, requirements_file, cuda, driver, tuple(gpus),
                       python_version, suggest, tuple(matrix_dirs), glibc, index_url,
                       tuple(extra_index_urls), arch)


def summarize(paths: Sequence[str]):
    """Many nodes' answers (``check --json`` and ``run --json`` files, or directories of
    them) as one summary (``summary.build.Summary``)."""
    from .summary import build

    return build.summarize(list(paths))


def explain(logs: Sequence[str], matrix_dirs: Sequence[str] = ()):
    """The causes a failed job's logs show (``explain.explainer.Explained``); no logs:
    standard input."""
    from .explain import explainer

    return explainer.explain(list(logs), tuple(matrix_dirs))

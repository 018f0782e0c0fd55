"""The command line: parse, call the library, render, exit with a meaningful code.

Never imports torch (a test guards it): ``--help``, ``envcheck check`` and report
rendering must be instant and must work where torch is not installed.
"""

import os
import sys
from typing import List, Optional

import typer

try:  # typer >= 0.20 vendors its own click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exc

from . import __version__
from .core import options
from .core.errors import UsageError
from .core.outcomes import ExitCode

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None,
    help="Does distributed PyTorch training really work here? envcheck runs small "
         "multi-process jobs and tells you what breaks, before training does.")


def _version(value):
    if value:
        print("envcheck %s" % __version__)
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version,
                                      is_eager=True, help="Print the version and exit.")):
    pass


# One --format vocabulary on every command: text (the screen; "table" is its old name on
# run and report), json, and markdown where there is a markdown form (run, report).
FORMATS = ("text", "json", "markdown")
MATRIX_HELP = ("Also read the matrix files in DIR (repeatable): one named like a "
               "built-in file replaces it.")
REPORT_MATRIX_HELP = MATRIX_HELP + " Given here, the saved report is judged again."
STRICT_HELP = "Known issues fail too (exit 1), not only unexpected results."
VERBOSE_HELP = options.BY_DEST["verbose"].help
NO_COLOR_HELP = ("No colour, also on a terminal (as NO_COLOR=1 does). Pipes, files, JSON, "
                 "JUnit and markdown never have any.")
FAILED_HOSTS_HELP = ("Write the hosts that failed to FILE (atomically) as a SLURM hostlist "
                     "for srun/sbatch --exclude: node[1-3,7] (see --hostlist-style); empty "
                     "when none failed. See docs/cluster.md.")
READY_HOSTS_HELP = ("Write the hosts that are ready to FILE (atomically), as --failed-hosts "
                    "does: for srun/sbatch --nodelist.")
DRAIN_HELP = ("Write a shell script to FILE (atomically): a 'scontrol update NodeName=HOST "
              "State=DRAIN Reason=...' line per host that failed, with envcheck's reason.")
HOSTLIST_STYLE_HELP = ("How --failed-hosts and --ready-hosts list hosts: slurm (one line, "
                       "compressed: node[1-3,7]) or lines (one name a line, for pdsh -w ^FILE).")
METRICS_HELP = ("Also write metrics to FILE (atomically) in the format node_exporter's "
                "textfile collector reads (name it *.prom, in its --collector.textfile."
                "directory). See docs/metrics.md.")
METRICS_OPTION = typer.Option(None, "--metrics", metavar="FILE", help=METRICS_HELP,
                              hidden=True)


def _write_metrics(path, make):
    """``make()``'s registry to PATH, when --metrics asked for it."""
    if path:
        from .fleet import metrics

        metrics.write(path, make())


def _report_metrics(report):
    """A run report's metrics, from the same redacted data its JSON holds."""
    from .core import redact
    from .fleet import metrics

    return metrics.for_report(redact.deep(report.to_dict()))


# summary's and report's own options alike (a typer option may serve several commands)
FLEET_OPTIONS = "--metrics, --failed-hosts, --ready-hosts, --drain-script, --hostlist-style"
FAILED_HOSTS_OPTION = typer.Option(None, "--failed-hosts", metavar="FILE",
                                   help=FAILED_HOSTS_HELP, hidden=True)
DRAIN_OPTION = typer.Option(None, "--drain-script", metavar="FILE", help=DRAIN_HELP,
                            hidden=True)
READY_HOSTS_OPTION = typer.Option(None, "--ready-hosts", metavar="FILE",
                                  help=READY_HOSTS_HELP, hidden=True)
HOSTLIST_STYLE_OPTION = typer.Option("slurm", "--hostlist-style", metavar="slurm|lines",
                                     hidden=True,
                                     help=HOSTLIST_STYLE_HELP)


def _scheduler_options(failed, drain, ready, style):
    from .fleet.scheduler import Outputs

    outputs = Outputs(failed, drain, ready, style)
    outputs.check()
    return outputs


def _write_scheduler(answers, outputs):
    """The hostlists and drain script asked for; a host name SLURM cannot take is left
    out of them, with a line on stderr."""
    if not outputs:
        return
    from .core.text import printable
    from .fleet import scheduler

    for name in scheduler.write(answers, outputs):
        print("envcheck: note: %r is not a host name SLURM takes: left out of the host "
              "lists and the drain script" % printable(name), file=sys.stderr)


def terminal_width():
    """The terminal's columns when stdout is one; None for pipes and files, which get
    the full layout."""
    import shutil

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(40, shutil.get_terminal_size().columns)


def shared_option(dest):
    """An option ``envcheck run`` shares with launcher mode, as core/options.py declares
    it (the launcher's argparse is built from the same declaration)."""
    o = options.BY_DEST[dest]
    default = [] if o.kind == "list" else o.default
    if o.kind == "flag":
        return typer.Option(default, *o.flags, help=o.help, hidden=o.advanced)
    return typer.Option(default, *o.flags, metavar=o.metavar, help=o.help, hidden=o.advanced)


def format_option(markdown=False):
    """--format, the same values on every command that prints."""
    values = FORMATS if markdown else FORMATS[:2]
    return typer.Option("text", "--format", metavar="|".join(values),
                        help="What to print: the text screen, json or markdown (for "
                             "$GITHUB_STEP_SUMMARY)." if markdown else
                             "What to print: the text screen or json (markdown is run's "
                             "and report's).")


def quiet_option(what=None):
    """-q on every command that prints; ``what``: the command, when it has no live view."""
    return typer.Option(False, "--quiet", "-q", help=(
        "No live view (on a terminal) nor progress lines (elsewhere) on stderr."
        if what is None else "No live view: %s has none (accepted on every command)." % what))


def no_color_option(what=None):
    """--no-color on every command that prints; ``what``: the command, when it prints
    no colour at all."""
    return typer.Option(False, "--no-color", help=NO_COLOR_HELP if what is None else
                        "No colour: %s prints none (accepted on every command)." % what)


def _help_all(ctx: typer.Context, value: bool):
    """--help-all: the help with the options plain --help leaves out (hidden=True)."""
    if not value or ctx.resilient_parsing:
        return
    for param in ctx.command.params:
        param.hidden = param.name == "help_all"
    typer.echo(ctx.get_help())
    raise typer.Exit()


def help_all_option(advanced="--startup-timeout, --probe-path, --min-busbw, --for, "
                               "--mesh*, --master-port, --metrics"):
    return typer.Option(False, "--help-all", is_eager=True, callback=_help_all,
                        help="Also the advanced options (%s), and exit." % advanced)


def _check_format(fmt, command="run", markdown=True):
    """``fmt`` in the one vocabulary (``table`` read as ``text``), or one line saying
    what this command takes."""
    fmt = "text" if fmt == "table" and markdown else fmt
    values = FORMATS if markdown else FORMATS[:2]
    if fmt == "markdown" and not markdown:
        raise UsageError("--format markdown: envcheck %s has no markdown form (run and "
                         "report have one, for $GITHUB_STEP_SUMMARY); choose text or json"
                         % command)
    if fmt not in values:
        raise UsageError("--format %r: choose %s" % (
            fmt, "text or json" if len(values) == 2 else ", ".join(values)))
    return fmt


def _painter(no_color):
    """Colour for what goes to stdout: on a terminal only (see render.paint)."""
    from .render import paint

    return paint.Painter(paint.wanted(sys.stdout, no_color))


def _emit(report, fmt, json_path=None, junit_path=None, strict=False, no_color=False,
          verbose=False, probes_shown=False):
    """Write the report files asked for (each atomically), then print it in FMT."""
    from .core import redact
    from .core.atomic import write_atomic
    from .report import model as report_mod

    # Secrets by value, wherever a rank put them (an exception, a traceback, a path):
    # every output below reads this one redacted copy. A screen alone shows no rank's
    # stderr or stacks in full: a flooded stderr kept in the report is cut first, not
    # searched for secrets megabyte by megabyte (JSON and JUnit keep everything).
    report.strict = bool(strict)  # the JSON's answer says what this run exits with
    data = report.to_dict()
    if fmt != "json" and not json_path and not junit_path:
        data = _screen_sized(data)
    report = report_mod.Report.from_dict(redact.deep(data))
    text = report_mod.dumps(report) if fmt == "json" or json_path else None
    failed = []
    for path, render in ((json_path, lambda: text), (junit_path, lambda: _junit(report, strict))):
        if path:
            try:
                write_atomic(path, render())
            except OSError as exc:  # a full disk, a file size limit: the run still happened
                failed.append("cannot write %s: %s" % (path, exc.strerror or exc))
    if fmt == "json":
        from .core.text import json_screen

        screen = json_screen(text)
    else:
        from .core.text import printable

        # What a rank wrote may hold escapes of its own: a screen shows only envcheck's.
        shown = report_mod.Report.from_dict(printable(report.to_dict()))
        if fmt == "markdown":
            from .render.markdown import render as render_markdown
            screen = render_markdown(shown, strict=strict)
        else:
            from .render.table import render as render_table
            width = terminal_width()
            screen = render_table(shown, width=width, strict=strict, paint=_painter(no_color),
                                  verbose=verbose, probes_shown=probes_shown and bool(width))
    # Undecodable bytes a rank passed on show escaped, as in the JSON report. The
    # terminal gone (closed: SIGHUP) or the pipe cut: the report files are written, and
    # the exit code still says what happened.
    write_screen(report_mod.jsonable(screen))
    if failed:
        raise UsageError("; ".join(failed))


SCREEN_TEXT_LIMIT = 64 * 1024  # characters of one string a screen could need, at most


def _screen_sized(value):
    """``value`` with every string longer than SCREEN_TEXT_LIMIT cut to its end (what a
    rank wrote last is what explains it), for the screen only."""
    if isinstance(value, str):
        return value if len(value) <= SCREEN_TEXT_LIMIT else \
            "…" + value[-SCREEN_TEXT_LIMIT:]
    if isinstance(value, dict):
        return {k: _screen_sized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_screen_sized(v) for v in value]
    return value


# Where stdout cannot encode envcheck's glyphs (a latin-1 or ASCII locale, a pipe with
# PYTHONIOENCODING=ascii): the ASCII that says the same; anything else is escaped.
ASCII_GLYPHS = str.maketrans({"✓": "+", "✗": "x", "…": "...", "–": "-", "—": "-",
                              "→": "->", "≥": ">=", "·": "*", "×": "x", "⚠": "!",
                              "ℹ": "i", "⧗": "~", "⏳": "~", "⏭": ">>", "✅": "+",
                              "❌": "x", "🚫": "-", "💥": "!", "\ufe0f": ""})


def write_screen(text, stream=None):
    """Write what envcheck prints to stdout. Any encoding: glyphs it cannot show become
    ASCII. A reader that went away (a closed pipe: ``| head``, a closed terminal) is not
    an answer: the caller's exit code still says what the answer was."""
    stream = stream or sys.stdout
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(stream, "encoding", None) or "ascii"
            plain = text.translate(ASCII_GLYPHS)
            stream.write(plain.encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
    except (OSError, ValueError):  # BrokenPipeError, EIO on a hung-up terminal, closed
        _silence_stdout()


def _silence_stdout():
    """stdout is gone: point fd 1 at /dev/null, so that the flush at exit (Python's
    own) cannot fail and turn the answer's exit code into 120."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def _renderers(fmt, junit_path):
    """Import what ``_emit`` will use for this format."""
    import importlib

    names = ["core.redact", "core.text", "core.atomic"]
    names += {"text": ["render.table", "render.paint"], "markdown": ["render.markdown"]}.get(
        fmt, [])
    names += ["render.junit"] if junit_path else []
    for name in names:
        importlib.import_module("." + name, __package__)


def _junit(report, strict):
    from .render.junit import render

    return render(report, strict=strict)


@app.command()
def run(
    nproc: Optional[int] = typer.Option(None, "--nproc", "-n",
                                        help="Ranks to start [default: one per local GPU, else 2]."),
    backend: str = shared_option("backend"),
    probe: List[str] = shared_option("probe"),
    skip: List[str] = shared_option("skip"),
    timeout: float = shared_option("timeout"),
    startup_timeout: Optional[float] = shared_option("startup_timeout"),
    python: Optional[str] = typer.Option(None, "--python", metavar="PATH",
                                         help="Run the ranks under this interpreter (e.g. another "
                                              "venv's python); it needs torch, not envcheck."),
    probe_path: List[str] = shared_option("probe_path"),
    model: Optional[str] = typer.Option(None, "--model", metavar="MODULE:FACTORY",
                                        help="What your model survives (deepcopy, pickle, "
                                             "DDP, DCP...): pkg.mod:factory or f.py:factory."),
    min_busbw: Optional[str] = shared_option("min_busbw"),
    repeat: Optional[str] = shared_option("repeat"),
    duration: Optional[str] = shared_option("duration"),
    mesh: Optional[str] = shared_option("mesh"),
    mesh_config: Optional[str] = shared_option("mesh_config"),
    mesh_order: Optional[str] = shared_option("mesh_order"),
    framework: List[str] = typer.Option([], "--framework", metavar="NAME",
                                        help="Check the model as this framework wraps and "
                                             "launches it (lightning, accelerate, deepspeed; "
                                             "repeatable); one not installed fails "
                                             "[default: the installed ones]."),
    json_path: Optional[str] = shared_option("json_path"),
    junit_path: Optional[str] = shared_option("junit_path"),
    fmt: str = format_option(markdown=True),
    master_port: Optional[int] = typer.Option(None, "--master-port", metavar="PORT", hidden=True,
                                              help="Rendezvous port to try first [default: a free one]; "
                                                   "if it is taken, a free one is used."),
    matrix_dir: List[str] = typer.Option([], "--matrix", metavar="DIR", help=MATRIX_HELP),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    quiet: bool = quiet_option(),
    help_all: bool = help_all_option(),
    no_color: bool = no_color_option(),
    verbose: bool = shared_option("verbose"),
    metrics_path: Optional[str] = METRICS_OPTION,
):
    """Run the probes on this machine and report what works."""
    from . import api
    from .report import model as report_mod
    from .render.progress import Progress

    fmt = _check_format(fmt)
    for path in (json_path, junit_path, metrics_path):
        if path:
            report_mod.check_writable(path)
    plan = api.plan(api.RunOptions(
        nproc=nproc, backend=backend, probes=tuple(probe), skip=tuple(skip),
        timeout=timeout, python=python, probe_paths=tuple(probe_path), model=model,
        master_port=master_port, startup_timeout=startup_timeout,
        frameworks=tuple(framework), min_busbw=min_busbw, repeat=repeat,
        duration=duration, mesh=mesh, mesh_config=mesh_config, mesh_order=mesh_order))
    live = api.LiveJudge(plan)
    with Progress(enabled=not quiet, no_color=no_color, plan=plan, judge=live,
                  strict=strict) as progress:
        # What will print the report (tens of milliseconds of imports) is imported while
        # the ranks import torch, not after they end.
        report = api.run(plan, matrix_dir, on_event=progress, head=_head,
                         while_starting=lambda: _renderers(fmt, junit_path), live=live)
    _emit(report, fmt, json_path, junit_path, strict=strict, no_color=no_color,
          verbose=verbose)
    _write_metrics(metrics_path, lambda: _report_metrics(report))
    raise typer.Exit(int(api.exit_code(report, strict)))


@app.command()
def report(
    path: Optional[str] = typer.Argument(None, metavar="FILE.json",
                                         help="A report saved with --json."),
    records: Optional[str] = typer.Option(
        None, "--records", metavar="FILE|DIR",
        help="Instead, build the report from ranks started by torchrun or srun "
             "(python -m envcheck.worker.launched): rank 0's records.jsonl, or after a "
             "hang the --out directory of per-rank records (see docs/multinode.md)."),
    fmt: str = format_option(markdown=True),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH",
                                            help="Also write the JSON report here (atomically)."),
    junit_path: Optional[str] = typer.Option(None, "--junit", metavar="PATH",
                                             help="Also write JUnit XML here (atomically)."),
    matrix_dir: List[str] = typer.Option([], "--matrix", metavar="DIR", help=REPORT_MATRIX_HELP),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    quiet: bool = quiet_option("report"),
    no_color: bool = no_color_option(),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
    records_on_stdin: bool = typer.Option(False, "--records-on-stdin", hidden=True),
    failed_hosts: Optional[str] = FAILED_HOSTS_OPTION,
    drain_script: Optional[str] = DRAIN_OPTION,
    ready_hosts: Optional[str] = READY_HOSTS_OPTION,
    hostlist_style: str = HOSTLIST_STYLE_OPTION,
    metrics_path: Optional[str] = METRICS_OPTION,
    help_all: bool = help_all_option(FLEET_OPTIONS),
):
    """Render a saved JSON report again (re-judged with --matrix DIR); runs nothing.

    A launcher-mode report names the hosts each failing check blames: --failed-hosts,
    --drain-script and --ready-hosts hand them to SLURM (see --help-all).
    """
    from . import api
    from .report import model as report_mod

    fmt = _check_format(fmt)
    judged_by = None
    if records_on_stdin:
        # Started early by rank 0 of a launched job (worker/launched.py): get the imports
        # and the matrix done while the probes run, then wait for the records' path. No
        # line: the rank never got that far, and its watcher reports instead.
        from .explain.diagnose import diagnose  # noqa: F401 - imported now, used below
        from .run.launcher import build  # noqa: F401

        judged_by = api.load_matrix(matrix_dir)
        records = sys.stdin.readline().strip()
        if not records:
            raise typer.Exit(0)
    if (path is None) == (records is None):
        raise UsageError("give either a saved report (FILE.json) or --records FILE|DIR")
    for out in (json_path, junit_path, metrics_path):
        if out:
            report_mod.check_writable(out)
    outputs = _scheduler_options(failed_hosts, drain_script, ready_hosts, hostlist_style)
    saved = None
    try:
        saved = api.load_report(path, records, matrix_dir, matrix=judged_by)
        _emit(saved, fmt, json_path, junit_path, strict=strict, no_color=no_color,
              verbose=verbose)
        if outputs:
            from .fleet.scheduler import from_report
            _write_scheduler(from_report(saved), outputs)
        _write_metrics(metrics_path, lambda: _report_metrics(saved))
        code = api.exit_code(saved, strict)
    except UsageError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        # A file from anywhere: a field deep inside of a type no envcheck writes.
        raise UsageError("%s is not an envcheck report this envcheck can show: a field is "
                         "malformed (%s: %s)" % (path or records, type(exc).__name__, exc)) \
            from None
    raise typer.Exit(int(code))


@app.command()
def probes(
    probe_path: List[str] = typer.Option([], "--probe-path", metavar="FILE.py",
                                         help="Also list the probes in this file."),
    checks: bool = typer.Option(False, "--checks",
                                help="List every check id (PROBE.CHECK) the probes declare, "
                                     "a line each: the ids the matrix and reports use."),
):
    """List the probes, a line each."""
    from tabulate import tabulate

    from .probes.catalog import RUN, SETUP, SETUP_CHECKS, all_probes, opt_in
    from .core.text import printable

    specs = all_probes(tuple(probe_path))
    if checks:
        lines = ["%s.%s" % (SETUP, c) for c in SETUP_CHECKS]
        for s in specs:
            names = s.checks if s.checks is not None else ("(any: CHECKS not declared)",)
            lines += ["%s.%s" % (s.name, c) for c in names + (RUN,)]
        write_screen(printable("\n".join(lines) + "\n"))
        return
    rows = [(s.name, ("built-in, opt-in (-p %s)" % s.name if opt_in(s) else "built-in")
             if s.builtin else (s.path or s.module), s.summary) for s in specs]
    width = terminal_width()
    summary_width = None
    if width:  # the summary wraps in what the name and origin columns leave
        used = max(len("probe"), *(len(r[0]) for r in rows)) + \
            max(len("from"), *(len(r[1]) for r in rows)) + 4
        summary_width = max(20, width - used)
    write_screen(printable(tabulate(rows, headers=["probe", "from", "what it proves"],
                                    maxcolwidths=[None, None, summary_width]) + "\n"))


@app.command()
def check(
    requirement: Optional[str] = typer.Argument(None, metavar="[REQUIREMENT]",
                                                help="torch==2.4.1+cu124, torch==2.4.1 for "
                                                     "the default PyPI build, or a range "
                                                     "(torch>=2.4), resolved as pip would "
                                                     "on this node."),
    requirements_file: Optional[str] = typer.Option(None, "-r", "--requirement",
                                                    metavar="FILE",
                                                    help="Read the torch pin (and index URL) "
                                                         "from a requirements file."),
    cuda: Optional[str] = typer.Option(None, "--cuda", metavar="X.Y",
                                       help="The CUDA variant (12.4 means +cu124; cpu)."),
    driver: Optional[str] = typer.Option(None, "--driver", metavar="VERSION",
                                         help="Plan for this NVIDIA driver instead of this node's."),
    gpu: List[str] = typer.Option([], "--gpu", metavar="sm_XY",
                                  help="Plan for this GPU (repeatable) instead of this node's: "
                                       "sm_XY, or a name like \"NVIDIA B200\"."),
    python_version: Optional[str] = typer.Option(None, "--python-version", metavar="X.Y",
                                                 help="Plan for this Python (3.13t: free-threaded)."),
    arch: Optional[str] = typer.Option(None, "--arch", metavar="x86_64|aarch64",
                                       help="Plan for this CPU [default: this node's; "
                                            "aarch64 for a Grace GPU: GB200, GB10]."),
    glibc: Optional[str] = typer.Option(None, "--glibc", metavar="X.Y",
                                        help="Plan for this glibc (2.17: CentOS 7) instead of "
                                             "this node's."),
    index_url: Optional[str] = typer.Option(
        None, "--index-url", "-i", metavar="URL",
        help="Resolve from this index instead of PyPI, as pip would "
             "(https://download.pytorch.org/whl/cu126 serves the cu126 builds)."),
    extra_index_url: List[str] = typer.Option(
        [], "--extra-index-url", metavar="URL",
        help="Also resolve from this index (repeatable); pip takes the highest version "
             "of all."),
    suggest: bool = typer.Option(False, "--suggest",
                                 help="List the newest torch builds that will work here, with "
                                      "the pip command."),
    json_path: Optional[str] = typer.Option(
        None, "--json", metavar="PATH",
        help="Also write the answer as JSON (atomically), named by this node's host "
             "(ENVCHECK_HOST): a file per node, for 'envcheck summary'."),
    fmt: str = format_option(),
    matrix_dir: List[str] = typer.Option([], "--matrix", metavar="DIR", help=MATRIX_HELP),
    quiet: bool = quiet_option("check"),
    no_color: bool = no_color_option(),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Each known issue with its advice, source and the builds "
                                      "it was observed on [default: a line each]."),
    metrics_path: Optional[str] = METRICS_OPTION,
    help_all: bool = help_all_option("--metrics"),
):
    """Will this torch wheel work on this node? Instant, from the matrix; no torch needed.

    Exit codes: 0 will work; 1 will not work (only --suggest: no build will); 2 bad
    input or a broken nvidia-smi; 3 cannot judge: the matrix lacks a fact the answer
    needs (a ROCm build on a node with no GPU; a node that is not Linux x86_64).
    """
    from . import api
    from .core import redact
    from .render import answer as render_check

    fmt = _check_format(fmt, "check", markdown=False)
    for path in (json_path, metrics_path):
        if path:
            from .report.model import check_writable
            check_writable(path)
    result = api.check(requirement, requirements_file, cuda, driver, gpu, python_version,
                       suggest, matrix_dir, glibc, index_url, extra_index_url, arch)
    _no_such_variant(result, tuple(matrix_dir))
    data = redact.text(render_check.to_json(result))
    if json_path:
        from .core.atomic import write_atomic
        try:
            write_atomic(json_path, data)
        except OSError as exc:
            raise UsageError("cannot write %s: %s" % (json_path, exc.strerror or exc)) from None
    if metrics_path:
        import json

        from .fleet import metrics
        _write_metrics(metrics_path, lambda: metrics.for_check(json.loads(data)))
    from .core.text import json_screen, printable

    if fmt == "json":
        write_screen(json_screen(data))
    else:
        from .render import paint, vocabulary

        # GPU names and nvidia-smi's own words are shown escaped, before envcheck's colour.
        text = printable(redact.text(render_check.render(result, width=terminal_width(),
                                                         verbose=verbose)))
        write_screen(paint.lead_glyphs(text, _painter(no_color), vocabulary.CHECK_STYLES))
    raise typer.Exit(int(result.exit_code))


def _no_such_variant(result, matrix_dirs):
    """A CUDA variant no torch release has (+cu999, a typo) is bad input: one line, exit 2,
    not a page of criteria that all say 'no such build'."""
    answer = result.answer
    if answer is None or answer.works or not answer.build.variant.startswith("cu"):
        return
    from . import api

    known = sorted({v.name for r in api.load_matrix(matrix_dirs).releases for v in r.variants
                    if v.name.startswith("cu")}, key=lambda n: int(n[2:] or 0))
    if answer.build.variant not in known:
        raise UsageError("%s: no torch release has a %s build (the CUDA variants are %s); "
                         "'envcheck check --suggest' lists the builds that work here"
                         % (result.requirement, answer.build.variant, ", ".join(known)))


@app.command()
def summary(
    paths: List[str] = typer.Argument(..., metavar="DIR|FILE...",
                                      help="Per-node answers: files written by 'envcheck "
                                           "check --json' or 'envcheck run --json', or "
                                           "directories of them (*.json), in any mix."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH",
                                            help="Also write the summary as JSON here "
                                                 "(atomically)."),
    fmt: str = format_option(),
    quiet: bool = quiet_option("summary"),
    no_color: bool = no_color_option("summary"),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Every failure group and every differing value, none "
                                      "counted away [default: the first 8 groups, 3 values "
                                      "per fact]."),
    failed_hosts: Optional[str] = FAILED_HOSTS_OPTION,
    drain_script: Optional[str] = DRAIN_OPTION,
    ready_hosts: Optional[str] = READY_HOSTS_OPTION,
    hostlist_style: str = HOSTLIST_STYLE_OPTION,
    metrics_path: Optional[str] = METRICS_OPTION,
    help_all: bool = help_all_option(FLEET_OPTIONS),
):
    """Many nodes' answers as one screen: how many will work, the rest by reason.

    Healthy nodes are counted; failing ones are grouped by the same reasons with their
    host names; nodes whose driver, GPU, GPU count, Python or glibc differ from the
    majority are listed even where they work. Exit codes: 0 every node will work; 1 some
    node will not work; 2 bad usage, or no answer could be read; 3 nothing fails, but a
    node cannot be judged or an input could not be used.
    """
    import datetime

    from . import api
    from .render import overview as render_summary

    fmt = _check_format(fmt, "summary", markdown=False)
    for path in (json_path, metrics_path):
        if path:
            from .report.model import check_writable
            check_writable(path)
    outputs = _scheduler_options(failed_hosts, drain_script, ready_hosts, hostlist_style)
    result = api.summarize(paths)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data = render_summary.to_json(result, created)
    if json_path and result.records:
        from .core.atomic import write_atomic
        try:
            write_atomic(json_path, data)
        except OSError as exc:
            raise UsageError("cannot write %s: %s" % (json_path, exc.strerror or exc)) from None
    if result.records:
        import json

        from .fleet import metrics
        from .fleet.scheduler import from_summary
        _write_scheduler(from_summary(result), outputs)
        _write_metrics(metrics_path, lambda: metrics.for_summary(json.loads(data)))
    from .core.text import json_screen, printable

    # Host names and reasons come from files anyone could have written.
    write_screen(json_screen(data) if fmt == "json" else
                 printable(render_summary.render(result, width=terminal_width() or 80,
                                                 verbose=verbose)))
    raise typer.Exit(int(result.exit_code) if result.records else int(ExitCode.USAGE))


@app.command()
def explain(
    logs: List[str] = typer.Argument(None, metavar="LOG",
                                     help="The job's log files (plain or gzipped, any size, "
                                          "ranks interleaved; UTF-16 with its mark, JSON "
                                          "lines of Docker or a log shipper, torchrun's "
                                          "--log-dir files and error.json); '-' or none: "
                                          "stdin."),
    fmt: str = format_option(),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH",
                                            help="Also write the JSON answer here "
                                                 "(atomically)."),
    matrix_dir: List[str] = typer.Option([], "--matrix", metavar="DIR", help=MATRIX_HELP),
    quiet: bool = quiet_option("explain"),
    no_color: bool = no_color_option("explain"),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Each cause's whole source (the code and every "
                                      "release read, the quotes) [default: its links]."),
):
    """Why did this distributed job fail? The cause, the fix and the source, from its log.

    Reads the log as it comes (torchrun's [rank3]:, srun's 3:, [default0]: prefixes,
    kubectl's and syslog's, colour codes and all), matches it against the failure signatures of the matrix and
    prints each distinct cause once: the ranks and hosts it appeared on, the first line
    that shows it, the fix (in Lightning's, Accelerate's or DeepSpeed's words when the log
    shows one of them) and the public source. It also judges the versions the job printed
    (torch, NCCL, CUDA, driver) against the matrix. Example:

    \b
      $ torchrun --standalone --nproc-per-node 4 --tee 3 train.py > job.log 2>&1
      $ envcheck explain job.log
      envcheck explain: 1 cause found in job.log (160 lines)
      ✗ something that holds a process group was pickled or deep-copied (...)
        ranks 0–3 · 4 lines, first at job.log:40
        > [default1]:[rank1]: TypeError: cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object
        fix: do not deepcopy a model that stores a process group (...)
        source: https://github.com/pytorch/pytorch/issues/73825 (open); ...

    Exit codes: 0 a known cause was found; 1 nothing recognised (it then says what to
    collect next); 2 bad input.
    """
    from . import api
    from .render import explanation as explain_render

    fmt = _check_format(fmt, "explain", markdown=False)
    if json_path:
        from .report.model import check_writable
        check_writable(json_path)
    if not logs:
        try:
            interactive = sys.stdin.isatty()
        except (AttributeError, ValueError):
            interactive = False
        if interactive:
            raise UsageError("give the job's log (envcheck explain job.log), or pipe it in "
                             "(... 2>&1 | envcheck explain)")
    result = api.explain(logs or [], matrix_dir)
    if json_path:
        from .core.atomic import write_atomic
        try:
            write_atomic(json_path, explain_render.to_json(result))
        except OSError as exc:
            raise UsageError("cannot write %s: %s" % (json_path, exc.strerror or exc)) from None
    from .core.text import json_screen

    # A log's bytes, shown: DEL and the C1 controls escaped in JSON too (docs/safety.md),
    # as check's and summary's JSON has them.
    sys.stdout.write(json_screen(explain_render.to_json(result)) if fmt == "json"
                     else explain_render.render(result, width=terminal_width(),
                                                verbose=verbose))
    raise typer.Exit(int(result.exit_code))


@app.command("matrix")
def matrix_cmd(
    torch: Optional[str] = typer.Option(None, "--torch", metavar="VERSION",
                                        help="Only this torch release (2.4, 2.4.1+cu124)."),
    cuda: Optional[str] = typer.Option(None, "--cuda", metavar="X.Y",
                                       help="Only this CUDA variant (12.4, cpu)."),
    check_id: Optional[str] = typer.Option(None, "--check", metavar="ID",
                                           help="Only this check (or probe): its expectations, and "
                                                "what they rest on per release."),
    validate: bool = typer.Option(False, "--validate",
                                  help="Only validate the matrix: exit 0 if valid, 2 with "
                                       "every error listed."),
    coverage: bool = typer.Option(False, "--coverage",
                                  help="Per check, the releases its verdict rests on: "
                                       "observed runs (evidence/), a public source alone, "
                                       "runs that all skipped it; exit 1 naming any "
                                       "release with none (also with --check)."),
    matrix_dir: List[str] = typer.Option([], "--matrix", metavar="DIR", help=MATRIX_HELP),
    probe_path: List[str] = typer.Option([], "--probe-path", metavar="FILE.py",
                                         help="Also accept the checks of the probes in this file."),
    no_pager: bool = typer.Option(False, "--no-pager",
                                  help="Print it all, also on a terminal [default: longer "
                                       "than the terminal goes through $PAGER, else less]."),
):
    """Show the version matrix: releases, CUDA drivers, and expected outcomes per check."""
    from .render import listing as matrix_command

    from .core.text import printable

    text, code = matrix_command.run(torch, cuda, check_id, validate, tuple(matrix_dir),
                                    tuple(probe_path), coverage)
    _page(printable(text), enabled=not no_pager)
    raise typer.Exit(code)


def _page(text, enabled=True):
    """``text`` through a pager ($PAGER, else less) where it would not fit the terminal,
    as git does; pipes, files and a dumb terminal get it as it is (write_screen)."""
    import shlex
    import shutil
    from .launch import procs

    try:
        interactive = sys.stdout.isatty() and sys.stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    rows = shutil.get_terminal_size().lines
    if not (enabled and interactive and os.environ.get("TERM") != "dumb"
            and text.count("\n") >= rows):
        write_screen(text)
        return
    pager = os.environ.get("PAGER") or "less"
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # quit if one screen, keep colours, leave the screen
    sys.stdout.flush()
    try:
        procs.run(shlex.split(pager), input=text, text=True, env=env, check=False)
    except (OSError, ValueError):  # no such pager: the text as it is
        write_screen(text)


class _AsGiven:
    """Coercion for options that are strings (or flags, or lists of strings) already.

    typer >= 0.20 coerces every value through a pydantic TypeAdapter; importing pydantic
    and building an adapter per option costs about 0.2 s of CPU, more than the whole
    answer of ``envcheck check``, which an admin runs on every node of a cluster. Click
    hands these values over as strings already, so nothing is lost. (Options with
    numbers, such as ``run --nproc``, keep typer's coercion.)"""

    @staticmethod
    def coerce(value, param, ctx):
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        return list(value) if isinstance(value, tuple) else value


def _fast_plain_options(command):
    # the group's own options (--version, --help) are parsed on every command too
    commands = [command] + list(getattr(command, "commands", {}).values())
    params = []
    for c in commands:
        params += getattr(c, "params", [])
        try:  # --help is made on first use, then kept: make it now to reach it
            params.append(c.get_help_option(c.context_class(c)))
        except Exception:  # noqa: BLE001 - an older typer: it simply stays as it is
            pass
    for p in params:
        desc = getattr(p, "type_descriptor", None)
        # only where typer has the lazy hook, and only for plain string types
        if hasattr(p, "_runtime_param") and desc is not None and \
                desc.annotation in (str, bool, List[str]):
            p._runtime_param = _AsGiven


# The run's head start (run/headstart.py): begun by ``__main__`` (or ``entry``) before the
# options are parsed, taken by ``run``'s first attempt, stopped by ``entry`` if nothing
# took it.
_head = None


def entry(argv=None, head=False):
    """Console-script entry: every error is one line, exit 2; never a traceback.
    ``head``: the head start ``__main__`` began already (None: it began none)."""
    global _head
    if head is False:
        from .core.limits import ensure_std_fds
        from .run import headstart

        ensure_std_fds()

        head = headstart.begin(sys.argv[1:] if argv is None else argv)
    _head = head
    try:
        _entry(argv)
    finally:
        if _head is not None:
            _head.close()
            _head = None


def _fail(message, code=ExitCode.USAGE):
    """One line on stderr, then exit: the message may quote a file, a path or a tool's
    words, so it is redacted and shown escaped."""
    from .core import redact
    from .core.text import printable

    try:
        print("envcheck: error: %s" % printable(redact.text(str(message))), file=sys.stderr)
    except (OSError, ValueError):  # stderr gone too: the exit code is all there is
        pass
    sys.exit(code)


def _entry(argv):
    from .core.limits import os_error_line

    command = typer.main.get_command(app)
    _fast_plain_options(command)
    try:
        try:
            os.getcwd()
        except OSError:
            raise UsageError("the current directory no longer exists (deleted or unmounted): "
                             "cd to one that does and run envcheck again") from None
        code = command.main(args=argv, prog_name="envcheck", standalone_mode=False)
    except UsageError as exc:  # the bad input may carry a credential (a URL pin)
        _fail(exc)
    except click_exc.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help())
        sys.exit(0)
    except click_exc.UsageError as exc:
        hint = " (see 'envcheck %s--help')" % (exc.ctx.info_name + " " if exc.ctx
                                                and exc.ctx.parent else "")
        print("envcheck: error: %s%s" % (exc.format_message(), hint), file=sys.stderr)
        sys.exit(ExitCode.USAGE)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("envcheck: aborted", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        # Ctrl-C outside a run (while planning or rendering): nothing was started.
        print("envcheck: interrupted", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(0)
    except RecursionError:
        _fail("an input is nested too deeply to read (a chain of includes, or JSON nested "
              "thousands deep)")
    except OSError as exc:
        # The environment, not the input: a process or open-file limit, a full disk.
        _fail(os_error_line(exc))
    except ModuleNotFoundError as exc:
        # an install without one of envcheck's dependencies: the single-file build
        # (dev/build_zipapp.py) leaves pydantic out, which only number options need
        print("envcheck: error: this command needs the Python package %r, which is not "
              "installed with this envcheck: install envcheck from its clone, pip install "
              "/path/to/envcheck (docs/install.md; the single-file build runs check, "
              "summary, matrix, report and probes)" % exc.name, file=sys.stderr)
        sys.exit(ExitCode.USAGE)
    sys.exit(code or 0)

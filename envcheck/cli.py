"""The command line: parse, call the library, render, exit with a meaningful code.

Never imports torch (a test guards it): ``--help``, ``envcheck check`` and report
rendering must be instant and must work where torch is not installed.
"""

import sys
from typing import List, Optional

import typer

try:  # typer >= 0.20 vendors its own click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exc

from . import __version__
from .errors import UsageError
from .outcomes import ExitCode

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


FORMATS = ("table", "json", "markdown")


def _check_format(fmt):
    if fmt not in FORMATS:
        raise UsageError("--format %r: choose %s" % (fmt, ", ".join(FORMATS)))


def _emit(report, fmt, json_path=None, junit_path=None, strict=False):
    """Write the report files asked for (each atomically), then print it in FMT."""
    from . import report as report_mod

    text = report_mod.dumps(report)
    if json_path:
        report_mod.write_atomic(json_path, text)
    if junit_path:
        from .render_junit import render as render_junit
        report_mod.write_atomic(junit_path, render_junit(report, strict=strict))
    if fmt == "json":
        sys.stdout.write(text)
    elif fmt == "markdown":
        from .render_markdown import render as render_markdown
        sys.stdout.write(render_markdown(report, strict=strict))
    else:
        from .render_table import render as render_table
        sys.stdout.write(render_table(report))


@app.command()
def run(
    nproc: Optional[int] = typer.Option(None, "--nproc", "-n",
                                        help="Ranks to start [default: one per local GPU, else 2]."),
    backend: str = typer.Option("auto", "--backend",
                                help="auto (nccl when every rank has a GPU, else gloo), gloo or nccl."),
    probe: List[str] = typer.Option([], "--probe", "-p", metavar="NAME",
                                    help="Run only this probe (repeatable) [default: all]."),
    skip: List[str] = typer.Option([], "--skip", metavar="NAME", help="Do not run this probe (repeatable)."),
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS",
                                  help="Per probe (and for init_process_group): past it, the "
                                       "probe is a hang and its stacks are collected."),
    python: Optional[str] = typer.Option(None, "--python", metavar="PATH",
                                         help="Run the ranks under this interpreter (e.g. another "
                                              "venv's python); it needs torch, not envcheck."),
    probe_path: List[str] = typer.Option([], "--probe-path", metavar="FILE.py",
                                         help="Load custom probes (def probe_NAME(ctx)) from this file (repeatable)."),
    model: Optional[str] = typer.Option(None, "--model", metavar="MODULE:FACTORY",
                                        help="Run serialization and checkpoint checks on your model: "
                                             "pkg.module:factory or path/to/file.py:factory."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH",
                                            help="Also write the JSON report here (atomically)."),
    junit_path: Optional[str] = typer.Option(None, "--junit", metavar="PATH",
                                             help="Also write JUnit XML here (atomically): a "
                                                  "testcase per check, for CI test tabs."),
    fmt: str = typer.Option("table", "--format",
                            help="What to print: table, json or markdown (for "
                                 "$GITHUB_STEP_SUMMARY)."),
    master_port: Optional[int] = typer.Option(None, "--master-port", metavar="PORT",
                                              help="Rendezvous port to try first [default: a free one]; "
                                                   "if it is taken, a free one is used."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress on stderr."),
):
    """Run the probes on this machine and report what works."""
    from . import report as report_mod
    from . import runner
    from .progress import Progress

    _check_format(fmt)
    for path in (json_path, junit_path):
        if path:
            report_mod.check_writable(path)
    plan = runner.make_plan(runner.RunOptions(
        nproc=nproc, backend=backend, probes=tuple(probe), skip=tuple(skip),
        timeout=timeout, python=python, probe_paths=tuple(probe_path), model=model,
        master_port=master_port))
    with Progress(enabled=not quiet) as progress:
        report = runner.execute(plan, on_event=progress)
    _emit(report, fmt, json_path, junit_path)
    raise typer.Exit(int(runner.exit_code(report)))


@app.command()
def report(
    path: str = typer.Argument(..., metavar="FILE.json", help="A report saved with --json."),
    fmt: str = typer.Option("table", "--format", help="table, json or markdown."),
    junit_path: Optional[str] = typer.Option(None, "--junit", metavar="PATH",
                                             help="Also write JUnit XML here (atomically)."),
):
    """Render a saved JSON report again, without running anything."""
    from . import report as report_mod
    from . import runner

    _check_format(fmt)
    if junit_path:
        report_mod.check_writable(junit_path)
    saved = report_mod.load(path)
    _emit(saved, fmt, None, junit_path)
    raise typer.Exit(int(runner.exit_code(saved)))


@app.command()
def probes(
    probe_path: List[str] = typer.Option([], "--probe-path", metavar="FILE.py",
                                         help="Also list the probes in this file."),
):
    """List the probes, a line each."""
    from tabulate import tabulate

    from .catalog import all_probes

    rows = [(s.name, "built-in" if s.builtin else (s.path or s.module), s.summary)
            for s in all_probes(tuple(probe_path))]
    print(tabulate(rows, headers=["probe", "from", "what it proves"]))


def entry(argv=None):
    """Console-script entry: every error is one line, exit 2; never a traceback."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="envcheck", standalone_mode=False)
    except UsageError as exc:
        print("envcheck: error: %s" % exc, file=sys.stderr)
        sys.exit(ExitCode.USAGE)
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
        sys.exit(0)
    sys.exit(code or 0)

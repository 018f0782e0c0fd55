"""The options envcheck run shares with launcher mode (core/options.py): each parser is
built from the one declaration, so a flag means the same under torchrun as under
envcheck run, with the same metavar, default and help."""

import typer.main

from envcheck.cli import app
from envcheck.core import options
from envcheck.worker import launched


def _run_params():
    command = typer.main.get_command(app).commands["run"]
    return {p.name: p for p in command.params}


def _launcher_actions():
    return {a.dest: a for a in launched.parser()._actions}


def test_both_parsers_take_every_shared_option_as_declared():
    run, launcher = _run_params(), _launcher_actions()
    for o in options.SHARED:
        mine, theirs = run[o.dest], launcher[o.dest]
        assert tuple(sorted(mine.opts + mine.secondary_opts)) == tuple(sorted(o.flags)), o
        assert tuple(sorted(theirs.option_strings)) == tuple(sorted(o.flags)), o
        assert mine.help == o.help and theirs.help.replace("%%", "%") == o.help, o
        assert mine.hidden == o.advanced, o
        if o.kind != "flag":
            assert mine.metavar == theirs.metavar == o.metavar, o
        if o.kind == "list":
            assert theirs.default == [] and mine.multiple, o
        else:
            assert mine.default == theirs.default == o.default, o


def test_a_shared_option_parses_to_the_same_value_in_both():
    argv = ["-p", "launch", "-p", "collectives", "--skip", "hosts", "--timeout", "12.5",
            "--backend", "gloo", "--startup-timeout", "30", "--min-busbw", "40",
            "--json", "r.json", "--junit", "r.xml", "-v", "--probe-path", "mine.py"]
    args = launched.parse_args(argv)
    context = typer.main.get_command(app).commands["run"].make_context("run", list(argv))
    for o in options.SHARED:
        assert getattr(args, o.dest) == (list(context.params[o.dest]) if o.kind == "list"
                                         else context.params[o.dest]), o.dest


def test_a_backend_no_one_has_is_one_line_in_both():
    import pytest

    from envcheck import api
    from envcheck.core.errors import UsageError

    # envcheck run's plan refuses it before a rank starts (the CLI prints the one line).
    with pytest.raises(UsageError) as refused:
        api.plan(api.RunOptions(backend="mpi"))
    assert str(refused.value) == "--backend 'mpi': choose one of auto, gloo, nccl"
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "envcheck.worker.launched", "--backend",
                           "mpi"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "error: --backend 'mpi': choose one of auto, gloo, nccl")


def test_a_timeout_below_a_second_is_refused_alike_by_both():
    import subprocess
    import sys

    import pytest

    from envcheck import api
    from envcheck.core.errors import UsageError

    line = ("--timeout 0.5: must be at least 1 s (less is a hang before anything starts) "
            "and at most 86400 (a day)")
    with pytest.raises(UsageError) as refused:
        api.plan(api.RunOptions(timeout=0.5))
    assert str(refused.value) == line
    proc = subprocess.run([sys.executable, "-m", "envcheck.worker.launched", "--timeout",
                           "0.5"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("error: " + line)


def test_the_plan_a_rank_reads_is_checked_and_round_trips(tmp_path):
    import json

    import pytest

    from envcheck.core import plan
    from envcheck.probes.suite import SUITE

    data = plan.rank_plan("gloo", 60, [s.plan_entry() for s in SUITE], {"min_busbw": 40.0})
    path = tmp_path / "plan.json"
    plan.write(str(path), data)
    assert plan.read(str(path)) == data
    assert data["group_timeout"] == plan.group_timeout(60.0)
    for bad, words in (({"backend": "mpi"}, "backend 'mpi'"),
                       ({"timeout": "soon"}, "timeout 'soon'"),
                       ({"probes": [{"name": "x"}]}, "function is a name"),
                       ({"colour": "red"}, "no field colour")):
        path.write_text(json.dumps(dict(data, **bad)))
        with pytest.raises(ValueError, match=words):
            plan.read(str(path))

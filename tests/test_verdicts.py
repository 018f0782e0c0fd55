"""Verdicts: the xfail-like table, the JSON it leaves, exit codes and --strict.

The table itself is tested on CheckResults built here; the end-to-end part shares one
real `envcheck run` (gloo, 2 ranks) and re-judges its saved report with `envcheck
report --matrix DIR`, which is how a team's own expectations are applied.
"""

import json
import re
import textwrap
import uuid

import pytest
from packaging.version import Version

from conftest import checks_by_id, leftovers, load_report, run_cli, validate_report
from envcheck.core.outcomes import ExitCode
from envcheck.matrix import load as matrix_load, verdicts
from envcheck.matrix.values import Expectation, Target, Where
from envcheck.matrix.versions import parse_specifier
from envcheck.report.model import CheckResult, Report
from envcheck.run import runner

WHERE = Where("t.toml", "t.toml", "expectation", 1, 1)


def exp(outcome, message=None, torch=">=2.0"):
    import re
    outcome = (outcome,) if isinstance(outcome, str) else tuple(outcome)
    return Expectation(("p.c",), parse_specifier(torch), outcome, WHERE,
                       re.compile(message) if message else None, advice="do this",
                       source="s")


def result(outcome, message=None, error_type="TypeError"):
    error = {"type": error_type, "message": message} if message is not None else None
    return CheckResult("p", "c", outcome, detail=message or "", error=error)


PICKLE = "cannot pickle 'ProcessGroup' object"

# (outcome, message, expectations, verdict): the verdict table of shared/DESIGN.md
TABLE = [
    ("passed", None, [exp("passed")], "ok"),
    ("passed", None, [], "new"),
    ("passed", None, [exp("failed", "pickle")], "fixed"),
    ("failed", PICKLE, [exp("failed", "cannot pickle")], "known"),
    ("failed", PICKLE, [exp("failed")], "known"),  # no pattern: any failure
    ("failed", PICKLE, [exp("failed", "^TypeError: cannot pickle")], "known"),
    ("failed", "something else", [exp("failed", "cannot pickle")], "unexpected"),
    ("failed", PICKLE, [exp("passed")], "unexpected"),
    ("failed", PICKLE, [], "failure"),
    ("hang", None, [exp("failed")], "unexpected"),  # a hang is not the failure we know
    ("hang", None, [exp(["failed", "hang"])], "known"),
    ("crash", None, [exp("passed")], "unexpected"),
    ("crash", None, [], "failure"),
    ("skipped", None, [exp("failed")], None),
    ("skipped", None, [], None),
    # either outcome is fine (it depends on the user's model), a failure must match
    ("passed", None, [exp(["passed", "failed"], "pickle")], "ok"),
    ("failed", PICKLE, [exp(["passed", "failed"], "pickle")], "known"),
    ("failed", "other", [exp(["passed", "failed"], "pickle")], "unexpected"),
    # two entries apply: the one whose pattern matches wins
    ("failed", PICKLE, [exp("failed", "other"), exp("failed", "pickle")], "known"),
]


@pytest.mark.parametrize("outcome, message, expectations, verdict", TABLE)
def test_verdict_table(outcome, message, expectations, verdict):
    got, entry = verdicts.judge(result(outcome, message), expectations)
    assert (got.value if got else None) == verdict
    assert (entry is None) == (verdict in (None, "new", "failure"))


def test_pattern_is_searched_in_type_and_message():
    check = result("failed", "boom", error_type="RuntimeError")
    assert verdicts.error_text(check) == "RuntimeError: boom"
    assert verdicts.judge(check, [exp("failed", "^RuntimeError: b")])[0].value == "known"
    hang = CheckResult("p", "c", "hang", detail="no progress for 60.0 s in p.c")
    assert verdicts.judge(hang, [exp("hang", "no progress")])[0].value == "known"


def _report(checks, torch="2.1.2", cuda="12.1"):
    env = {"torch": torch, "cuda": cuda, "python": "3.11.7", "os": "Linux-6.1-x86_64"}
    return Report("0.1.0", "2026-11-21T00:00:00+00:00", {}, env,
                  [{"rank": 0, "host": "h", "backend": "gloo"}], checks, 1.0)


def test_apply_uses_the_environment_build_and_sets_the_entry():
    m = matrix_load.load()
    checks = [result("failed", "cannot pickle 'torch._C._distributed_c10d.ProcessGroup' "
                     "object") for _ in range(1)]
    checks[0].probe, checks[0].check = "serialization", "pickle_default_group"
    report = verdicts.apply(_report(checks), m)
    c = report.checks[0]
    assert c.verdict == "known"
    assert c.expectation["file"] == "expectations/serialization.toml"
    assert c.expectation["checks"][0] == "serialization.pickle_default_group"
    assert "keep it out of objects" in c.advice
    assert report.matrix["target"] == {"torch": "2.1.2", "variant": "cu121",
                                       "python": "3.11.7", "platform": "linux",
                                       "backend": "gloo", "model": False,
                                       "numpy": None}
    assert any(f["name"] == "releases.toml" for f in report.matrix["files"])


def test_no_torch_means_no_expectation_applies():
    m = matrix_load.load()
    report = verdicts.apply(_report([CheckResult("setup", "import_torch", "failed",
                                                 detail="ModuleNotFoundError")], torch=None), m)
    assert report.checks[0].verdict == "failure"
    assert report.matrix["target"] is None


@pytest.mark.parametrize("verdict, strict, code", [
    ("ok", False, ExitCode.OK), ("new", False, ExitCode.OK), ("fixed", False, ExitCode.OK),
    ("known", False, ExitCode.OK), ("known", True, ExitCode.FAILED),
    ("unexpected", False, ExitCode.FAILED), ("failure", False, ExitCode.FAILED),
    ("unsupported", False, ExitCode.FAILED),
])
def test_exit_code_from_verdicts(verdict, strict, code):
    c = CheckResult("p", "c", "passed" if verdict in ("ok", "new", "fixed") else "failed",
                    verdict=verdict)
    assert runner.exit_code(_report([c]), strict) == code


DATACLASS_311 = ("torch 1.13.1+cu117's DCP (torch.distributed._shard.checkpoint) exists but "
                 "does not import: ValueError: mutable default <class 'torch.distributed."
                 "_shard.sharding_spec.api.ShardingSpec'> for field sharding_spec is not "
                 "allowed: use default_factory")


def _one(probe, check, outcome, message, error_type, **env):
    c = CheckResult(probe, check, outcome, detail=message,
                    error={"type": error_type, "message": message})
    base = {"torch": "1.13.1+cu117", "cuda": "11.7", "python": "3.11.7",
            "os": "Linux-6.1-x86_64"}
    base.update(env)
    report = Report("0.1.0", "2026-11-23T00:00:00+00:00", {}, base,
                    [{"rank": 0, "host": "h", "backend": "gloo"}], [c], 1.0)
    return verdicts.apply(report, matrix_load.load())


def test_torch_1_13_dcp_on_python_3_11_is_unsupported_and_names_its_pythons():
    report = _one("checkpoint", "dcp_save_load", "failed", DATACLASS_311,
                  "envcheck.probes.shared.dcp.DcpBroken")
    c = report.checks[0]
    assert c.verdict == "unsupported"
    assert c.expectation["file"] == "expectations/compat.toml"
    assert c.expectation["unsupported"] is True
    assert c.advice.endswith("; torch 1.13 supports Python 3.7, 3.8, 3.9, 3.10 "
                             "(this is 3.11.7)")
    assert runner.exit_code(report, False) == ExitCode.FAILED
    # The same failure on a Python that torch 1.13 supports is no such combination.
    c = _one("checkpoint", "dcp_save_load", "failed", DATACLASS_311,
             "envcheck.probes.shared.dcp.DcpBroken", python="3.10.13").checks[0]
    assert c.verdict == "unexpected"  # the 1.13 entry observed on 3.10 expects another failure
    assert c.expectation["file"] == "expectations/checkpoint.toml"
    assert not c.expectation.get("unsupported")


def test_torch_built_for_numpy_1_with_numpy_2_is_unsupported():
    args = ("collectives", "all_gather_object", "failed", "Numpy is not available",
            "RuntimeError")
    c = _one(*args, torch="2.2.2", cuda="12.1", numpy="2.4.6").checks[0]
    assert c.verdict == "unsupported"
    assert c.advice.startswith("this torch was built against NumPy 1.x")
    assert "supports Python" not in c.advice  # about the NumPy, not the Python
    # numpy 1.x: the general entry (it must pass) judges, and this failure is unexpected.
    c = _one(*args, torch="2.2.2", cuda="12.1", numpy="1.26.4").checks[0]
    assert c.verdict == "unexpected"
    assert c.expectation["file"] == "expectations/baseline.toml"
    # torch 2.3 was built against NumPy 2: not an unsupported combination.
    c = _one(*args, torch="2.3.1", cuda="12.1", numpy="2.4.6").checks[0]
    assert c.verdict == "unexpected"


def _between_matrix(high_message="Boom", high_outcome="failed"):
    from envcheck.matrix.values import Matrix, Observation

    def entry(torch, outcome, message, seen, index):
        return Expectation(("p.c",), parse_specifier(torch), (outcome,),
                           Where("t.toml", "t.toml", "expectation", index, index),
                           re.compile(message) if message else None, advice="do this",
                           observed=(Observation(seen, "0.1.0", "2026-11-23"),))

    return Matrix((), (), (entry("<2.3", "failed", "Boom", "2.1.2", 1),
                           entry(">=2.5", high_outcome, high_message, "2.6.0", 2)), ())


@pytest.mark.parametrize("torch, high_message, high_outcome, verdict, between", [
    ("2.4.1", "Boom", "failed", "known", ["2.1", "2.6"]),  # both neighbours agree
    ("2.3.1", "Boom", "failed", "known", ["2.1", "2.6"]),
    ("2.4.1", "Other", "failed", "failure", None),  # they fail differently: no data
    ("2.4.1", None, "passed", "failure", None),  # they differ: no data
    ("2.7.0", "Boom", "failed", "known", None),  # in a range: judged by it
])
def test_a_release_between_two_agreeing_observations_is_judged_as_them(
        torch, high_message, high_outcome, verdict, between):
    c = CheckResult("p", "c", "failed", detail="Boom", error={"type": "RuntimeError",
                                                              "message": "Boom"})
    report = Report("0.1.0", "2026-11-23T00:00:00+00:00", {},
                    {"torch": torch, "python": "3.11.7", "os": "Linux-x"},
                    [{"rank": 0, "host": "h", "backend": "gloo"}], [c], 1.0)
    verdicts.apply(report, _between_matrix(high_message, high_outcome))
    assert report.checks[0].verdict == verdict
    assert (report.checks[0].expectation or {}).get("between") == between


def test_target_of_a_nightly_with_local_tag():
    t = Target.from_environment({"torch": "2.6.0.dev20241001+cu124", "cuda": "12.4",
                                 "python": "3.12.0", "os": "Linux-x"}, "nccl")
    assert t.torch == Version("2.6.0.dev20241001+cu124") and t.variant == "cu124"
    assert t.cuda == Version("12.4") and t.platform == "linux"


# ---- one real run, judged and re-judged ----------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("verdicts") / "report.json"
    res = run_cli("run", "-q", "-p", "collectives", "-p", "serialization",
                  "--json", str(out))
    return res, out


@pytest.mark.ranks
def test_run_judges_every_check(run):
    res, path = run
    assert res.code == 0, res.stderr  # known issues only: exit 0
    report = load_report(str(path))
    checks = checks_by_id(report)
    pickled = checks["serialization.pickle_default_group"]
    assert pickled["outcome"] == "failed" and pickled["verdict"] == "known"
    assert pickled["expectation"]["file"] == "expectations/serialization.toml"
    assert pickled["expectation"]["observed"][0]["evidence"].startswith("../evidence/")
    assert checks["collectives.all_reduce"]["verdict"] == "ok"
    assert all(c["verdict"] is None for c in report["checks"] if c["outcome"] == "skipped")
    assert {f["name"] for f in report["matrix"]["files"]} >= {
        "releases.toml", "cuda.toml", "expectations/serialization.toml"}
    # The screen names each known issue in a few words; -v has its advice and source.
    # the pitfall's line, wrapped at spaces wherever the screen's width falls
    assert ("! serialization.pickle_default_group, pickle_subgroup: a process group "
            "cannot be pickled or copied") in " ".join(res.stdout.split())
    assert "source: pytorch/pytorch issues #73825" not in res.stdout
    verbose = run_cli("report", "-v", str(path)).stdout
    assert "known issue" in verbose and "source: pytorch/pytorch issues #73825" in verbose


@pytest.mark.ranks
def test_strict_fails_on_known_issues(run):
    _, path = run
    res = run_cli("report", str(path), "--strict")
    assert res.code == 1, res.stderr
    # The last line says what the exit code means: known issues fail under --strict.
    last = res.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"nothing unexpected, (\d+) known issues \(failing under --strict\): "
                        r"\d+ passed, \1 known issues in \d+\.\d s", last), last
    assert re.fullmatch(r"✗ Not ready for distributed training: \d+ known issues \(failing "
                        r"under --strict\)", res.stdout.splitlines()[0])
    res = run_cli("report", str(path))
    assert res.code == 0, res.stderr
    # The verdict first, then the count, the known issues as what they are.
    assert re.fullmatch(r"nothing unexpected: \d+ passed, \d+ known issues in \d+\.\d s",
                        res.stdout.strip().splitlines()[-1])


def _matrix_dir(tmp_path, name, text):
    d = tmp_path / "team"
    f = d / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(textwrap.dedent(text))
    return str(d)


@pytest.mark.ranks
def test_a_different_failure_than_the_known_one_is_unexpected(run, tmp_path):
    _, path = run
    d = _matrix_dir(tmp_path, "expectations/serialization.toml", """\
        [[expectation]]
        check = "serialization.pickle_default_group"
        torch = ">=1.13"
        outcome = "failed"
        message = "RuntimeError: some other problem"
        advice = "x"
        source = "test"
    """)
    res = run_cli("report", str(path), "--matrix", d, "--format", "json")
    assert res.code == 1, res.stderr
    report = validate_report(json.loads(res.stdout))
    c = checks_by_id(report)["serialization.pickle_default_group"]
    assert c["verdict"] == "unexpected"
    assert c["expectation"]["message"] == "RuntimeError: some other problem"
    assert any(f["path"].endswith("serialization.toml") and not f["builtin"]
               for f in report["matrix"]["files"])


@pytest.mark.ranks
def test_expected_failure_that_passes_is_fixed(run, tmp_path):
    _, path = run
    d = _matrix_dir(tmp_path, "expectations/baseline.toml", """\
        [[expectation]]
        check = "collectives.barrier"
        torch = ">=1.13"
        outcome = "failed"
        advice = "x"
        source = "test"
    """)
    res = run_cli("report", str(path), "--matrix", d)
    assert res.code == 0, res.stderr
    assert "  ? collectives.barrier (fixed?)" in res.stdout
    res = run_cli("report", "-v", str(path), "--matrix", d)
    assert "fixed?" in res.stdout and "matrix may be stale" in res.stdout
    # the other baseline checks lost their expectation with the overridden file: "new",
    # the word the JSON uses too
    rows = {tuple(line.split()[:2]): line for line in res.stdout.splitlines()
            if line.startswith("collectives ")}
    assert rows[("collectives", "all_reduce")].split()[4] == "new"


@pytest.mark.ranks
def test_bad_team_matrix_stops_the_run_with_exit_2(tmp_path):
    # The matrix loads while the ranks import torch; a bad one must still end the run
    # with exit 2, no report, and no rank left behind.
    d = _matrix_dir(tmp_path, "x.toml", "[[expectation]]\ncheck = 'nope.nope'\n")
    marker = uuid.uuid4().hex
    res = run_cli("run", "-q", "-p", "collectives", "--matrix", d,
                  env={"ENVCHECK_TEST_MARKER": marker})
    assert res.code == 2
    assert "unknown probe 'nope'" in res.stderr and "import_torch" not in res.stdout
    assert leftovers(marker) == []


@pytest.mark.ranks
def test_report_keeps_saved_verdicts_and_judges_unjudged_ones(run, tmp_path):
    _, path = run
    data = json.loads(open(str(path)).read())
    for c in data["checks"]:
        if c["id"] == "serialization.pickle_default_group":
            c["verdict"] = "failure"  # as if judged by another matrix
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps(data))
    res = run_cli("report", str(kept), "--format", "json")
    assert res.code == 1
    assert checks_by_id(json.loads(res.stdout))[
        "serialization.pickle_default_group"]["verdict"] == "failure"
    data["matrix"] = None
    for c in data["checks"]:
        c["verdict"] = c["expectation"] = None
    never = tmp_path / "never.json"
    never.write_text(json.dumps(data))
    res = run_cli("report", str(never), "--format", "json")
    assert res.code == 0, res.stderr
    judged = json.loads(res.stdout)
    assert checks_by_id(judged)["serialization.pickle_default_group"]["verdict"] == "known"
    assert judged["matrix"]["files"]

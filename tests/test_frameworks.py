"""Advice in the words of the framework the ranks have installed.

The frameworks are seen as a user's venv shows them: a package directory and its
dist-info on the ranks' path. Each fake package raises on import: envcheck must find it
without importing it.
"""

import json

import pytest

from conftest import checks_by_id, run_cli, torch_only_python, validate_report


def fake_package(root, module, dist, version):
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(
        "raise ImportError('envcheck imported %s')\n" % module)
    info = root / ("%s-%s.dist-info" % (dist.replace("-", "_"), version))
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                                   % (dist, version))


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    fake_package(site, "lightning", "lightning", "2.5.1")
    fake_package(site, "deepspeed", "deepspeed", "0.16.4")
    # Ranks under an interpreter with torch only: the frameworks are the fakes alone,
    # whatever the test venv has (a developer's may have the real ones; CI keeps them in
    # a venv of their own). That venv is built once per machine, for other tests too.
    res = run_cli("run", "-p", "ddp-sync", "--format", "json", "-q",
                  "--python", torch_only_python(), env={"PYTHONPATH": str(site)})
    assert res.code == 0, res.stderr  # a known issue
    return validate_report(json.loads(res.stdout))


@pytest.mark.ranks
def test_installed_frameworks_are_found_without_importing_them(lightning_run):
    assert lightning_run["environment"]["frameworks"] == {"lightning": "2.5.1",
                                                          "deepspeed": "0.16.4"}


@pytest.mark.ranks
def test_known_issue_advice_names_the_frameworks_api(lightning_run):
    # Accelerate is not installed there: no line for it (nor without any framework, the
    # report of tests/test_vocabulary.py's run).
    check = checks_by_id(lightning_run)["ddp-sync.out_of_step"]
    assert check["verdict"] == "known"
    general, *framework = check["advice"].split("\n")
    assert "init_process_group" in general
    assert framework == [
        "with Lightning 2.5.1 (installed here): the strategy sets up the process group: "
        "pass the timeout to it, Trainer(strategy=DDPStrategy(timeout=timedelta(minutes=5))) "
        "or Fabric(strategy=DDPStrategy(timeout=timedelta(minutes=5))); call fabric.launch() "
        "once, first, not inside a class that only some ranks build",
        "with DeepSpeed 0.16.4 (installed here): call "
        "deepspeed.init_distributed(timeout=timedelta(minutes=5)) before "
        "deepspeed.initialize(), which otherwise sets up the process group with the "
        "default timeout"]


@pytest.mark.ranks
def test_the_screen_gives_each_advice_its_own_arrow(lightning_run, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(lightning_run))
    out = run_cli("report", "-v", str(path)).stdout
    assert "    → with Lightning 2.5.1 (installed here): the strategy sets up the" in out
    assert "    → with DeepSpeed 0.16.4 (installed here): call" in out
    md = run_cli("report", str(path), "--format", "markdown").stdout
    assert "  - → with Lightning 2.5.1 (installed here): the strategy" in md
    # Judged again, the advice is not added twice.
    (tmp_path / "matrix").mkdir()
    (tmp_path / "matrix" / "extra.toml").write_text('[about]\ncovers = "a re-judgement"\n')
    again = run_cli("report", str(path), "--format", "json", "--matrix",
                    str(tmp_path / "matrix"))
    assert again.code == 0, again.stderr
    advice = checks_by_id(json.loads(again.stdout))["ddp-sync.out_of_step"]["advice"]
    assert advice.count("with Lightning") == 1


@pytest.mark.parametrize("table, error", [
    ('{keras = "x", lightning = ""}', "framework_advice must be a table of non-empty strings"),
    ('{keras = "x"}', "framework_advice: unknown framework 'keras' (known: lightning, "
                      "accelerate, deepspeed)"),
])
def test_framework_advice_in_the_matrix_is_validated(tmp_path, table, error):
    (tmp_path / "mine.toml").write_text(
        '[[expectation]]\ncheck = "ddp-sync.mismatched_shapes"\ntorch = ">=1.13"\n'
        'outcome = "failed"\nadvice = "fix it"\nsource = "here"\n'
        'framework_advice = %s\n' % table)
    res = run_cli("matrix", "--validate", "--matrix", str(tmp_path))
    assert res.code == 2
    assert error in res.stderr

"""The serialization probe on the built-in toy model: one real 2-rank gloo run, shared."""

import pytest

from conftest import checks_by_id, load_report, run_cli

PICKLE_ERROR = "cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("ser") / "report.json"
    result = run_cli("run", "-p", "serialization", "--json", str(path), "-q", "-v")
    return result, checks_by_id(load_report(str(path)))


@pytest.mark.ranks
def test_every_check_is_reported_on_both_ranks(run):
    _, checks = run
    names = [c.split(".", 1)[1] for c in checks if c.startswith("serialization.")]
    assert names == ["pickle_default_group", "pickle_subgroup", "deepcopy_module_with_group",
                     "ddp_wrap", "deepcopy_ddp", "deepcopy_ddp_module",
                     "fresh_load_state_dict", "pickle_ddp", "save_module_with_group"]
    for name in names:
        assert set(checks["serialization." + name]["ranks"]) == {"0", "1"}
    assert "serialization.model" not in checks  # only with --model


@pytest.mark.ranks
@pytest.mark.parametrize("name", ["pickle_default_group", "pickle_subgroup",
                                  "deepcopy_module_with_group", "save_module_with_group"])
def test_process_groups_do_not_pickle_and_say_what_to_do(run, name):
    # torch 1.13 to 2.13 all refuse; the matrix, not the probe, calls this expected.
    check = run[1]["serialization." + name]
    assert check["outcome"] == "failed"
    assert check["error"]["type"] == "TypeError"
    assert PICKLE_ERROR in check["error"]["message"]
    assert "Traceback" in check["error"]["traceback"]
    assert check["advice"]


@pytest.mark.ranks
def test_deepcopy_advice_names_the_fix(run):
    advice = run[1]["serialization.deepcopy_module_with_group"]["advice"]
    assert "load_state_dict" in advice and "fresh" in advice
    assert "state_dict()" in run[1]["serialization.save_module_with_group"]["advice"]


@pytest.mark.ranks
@pytest.mark.parametrize("name", ["ddp_wrap", "deepcopy_ddp", "deepcopy_ddp_module",
                                  "fresh_load_state_dict", "pickle_ddp"])
def test_ddp_copies_work_and_match_the_original(run, name):
    check = run[1]["serialization." + name]
    assert check["outcome"] == "passed", check
    if name != "ddp_wrap":
        assert "equal" in check["detail"]
    if name in ("deepcopy_ddp", "deepcopy_ddp_module", "pickle_ddp"):
        assert "own memory" in check["detail"] and "same output" in check["detail"]


@pytest.mark.ranks
def test_fresh_copy_is_checked_against_the_deepcopy_on_every_rank(run):
    detail = run[1]["serialization.fresh_load_state_dict"]["detail"]
    assert "equals original and deepcopy on all 2 ranks" in detail


@pytest.mark.ranks
def test_failures_show_in_table_with_advice(run):
    result = run[0]
    # Process groups that do not pickle are known issues: nothing unexpected.
    assert result.code == 0, result.stderr
    assert "deepcopy_module_with_group" in result.stdout
    assert "load_state_dict" in result.stdout
    assert "Traceback" not in result.stderr

"""The fsdp probe and the follow-up phases it needs: real gloo runs, each shared by many
assertions.

- 2 ranks (the default): every check, the reshard phases at 3 and 1 ranks;
- 4 ranks: the 2-D (HSDP) mesh, reshard 4 -> 5 and 4 -> 1;
- 2 ranks with one rank's shard altered on disk after the save (a test probe,
  tests/data/probes/fsdp_faults.py): what the
  user sees when a checkpoint does not give back what was saved;
- 1 rank with a --model whose width depends on the world size (sharded per top-level
  child): the 2-rank load cannot fit the checkpoint, and the shrink phase cannot run;
- torchrun (launcher mode): the world size is fixed, the reshard checks say so.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import checks_by_id, launcher_env, load_report, run_cli

# Every test here starts real ranks; one worker under xdist (--dist loadgroup), and
# session-scoped runs, so that each envcheck run the tests share is made once (module-
# scoped, each worker made its own, and again after other modules' tests ran between).
pytestmark = [pytest.mark.ranks, pytest.mark.xdist_group("fsdp")]

# The fsdp probe's checks with a fault injected into what DCP saved (test probes).
FAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "probes",
                      "fsdp_faults.py")

WIDTH_MODEL = '''
import torch
import torch.distributed as dist


class Wide(torch.nn.Module):
    """A model whose width comes from the world size: a checkpoint saved by one job does
    not fit a job of another size."""

    def __init__(self):
        super().__init__()
        width = 4 * dist.get_world_size()
        self.encoder = torch.nn.Linear(6, width)
        self.decoder = torch.nn.Linear(width, 3)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))

    def example_inputs(self):
        return torch.ones(2, 6)


def build():
    torch.manual_seed(0)
    return Wide()
'''


def _run(tmp, *args, env=None, probe="fsdp"):
    report = tmp / "report.json"
    run_tmp = tmp / "tmp"
    run_tmp.mkdir()
    result = run_cli("run", "-p", probe, "--json", str(report), *args, timeout=400,
                     env=dict(env or {}, TMPDIR=str(run_tmp), COLUMNS="80"), cwd=str(tmp))
    assert report.exists(), result.stderr
    data = load_report(str(report))
    return result, data, checks_by_id(data), run_tmp


@pytest.fixture(scope="session")
def two(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fsdp2"))


@pytest.fixture(scope="session")
def four(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fsdp4"), "--nproc", "4")


@pytest.fixture(scope="session")
def altered(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fsdp_alter"), "--probe-path", FAULTS,
                probe="fsdp-altered")


@pytest.fixture(scope="session")
def lost(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fsdp_lost"), "--probe-path", FAULTS,
                probe="fsdp-lost")


@pytest.fixture(scope="session")
def wide(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fsdp_wide")
    (tmp / "wide.py").write_text(textwrap.dedent(WIDTH_MODEL))
    return _run(tmp, "--nproc", "1", "--model", "wide.py:build")


def test_two_ranks_pass_every_check_and_reshard_to_three_and_one(two):
    result, report, checks, run_tmp = two
    assert result.code == 0, result.stdout + result.stderr
    fsdp = [c["check"] for c in report["checks"] if c["probe"] == "fsdp"]
    assert fsdp == ["train_step", "deepcopy", "ema_copy", "gradient_divide", "save_load",
                    "subgroup", "hsdp", "cpu_offload", "reshard_grow", "train_state_grow",
                    "reshard_shrink", "train_state_shrink"]
    step = checks["fsdp.train_step"]
    assert step["outcome"] == "passed"
    data = step["ranks"]["0"]["data"]
    assert data["compared"] is True and data["forward_bit_exact"] is True
    assert data["sharded"] == "3 fsdp_units + root"
    assert data["api"].startswith("torch.distributed.fsdp.fully_shard")
    assert checks["fsdp.save_load"]["outcome"] == "passed"
    assert checks["fsdp.save_load"]["ranks"]["1"]["data"]["files"] == [
        ".metadata", "__0_0.distcp", "__1_0.distcp"]
    grow, shrink = checks["fsdp.reshard_grow"], checks["fsdp.reshard_shrink"]
    assert grow["outcome"] == "passed" and shrink["outcome"] == "passed"
    assert sorted(grow["ranks"]) == ["0", "1", "2"] and sorted(shrink["ranks"]) == ["0"]
    for rank in ("0", "1", "2"):
        assert grow["ranks"][rank]["data"]["saved_world_size"] == 2
        assert grow["ranks"][rank]["data"]["loaded_world_size"] == 3
    assert grow["ranks"]["0"]["data"]["rows_per_rank"] == [7, 7, 6]  # 20 rows, uneven
    assert shrink["ranks"]["0"]["data"]["saved_world_size"] == 2
    assert shrink["ranks"]["0"]["data"]["loaded_world_size"] == 1
    assert grow["detail"] == (
        "saved by 2 ranks, loaded by 3 (blocks.0.0.weight rows per rank: 7/7/6): 32 entries "
        "(model + AdamW state) bit-exact as full tensors on every rank; LayeredNet (3 blocks "
        "+ head), 3 fsdp_units + root")
    # The follow-ups are attempts of their own, at their own world sizes.
    assert [a.get("world_size") for a in report["attempts"]] == [None, 3, 1]
    # The hand-off directory went with the run.
    assert not [n for n in os.listdir(run_tmp) if n.startswith("envcheck")]


def test_subgroup_says_what_dcp_does_with_the_ranks_outside(two):
    check = two[2]["fsdp.subgroup"]
    assert check["outcome"] == "passed"
    data = check["ranks"]["0"]["data"]
    assert data["group_ranks"] == [0] and data["outside_ranks"] == [1]
    assert data["per_rank_entries_saved"] == ["rank0"]
    assert data["outsider_load"] == "ValueError: Invalid process group specified"
    assert check["detail"].endswith("dcp.load given the group on rank 1: ValueError: "
                                    "Invalid process group specified")


def test_below_four_ranks_hsdp_is_skipped_and_on_cpu_offload_is(two):
    checks = two[2]
    assert checks["fsdp.hsdp"]["outcome"] == "skipped"
    assert checks["fsdp.hsdp"]["detail"] == (
        "a 2-D (replicate x shard) mesh needs 4 or more ranks that factor into groups of 2 "
        "or more; 2 rank(s) do not")
    assert checks["fsdp.cpu_offload"]["detail"] == (
        "ranks run on CPU (backend gloo): there is nothing to offload; this runs on GPUs "
        "(NCCL)")


def test_four_ranks_round_trip_on_a_2d_mesh(four):
    result, report, checks, _ = four
    assert result.code == 0, result.stdout + result.stderr
    hsdp = checks["fsdp.hsdp"]
    assert hsdp["outcome"] == "passed"
    assert hsdp["ranks"]["3"]["data"]["mesh"] == [2, 2]
    assert hsdp["detail"].startswith("HSDP, 2 x 2 (replicate x shard) mesh: one AdamW step "
                                     "equals the unsharded step (")
    assert checks["fsdp.subgroup"]["ranks"]["0"]["data"]["group_ranks"] == [0, 1, 2]
    grow = checks["fsdp.reshard_grow"]["ranks"]["4"]["data"]
    assert (grow["saved_world_size"], grow["loaded_world_size"]) == (4, 5)
    assert grow["rows_per_rank"] == [4, 4, 4, 4, 4]
    shrink = checks["fsdp.reshard_shrink"]["ranks"]["0"]["data"]
    assert (shrink["saved_world_size"], shrink["loaded_world_size"]) == (4, 1)


def test_a_shard_altered_after_the_save_fails_the_round_trip_and_every_reshard(altered):
    result, report, checks, _ = altered
    assert result.code == 1
    rt = checks["fsdp-altered.save_load"]
    assert rt["outcome"] == "failed" and rt["root_rank"] == 1
    assert rt["ranks"]["0"]["outcome"] == "passed"  # rank 0's shards are its own file's
    assert rt["detail"] == ("rank 1: 1 of 32 entries differ after the DCP round trip on "
                            "rank 1: model.blocks.0.0.bias")
    assert rt["advice"].startswith("this checkpoint does not resume the training state")
    # Rank 1 failed its comparison but still took part in every collective after it.
    assert checks["fsdp-altered.subgroup"]["outcome"] == "passed"
    assert "fsdp-altered.run" not in checks
    for check, size in (("reshard_grow", 3), ("reshard_shrink", 1)):
        c = checks["fsdp-altered." + check]
        assert c["outcome"] == "failed"
        assert c["detail"] == ("1 of 32 entries differ when the 2-rank checkpoint is loaded "
                               "by %d rank(s): model.blocks.0.0.bias" % size)
        assert c["ranks"]["0"]["data"]["loaded_world_size"] == size
    assert "✗ fsdp-altered.save_load" in result.stdout
    assert "rank 1: 1 of 32 entries differ after the DCP round trip" in result.stdout


def test_a_subgroup_load_that_fails_on_the_group_only_is_a_failure_not_a_hang(lost):
    """The group's rank fails its dcp.load (its checkpoint lost its .metadata, as torch
    2.4.1's load fails on the group's ranks): the rank outside the group, which would wait
    for it in the probe's collectives, learns the error and fails at once."""
    result, report, checks, _ = lost
    assert result.code == 1
    # the main run and its two follow-up phases, none ended by a hang
    assert [a["abort"] for a in report["attempts"]] == [None, None, None]
    sub = checks["fsdp-lost.subgroup"]
    assert sub["outcome"] == "failed"
    assert sub["ranks"]["0"]["outcome"] == sub["ranks"]["1"]["outcome"] == "failed"
    assert sub["ranks"]["1"]["detail"].startswith(
        "the group's save and load failed on rank(s) 0: DcpFailed: dcp.load raised "
        "CheckpointException on 1 rank(s): rank 0: AssertionError: metadata is None")
    # the probe goes on with every rank
    assert checks["fsdp-lost.reshard_grow"]["outcome"] == "passed"


def test_a_model_that_does_not_fit_another_world_size_fails_its_reshard(wide):
    result, report, checks, _ = wide
    assert result.code == 1
    assert checks["fsdp.model"]["outcome"] == "passed"
    assert checks["fsdp.train_step"]["ranks"]["0"]["data"]["sharded"] == (
        "2 top-level children + root")
    assert checks["fsdp.save_load"]["outcome"] == "passed"
    assert checks["fsdp.subgroup"]["detail"] == (
        "needs 2 or more ranks: a strict subset of 1 rank is empty")
    grow = checks["fsdp.reshard_grow"]
    assert grow["outcome"] == "failed"
    assert grow["detail"] == (
        "dcp.load raised CheckpointException on 2 rank(s): ranks 0,1: ValueError: Size "
        "mismatch between saved torch.Size([4, 6]) and current: torch.Size([8, 6]) for "
        "model.encoder.weight")
    assert grow["advice"].startswith("the model built by 2 ranks has other shapes than the "
                                     "one saved by 1 rank: ")
    assert grow["ranks"]["1"]["data"] == {"saved_world_size": 1, "loaded_world_size": 2}
    shrink = checks["fsdp.reshard_shrink"]
    assert shrink["outcome"] == "skipped"
    assert shrink["detail"] == (
        "not run: the main run already has 1 rank(s); this follow-up loads at another "
        "world size (1), run with more ranks (--nproc 2)")
    assert [a.get("world_size") for a in report["attempts"]] == [None, 2]


def test_under_torchrun_the_reshard_checks_say_the_world_size_is_fixed(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "-m", "envcheck.worker.launched", "--out", str(tmp_path / "out"), "--json",
           str(tmp_path / "r.json"), "-p", "fsdp"]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=launcher_env(), capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = checks_by_id(load_report(str(tmp_path / "r.json")))
    assert checks["fsdp.save_load"]["outcome"] == "passed"
    # Each phase's checks: the reshard and, after it, the training state (its "also").
    for check in ("reshard_grow", "train_state_grow", "reshard_shrink", "train_state_shrink"):
        assert checks["fsdp." + check]["outcome"] == "skipped"
        assert checks["fsdp." + check]["detail"] == (
            "not run: under torchrun every rank belongs to the one job of 2 ranks; loading "
            "at another world size needs envcheck run, which starts ranks itself (envcheck "
            "run -p fsdp --nproc 2)")


# -- follow-up phases as a capability of the run model (any probe may declare them) ----

HANDOFF_PROBE = '''
import os

CHECKS = ("wrote", "read_back")
FOLLOW_UPS = ({"function": "read_it", "world_size": "N-1", "check": "read_back"},)


def probe_handoff(ctx):
    """writes its world size for a smaller job to read"""
    with ctx.check("wrote") as c:
        if ctx.rank == 0:
            with open(os.path.join(ctx.handoff, "n.txt"), "w") as f:
                f.write(str(ctx.world_size))
        c.detail = "rank %d of %d" % (ctx.rank, ctx.world_size)


def read_it(ctx):
    with ctx.check(ctx.phase["check"]) as c:
        with open(os.path.join(ctx.handoff, "n.txt")) as f:
            saved = int(f.read())
        c.data = {"saved": saved, "phase": ctx.phase}
        c.detail = "rank %d of %d read %d" % (ctx.rank, ctx.world_size, saved)
'''


def test_any_probe_may_declare_a_follow_up_at_another_world_size(tmp_path):
    probe = tmp_path / "handoff_probe.py"
    probe.write_text(HANDOFF_PROBE)
    report = tmp_path / "r.json"
    result = run_cli("run", "--probe-path", str(probe), "-p", "handoff", "--nproc", "3",
                     "--json", str(report), "-q", env={"TMPDIR": str(tmp_path)})
    assert result.code == 0, result.stdout + result.stderr
    data = load_report(str(report))
    assert [c["id"] for c in data["checks"] if c["probe"] == "handoff"] == [
        "handoff.wrote", "handoff.read_back"]
    read = checks_by_id(data)["handoff.read_back"]
    assert read["outcome"] == "passed" and sorted(read["ranks"]) == ["0", "1"]
    assert read["ranks"]["1"]["data"] == {
        "saved": 3, "phase": {"check": "read_back", "saved_world_size": 3, "world_size": 2}}
    assert data["plan"]["follow_ups"] == [
        {"probe": "handoff", "check": "read_back", "world_size": 2, "skip": None}]


@pytest.mark.parametrize("declaration, message", [
    ('({"function": "nope", "world_size": "N+1", "check": "a"},)',
     "follow-up function 'nope' is not defined in the file"),
    ('({"function": "f", "world_size": "M+1", "check": "a"},)',
     "world_size 'M+1': write a number of ranks (1), or N, N+K, N-K"),
    ('({"function": "f", "world_size": 2, "check": "b"},)',
     "follow-up check 'b' is not in CHECKS"),
    ('({"function": "f", "world_size": 2, "check": "a", "also": ("c",)},)',
     "follow-up check 'c' is not in CHECKS"),
    ('({"function": "f", "world_size": 2, "check": "a", "then": ("a",)},)',
     "a follow-up is a dict with function, world_size and check, and optionally also"),
])
def test_a_malformed_follow_up_is_one_line_and_exit_2(tmp_path, declaration, message):
    probe = tmp_path / "bad.py"
    probe.write_text('CHECKS = ("a",)\nFOLLOW_UPS = %s\n\n\ndef probe_bad(ctx):\n    pass\n'
                     '\n\ndef f(ctx):\n    pass\n' % declaration)
    result = run_cli("run", "--probe-path", str(probe), "-p", "bad")
    assert result.code == 2
    assert result.stderr.startswith("envcheck: error: --probe-path %s line 2: %s"
                                    % (probe, message)), result.stderr
    assert "Traceback" not in result.stderr


def test_the_plan_gives_each_follow_up_its_world_size_or_why_not():
    from envcheck.core import plan
    from envcheck.probes import catalog

    fsdp = [s for s in catalog.builtin_probes() if s.name == "fsdp"]
    sizes = lambda n, **kw: [(p["check"], p["world_size"], p["skip"])  # noqa: E731
                             for p in plan.follow_ups(fsdp, n, **kw)]
    assert sizes(2) == [("reshard_grow", 3, None), ("reshard_shrink", 1, None)]
    assert sizes(8, max_ranks=8) == [
        ("reshard_grow", 9, "not run: 9 ranks need 9 GPUs, this machine has 8; run with "
                            "fewer ranks (--nproc 7) to load at a larger world size"),
        ("reshard_shrink", 1, None)]
    entry = plan.follow_ups(fsdp, 2)[0]["entry"]
    assert entry["function"] == "resume_elsewhere" and entry["name"] == "fsdp"
    assert entry["phase"] == {"check": "reshard_grow", "saved_world_size": 2, "world_size": 3}


def test_fsdp_is_opt_in_and_listed_after_the_default_suite():
    from envcheck.probes import catalog

    specs = catalog.builtin_probes()
    names = [s.name for s in specs]
    assert names.index("fsdp") == len(catalog.select(specs))
    assert "fsdp" not in [s.name for s in catalog.select(specs)]
    assert [s.name for s in catalog.select(specs, ["fsdp"])] == ["fsdp"]


SLOW_FOLLOW_UP = '''
import os
import time

CHECKS = ("first", "later")
FOLLOW_UPS = ({"function": "wait", "world_size": 1, "check": "later"},)


def probe_slow(ctx):
    """hands on a file, then a 1-rank phase waits"""
    with ctx.check("first"):
        open(os.path.join(ctx.handoff, "x"), "w").close()


def wait(ctx):
    with ctx.check(ctx.phase["check"]):
        open(os.environ["MARK"], "w").close()
        time.sleep(60)
'''


def test_ctrl_c_during_a_follow_up_phase_ends_the_run_as_interrupted(tmp_path):
    import signal
    import time

    probe = tmp_path / "slow.py"
    probe.write_text(SLOW_FOLLOW_UP)
    mark, report, run_tmp = tmp_path / "mark", tmp_path / "r.json", tmp_path / "tmp"
    run_tmp.mkdir()
    env = dict(os.environ, MARK=str(mark), TMPDIR=str(run_tmp))
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "--probe-path",
                             str(probe), "-p", "slow", "--json", str(report), "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert mark.exists(), proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    data = load_report(str(report))
    assert data["interrupted"] == "SIGINT"
    checks = checks_by_id(data)
    assert checks["slow.first"]["outcome"] == "passed"
    assert checks["slow.later"]["outcome"] == "skipped"
    assert checks["slow.later"]["detail"] == "interrupted (SIGINT) while in later"
    assert not os.listdir(run_tmp)  # the hand-off and run directories went with it

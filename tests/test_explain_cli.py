"""envcheck explain on the command line: exit codes, text, JSON (validated against its
schema), stdin, several files, secrets, framework words, version judgements."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

SCHEMA = os.path.join(ROOT, "envcheck", "report", "schema", "explain.schema.json")
LOG = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-pickle-group.log")

# Real lines (tests/data/explain_corpus.toml has their sources).
WATCHDOG = ("[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, "
            "NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600030 "
            "milliseconds before timing out.\n")
LIGHTNING_FRAME = ('  File "/home/zeus/miniconda3/envs/cloudspace/lib/python3.10/site-packages/'
                   'lightning/pytorch/trainer/trainer.py", line 1382, in save_checkpoint\n')


def validate(data):
    import jsonschema

    with open(SCHEMA, encoding="utf-8") as f:
        jsonschema.validate(data, json.load(f))
    return data


def test_real_failure_exit_0_text_names_cause_ranks_line_fix_source():
    res = run_cli("explain", LOG)
    assert res.code == 0, res.stderr
    out = res.stdout
    assert out.startswith("envcheck explain: 1 cause found in %s (160 lines)" % LOG)
    assert "✗ something that holds a process group was pickled or deep-copied" in out
    assert "ranks 0–3 · 4 lines, first at %s:40" % LOG in out
    assert "> [default1]:[rank1]: TypeError: cannot pickle" in out
    assert "fix: do not deepcopy a model that stores a process group" in out
    assert "source: https://github.com/pytorch/pytorch/issues/73825" in out
    assert "launch.child_failed" in out  # a consequence, below


def test_json_matches_the_schema(tmp_path):
    res = run_cli("explain", "--format", "json", LOG)
    assert res.code == 0, res.stderr
    data = validate(json.loads(res.stdout))
    (finding,) = data["findings"]
    assert finding["id"] == "torch.pickle_process_group"
    assert finding["ranks"] == [0, 1, 2, 3]
    assert finding["line_number"] == 40 and finding["count"] == 4
    assert finding["sources"] and finding["advice"] and finding["cause"]
    assert [c["id"] for c in data["consequences"]] == ["launch.child_failed"]
    assert data["next_steps"] == []


def test_nothing_recognised_exit_1_says_what_to_collect(tmp_path):
    log = tmp_path / "quiet.log"
    log.write_text("step 1 loss 2.0\nstep 2 loss 1.9\nTerminated\n")
    res = run_cli("explain", str(log))
    assert res.code == 1, res.stderr
    assert "no known cause in %s (3 lines)" % log in res.stdout
    assert "NCCL_DEBUG=INFO" in res.stdout and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in res.stdout
    assert "envcheck run" in res.stdout
    data = validate(json.loads(run_cli("explain", "--format", "json", str(log)).stdout))
    assert data["findings"] == [] and len(data["next_steps"]) >= 3


def test_stdin_and_several_files_together(tmp_path):
    other = tmp_path / "node2.log"
    other.write_text(WATCHDOG)
    with open(LOG, "rb") as f:
        proc = subprocess.run([sys.executable, "-m", "envcheck", "explain", "-", str(other)],
                              stdin=f, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "in <stdin>, %s (161 lines)" % other in proc.stdout
    assert "first at <stdin>:40" in proc.stdout
    assert "nccl.watchdog_timeout; rank 0 · first at %s:1" % other in proc.stdout


@pytest.mark.parametrize("args,fragment", [
    (["explain", "/no/such/job.log"], "cannot read /no/such/job.log: No such file"),
    (["explain", "tests"], "tests is a directory"),
    (["explain", "--format", "yaml", "x.log"], "--format 'yaml': choose text or json"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    res = run_cli(*args)
    assert res.code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envcheck: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in res.stderr + res.stdout


def test_a_truncated_gzip_is_one_line_exit_2(tmp_path):
    import gzip

    whole = gzip.compress(b"RuntimeError: CUDA error: out of memory\n" * 100)
    log = tmp_path / "job.log.gz"
    log.write_bytes(whole[:len(whole) // 2])
    res = run_cli("explain", str(log))
    assert res.code == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("envcheck: error: cannot read %s: " % log)
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_secrets_in_the_log_never_reach_the_output(tmp_path):
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmN"
    log = tmp_path / "job.log"
    log.write_text("[rank0]: RuntimeError: CUDA error: no kernel image is available for "
                   "execution on the device (token=%s, https://user:s3cret@hub/x)\n" % token)
    for fmt in ("text", "json"):
        res = run_cli("explain", "--format", fmt, str(log))
        assert res.code == 0, res.stderr
        assert token not in res.stdout and "s3cret" not in res.stdout
        assert "<redacted>" in res.stdout


def test_framework_words_when_the_log_shows_the_framework(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(LIGHTNING_FRAME + WATCHDOG)
    res = run_cli("explain", str(log))
    assert res.code == 0, res.stderr
    assert ("with Lightning (seen in the log): the timeout belongs to the strategy: "
            "Trainer(strategy=DDPStrategy(timeout=timedelta(minutes=60)))") in res.stdout
    assert "framework seen in the log: Lightning" in res.stdout
    bare = tmp_path / "bare.log"
    bare.write_text(WATCHDOG)
    assert "with Lightning" not in run_cli("explain", str(bare)).stdout


def test_versions_in_the_log_are_judged_against_the_matrix(tmp_path):
    # collect_env's and nvidia-smi's lines (Fooocus#1313: driver 470.86, CUDA 11.4)
    log = tmp_path / "env.log"
    log.write_text("PyTorch version: 2.1.0+cu121\n"
                   "| NVIDIA-SMI 470.86       Driver Version: 470.86       CUDA Version: 11.4\n")
    res = run_cli("explain", "--format", "json", str(log))
    data = validate(json.loads(res.stdout))
    assert res.code == 0  # the matrix says this cannot work: a known cause
    assert data["findings"] == []
    facts = {(f["fact"], f["value"]) for f in data["facts"]}
    assert facts == {("torch", "2.1.0+cu121"), ("driver", "470.86"), ("driver_cuda", "11.4")}
    problems = [j for j in data["judgements"] if j["verdict"] == "problem"]
    assert problems == [{"fact": "driver", "verdict": "problem", "text":
                         "NVIDIA driver 470.86 is too old for CUDA 12.1 (torch's build): "
                         "CUDA 12 needs a driver >= 525.60.13 (cuda.toml)"}]


def test_help_shows_a_real_example():
    res = run_cli("explain", "--help")
    assert res.code == 0
    assert "envcheck explain job.log" in res.stdout
    assert "cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object" in res.stdout
    assert "Exit codes: 0" in res.stdout


def test_nccl_transports_from_nccl_debug_info_are_facts(tmp_path):
    # https://github.com/ai-dynamo/dynamo/issues/1408, https://github.com/NVIDIA/nccl/issues/1589,
    # https://github.com/open-mmlab/OpenPCDet/issues/1409
    log = tmp_path / "info.log"
    log.write_text(
        "ucwlai-k8snode-12-123:15016:15016 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"
        "g148:14937:69361 [0] NCCL INFO Channel 01/1 : 0[0] -> 8[0] [send] via NET/IB/9/GDRDMA/Shared\n"
        "AI-3090:1890568:1890933 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. "
        "You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.\n")
    data = validate(json.loads(run_cli("explain", "--format", "json", str(log)).stdout))
    transports = {(f["value"], tuple(f["hosts"])) for f in data["facts"]
                  if f["fact"] == "nccl_transport"}
    assert transports == {("P2P/IPC", ("ucwlai-k8snode-12-123",)), ("NET/IB", ("g148",)),
                          ("P2P is disabled", ("AI-3090",))}


def test_a_teams_signature_with_a_global_flag_still_matches(tmp_path):
    team = tmp_path / "team" / "signatures"
    team.mkdir(parents=True)
    (team / "ours.toml").write_text(
        '[[signature]]\nid = "team.flaky_fs"\ncause = "our shared filesystem dropped"\n'
        'match = ["(?i)Error: \\\\[Errno 116\\\\] stale file handle"]\nadvice = "remount /shared"\n'
        'source = "our runbook"\n')
    log = tmp_path / "job.log"
    log.write_text("[rank2]: OSError: [Errno 116] Stale file handle\n")
    res = run_cli("explain", "--matrix", str(tmp_path / "team"), str(log))
    assert res.code == 0, res.stderr
    assert "✗ our shared filesystem dropped" in res.stdout and "rank 2" in res.stdout


def test_json_on_stdout_escapes_del_and_c1_but_keeps_the_value(tmp_path):
    """docs/safety.md: what envcheck prints as JSON has DEL and the C1 controls escaped
    (a log's bytes, quoted), the same value for a JSON reader."""
    import json

    log = tmp_path / "job.log"
    log.write_text("[rank0]: RuntimeError: boom\x7f\x9b2J here\n"
                   "[rank0]: torch.distributed.DistBackendError: NCCL error in: x, "
                   "unhandled system error\n", encoding="utf-8")
    result = run_cli("explain", "--format", "json", str(log))
    assert "\x7f" not in result.stdout and "\x9b" not in result.stdout
    assert "\\u007f" in result.stdout
    data = json.loads(result.stdout)
    assert "\x7f" in json.dumps(data, ensure_ascii=False)  # the same value, read back


def test_a_long_source_shows_its_links_and_is_whole_with_v_and_in_json(tmp_path):
    # a real refusal (https://github.com/open-mmlab/OpenPCDet/issues/918, batch 13):
    # its signature's source is 1,500 characters, fifteen lines at 80 columns
    from envcheck.matrix import load

    sig = next(s for s in load.load().signatures if s.id == "launch.torchrun_option_unknown")
    assert len(sig.source) > 1000
    log = tmp_path / "job.log"
    log.write_text("launch.py: error: unrecognized arguments: --rdzv_endpoint=localhost:xxxxx\n")
    screen = run_cli("explain", str(log))
    assert screen.code == 0, screen.stderr
    (line,) = [ln for ln in screen.stdout.splitlines() if ln.startswith("  source: ")]
    assert line == ("  source: https://github.com/huggingface/pytorch-image-models/issues/1742"
                    " (in full: -v)")
    full = run_cli("explain", "-v", str(log))
    assert "  source: %s\n" % sig.source in full.stdout
    data = validate(json.loads(run_cli("explain", "--format", "json", str(log)).stdout))
    assert data["findings"][0]["sources"] == [sig.source]


def test_every_signature_s_screen_source_is_its_links_or_its_head():
    from envcheck.matrix import load
    from envcheck.render.explanation import LINKS, LINKS_SHOWN, source_line

    for sig in load.load().signatures:
        shown = source_line(sig.source)
        assert source_line(sig.source, verbose=True) == sig.source
        if len(sig.source) <= 160:
            assert shown == sig.source
            continue
        links = list(dict.fromkeys(LINKS.findall(sig.source)))
        assert shown.endswith(" (in full: -v)"), (sig.id, shown)
        if links:
            kept = shown[:-len(" (in full: -v)")].split("; ")
            more = ["%d more link%s" % (len(links) - LINKS_SHOWN,
                                        "" if len(links) == LINKS_SHOWN + 1 else "s")]
            assert kept == links[:LINKS_SHOWN] + (more if len(links) > LINKS_SHOWN else [])
            assert all(link in sig.source for link in links)  # never cut inside a link
        else:
            assert sig.source.startswith(shown[:-len(" (in full: -v)")])


def test_every_command_to_paste_in_a_fix_stays_on_one_line_at_80_columns():
    # python -c '...' split at a blank no longer pastes; before, 9 of the signatures'
    # fixes had one, and at 80 columns most were split (the code's blanks); nor does a
    # launcher split from its options (phase T's 'torchrun --nproc_per_node N' was)
    from envcheck.matrix import load
    from envcheck.render.explanation import COMMAND, _fit

    commands, launchers = 0, 0
    for sig in load.load().signatures:
        for text in [sig.advice] + [v for _, v in sig.framework_advice]:
            wanted = [m.group(0) for m in COMMAND.finditer(text)]
            for width in (60, 80, 100):
                lines = _fit(["  fix: " + text], width)
                assert " ".join(" ".join(lines).split()) == " ".join(("fix: " + text).split())
                for command in wanted:
                    assert any(command in line for line in lines), (sig.id, command, lines)
            commands += len(wanted)
            launchers += sum(not c.startswith("python") for c in wanted)
    assert commands >= 9 + 10 and launchers >= 10, (commands, launchers)


@pytest.mark.parametrize("text, command", [
    ("start torchrun --nproc_per_node N, N the shards", "torchrun --nproc_per_node N"),
    ("run torchrun --nproc-per-node=8 train.py", "torchrun --nproc-per-node=8"),
    ("use srun --label (each line its rank)", "srun --label"),
    ("accelerate launch --main_process_port 0 train.py", "accelerate launch --main_process_port 0"),
    ("torchrun --standalone --nnodes=1 --nproc-per-node=4 x.py",
     "torchrun --standalone --nnodes=1 --nproc-per-node=4"),
])
def test_a_launcher_is_kept_with_its_options_not_the_prose_after_them(text, command):
    from envcheck.render.explanation import COMMAND

    assert COMMAND.search(text).group(0) == command


def test_collect_next_does_not_ask_for_the_nccl_info_the_log_holds(tmp_path):
    """The H100 run's healthy NCCL_DEBUG=INFO log (no cause in it) was told to rerun with
    NCCL_DEBUG=INFO. Where the log holds NCCL's INFO lines, the first step says what they
    do not show; a log without them keeps the step that asks for them."""
    log = tmp_path / "info.log"
    shutil.copy(os.path.join(ROOT, "tests", "data", "gpu", "h100_healthy_nccl_info.txt"), log)
    steps = json.loads(run_cli("explain", str(log), "--format", "json").stdout)["next_steps"]
    assert steps[0].startswith("the log holds NCCL's INFO lines already"), steps
    assert not any("rerun with NCCL_DEBUG=INFO" in s for s in steps), steps
    plain = tmp_path / "plain.log"
    plain.write_text("step 1 loss 2.3\nstep 2 loss 2.1\n")
    steps = json.loads(run_cli("explain", str(plain), "--format", "json").stdout)["next_steps"]
    assert steps[0].startswith("rerun with NCCL_DEBUG=INFO"), steps

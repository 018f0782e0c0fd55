"""`envcheck check`: pre-install answers from the matrix, without torch and fast.

Every case gives --driver/--gpu (or a fake nvidia-smi on PATH), so the answers do not
depend on the machine running the tests; Python is fixed with --python-version.
"""

import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, run_cli
from envcheck.matrix.load import load
from envcheck.preinstall import evaluate as precheck, pins as torch_pin
from envcheck.preinstall.node import Node, NodeGpu

A100 = ("--gpu", "sm_80")
PY311 = ("--python-version", "3.11")


def check(*args, env=None):
    return run_cli("check", *args, env=env)


def test_driver_below_the_variant_floor():
    res = check("torch==2.4.1+cu124", "--driver", "470.82.01", *A100, *PY311)
    assert res.code == 1, res.stderr
    assert "cu124 needs driver ≥ 525.60.13 (CUDA 12.x minor-version compatibility), " \
           "found 470.82.01" in " ".join(res.stdout.split())
    assert "will not work here: driver" in res.stdout
    # the same release built for CUDA 11.8 needs only 450.80.02
    assert "2.4.1+cu118" in res.stdout
    assert "pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu118" \
        in res.stdout


def test_plain_version_is_the_default_pypi_build():
    res = check("torch==2.4.1", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stdout + res.stderr
    assert "2.4.1+cu121 on this node" in res.stdout
    assert "will work here: pip install torch==2.4.1\n" in res.stdout


def test_cuda_option_picks_the_variant():
    res = check("torch==2.4.1", "--cuda", "12.4", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stderr
    assert "2.4.1+cu124 on this node" in res.stdout
    assert "--index-url https://download.pytorch.org/whl/cu124" in res.stdout


def test_full_driver_below_toolkit_but_above_floor_is_minor_version_compat():
    res = check("torch==2.4.1+cu124", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0
    assert "runs under minor-version compatibility" in res.stdout


def test_gpu_arch_not_compiled_in():
    res = check("torch==2.6.0", "--driver", "560.35.03", "--gpu", "sm_100", *PY311)
    assert res.code == 1
    text = " ".join(res.stdout.split())
    assert "sm_100 (GPU 0) is not in 2.6.0+cu124's arch list and no PTX reaches it" in text
    assert "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in text


def test_gpu_arch_by_binary_compatibility_and_by_ptx():
    res = check("torch==2.6.0", "--driver", "560.35.03", "--gpu", "sm_89", *PY311)
    assert res.code == 0, res.stdout
    assert "sm_89 (GPU 0) runs the sm_86 code (same-major binary compatibility)" \
        in " ".join(res.stdout.split())
    # No GPU has sm_130 yet (the CLI refuses it: test_bad_input_is_one_line_exit_2); the
    # PTX it would JIT from is judged all the same for a node that has one.
    m = load()
    release, build, _ = precheck.resolve(m, torch_pin.parse("torch==2.10.0+cu130"))
    future = Node("3.11", "3.11", "Linux", "x86_64", "2.36", "580.82.07",
                  (NodeGpu(0, "x", "sm_130"),))
    arch = [c for c in precheck.evaluate(m, release, build, future).criteria
            if c.id == "gpu"][0]
    assert arch.status == "ok"
    assert "reachable only by PTX JIT from compute_120" in arch.message


def test_python_without_a_wheel():
    res = check("torch==2.4.1", "--driver", "535.104.05", *A100, "--python-version", "3.13")
    assert res.code == 1
    assert "torch 2.4.1 has wheels for Python 3.8, 3.9, 3.10, 3.11, 3.12; this node runs " \
           "3.13" in " ".join(res.stdout.split())
    # and which releases do have a cp313 wheel (PyPI: from 2.5 on)
    assert "Python 3.13 has torch wheels in releases 2.5–2.15: envcheck check " \
           "'torch==2.15.*' to ask about the newest" in res.stdout
    res = check("torch==2.15.0", "--driver", "580.95.05", *A100, "--python-version", "3.10")
    assert res.code == 1  # 2.15 dropped Python 3.10 (requires_python >= 3.11)
    assert "Python 3.10 has torch wheels in releases 1.13–2.14" in res.stdout


def test_variant_that_does_not_exist_for_that_release():
    res = check("torch==2.4.1+cu126", "--driver", "560.35.03", *A100, *PY311)
    assert res.code == 1
    assert "torch 2.4.1 has no cu126 build (the matrix knows cu118, cu121, cu124, cpu)" \
        in " ".join(res.stdout.split())


def test_known_issues_are_listed_but_do_not_fail():
    res = check("torch==2.1.2", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0
    assert "known to fail with 2.1.2+cu121" in res.stdout
    # A line each, saying what the code must avoid and what to do instead; -v has the
    # whole advice and its source.
    assert ("  ! serialization.deepcopy_module_with_group: do not deepcopy a model that "
            "stores a process group (the EMA-by-deepcopy pattern): build the EMA model fresh "
            "and copy the weights, or look the group up at call time instead of storing it "
            "on the module\n") in res.stdout
    assert "source: hpcaitech/Open-Sora#49" not in res.stdout
    verbose = check("torch==2.1.2", "--driver", "535.104.05", *A100, *PY311, "-v")
    assert verbose.code == 0 and "source: hpcaitech/Open-Sora#49" in verbose.stdout


def test_glibc_floor():
    m = load()
    release, build, _ = precheck.resolve(m, torch_pin
                                         .parse("torch==2.7.1"))
    old = Node("3.11", "3.11", "Linux", "x86_64", "2.17", "560.35.03",
               (NodeGpu(0, "A100", "sm_80"),))
    answer = precheck.evaluate(m, release, build, old)
    glibc = [c for c in answer.criteria if c.id == "glibc"][0]
    assert glibc.status == "fail" and glibc.message == (
        "needs glibc ≥ 2.28 (manylinux_2_28 wheel), found 2.17: pip finds no wheel for this "
        "node")
    assert glibc.source.startswith("PEP 600 (peps.python.org/pep-0600)")
    musl = Node("3.11", "3.11", "Linux", "x86_64", None, None, ())
    answer = precheck.evaluate(m, release, build, musl)
    assert [c.status for c in answer.criteria if c.id == "glibc"] == ["fail"]


@pytest.mark.parametrize("sm, archs, ptx, how", [
    ("sm_80", ("sm_80",), (), ("compiled", "sm_80")),
    ("sm_61", ("sm_50", "sm_60"), (), ("binary", "sm_60")),
    ("sm_90", ("sm_80", "sm_86"), (), (None, None)),
    ("sm_90", ("sm_80",), ("compute_80",), ("ptx", "compute_80")),
    ("sm_120", ("sm_100",), (), (None, None)),
    ("sm_103", ("sm_100", "sm_120"), (), ("binary", "sm_100")),
    ("sm_90", ("sm_90a",), (), (None, None)),
])
def test_reach(sm, archs, ptx, how):
    assert precheck.reach(sm, archs, ptx) == how


# ---- bad input: one line, exit 2 ------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (("torch==",), "is not a requirement"),
    (('torch==2.4.1; python_version <<< "3"',), "is not a requirement: Expected a marker"),
    (("numpy==1.26",), "names numpy, not torch"),
    (("torch==2.4.7",), "of the 2.4 series it knows 2.4.0, 2.4.1"),
    (("torch==3.0.0",), "which knows releases 1.13 … 2.15"),
    (("torch==2.4.1+cu121", "--cuda", "12.4"), "--cuda 12.4 means cu124"),
    (("torch==2.4.1", "--cuda", "twelve"), "--cuda: CUDA 'twelve'"),
    (("torch==2.4.1", "--driver", "five"), "--driver 'five': give an NVIDIA Linux driver "
                                           "version like 535.104.05"),
    # what exists: a driver branch, a compute capability, a Python, an index URL
    (("torch==2.4.1", "--driver", "99999"),
     "--driver '99999': no NVIDIA driver branch R99999; give an NVIDIA Linux driver "
     "version like 535.104.05: a branch from R100 to R616 (CUDA 13.4's, the newest the "
     "matrix knows)"),
    (("torch==2.4.1", "--driver", "535.104.05.1"), "have at most three parts"),
    (("torch==2.4.1", "--gpu", "sm_999", "--driver", "535.104.05"),
     "--gpu 'sm_999': no NVIDIA GPU has compute capability 99.9; give one of sm_30 sm_32 "
     "sm_35 sm_37 sm_50"),
    (("torch==2.4.1", "--gpu", "sm_130", "--driver", "590.48.01"), "compute capability 13.0"),
    (("torch==2.4.1", "--python-version", "3.99"),
     "--python-version '3.99': no torch release (1.13 to 2.15) has wheels for Python 3.99; "
     "give one of 3.7 3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.15 3.13t 3.14t 3.15t"),
    (("torch==2.4.1", "--python-version", "3.12t"), "has wheels for Python 3.12t"),
    (("torch==2.4.1", "--index-url", "notaurl"),
     "--index-url 'notaurl' is not an index URL: give one like "
     "https://download.pytorch.org/whl/cu126"),
    (("torch==2.4.1", "--extra-index-url", "download.pytorch.org/whl/cu121"),
     "--extra-index-url 'download.pytorch.org/whl/cu121' is not an index URL"),
    (("torch==2.4.1", "--gpu", "ampere", "--driver", "535.1"), "--gpu 'ampere'"),
    (("torch==2.4.1", "--python-version", "three"), "--python-version"),
    ((), "say what to check"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    res = check(*args)
    assert res.code == 2, res
    assert fragment in res.stderr
    assert res.stderr.startswith("envcheck: error: ") and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("args,code", [
    (("--gpu", "sm_90a"), 0), (("--gpu", "9.0"), 0), (("--gpu", "NVIDIA H100 80GB HBM3"), 0),
    (("--gpu", "sm_121"), 0),
    # no wheel of 2.13.0 for these Pythons, and a driver too old for its CUDA builds: an
    # answer (will not work), not bad input
    (("--python-version", "3.13t"), 1), (("--python-version", "3.7"), 1),
    (("--driver", "616.00"), 0), (("--driver", "390.10"), 1), (("--driver", "570"), 1),
])
def test_what_exists_is_taken(args, code):
    plan = {"--gpu": A100, "--python-version": PY311, "--driver": ("--driver", "580.82.07")}
    plan[args[0]] = args
    res = check("torch==2.13.0", *(a for pair in plan.values() for a in pair))
    assert res.code == code, res.stdout + res.stderr
    assert res.stderr == ""


def test_a_bare_torch_resolves_as_pip_would_with_a_note_to_pin_it(tmp_path):
    node = ("--driver", "590.48.01", "--gpu", "sm_90", *PY311)
    bare, ranged = check("torch", *node), check("torch>=0", *node)
    assert bare.code == 0, bare.stderr
    assert bare.stdout.splitlines()[2] == "2.15.0+cu132 on this node:"
    assert "note: torch pins no version: after the next torch release, or on another " \
           "node, pip installs another build; pin it (torch==2.15.0)" \
        in " ".join(bare.stdout.split())
    assert "pins no version" not in ranged.stdout
    criteria = [line for line in bare.stdout.splitlines() if line.startswith("  ")]
    assert criteria == [line for line in ranged.stdout.splitlines() if line.startswith("  ")]
    req = tmp_path / "requirements.txt"
    req.write_text("numpy\ntorch\n")
    res = check("-r", str(req), "--python-version", "3.9", "--driver", "590.48.01",
                "--gpu", "sm_90")
    assert res.code == 0, res.stderr
    assert res.stdout.splitlines()[2] == "2.8.0+cu128 on this node:"
    assert "pin it (torch==2.8.0)" in res.stdout


def test_unknown_version_says_how_to_add_it():
    res = check("torch==2.16.0")
    assert "add a [[release]] entry for 2.16" in res.stderr
    assert "docs/matrix.md" in res.stderr


def test_nightly_is_judged_by_its_release():
    res = check("torch==2.6.0.dev20241001", "--driver", "560.35.03", *A100, *PY311)
    assert res.code == 0, res.stderr
    assert "2.6.0.dev20241001 is a pre-release: judged by the facts of the 2.6.0 release" \
        in " ".join(res.stdout.split())


def test_range_resolves_to_newest_known_release():
    res = check("torch>=2.1,<2.5", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stderr
    assert "resolves to 2.4.1" in res.stdout


# ---- requirements files ---------------------------------------------------------------

def test_requirements_file_with_index_url(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text(textwrap.dedent("""\
        # training deps
        --extra-index-url https://download.pytorch.org/whl/cu118
        numpy>=1.24
        torch==2.4.1  # pinned for the cluster
        torchvision==0.19.1
    """))
    res = check("-r", str(req), "--driver", "470.82.01", *A100, *PY311)
    assert res.code == 0, res.stdout + res.stderr
    assert "2.4.1+cu118 on this node" in res.stdout
    assert "requirements.txt:4: torch==2.4.1" in res.stdout


def test_requirements_file_follows_includes_and_markers(tmp_path):
    (tmp_path / "base.txt").write_text(
        "torch==2.1.2; python_version < '3.0'\ntorch==2.5.1+cu121 ; sys_platform != 'nt'\n")
    req = tmp_path / "requirements.txt"
    req.write_text("-r base.txt\nrequests\n")
    res = check("-r", str(req), "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stderr
    assert "2.5.1+cu121 on this node" in res.stdout


@pytest.mark.parametrize("python, build", [("3.11", "2.4.1+cu121"), ("3.13", "2.5.1+cu124")])
def test_markers_are_evaluated_for_the_node_not_for_envcheck(tmp_path, python, build):
    req = tmp_path / "requirements.txt"
    req.write_text('torch==2.4.1; python_version < "3.13"\n'
                   'torch==2.5.1; python_version >= "3.13"\n')
    res = check("-r", str(req), "--driver", "535.104.05", *A100, "--python-version", python)
    assert res.code == 0, res.stdout + res.stderr
    assert "%s on this node:" % build in res.stdout


def test_a_requirement_whose_marker_is_false_on_the_node_is_one_line_exit_2():
    pin = 'torch==2.4.1; python_version < "3.12"'
    res = check(pin, "--driver", "535.104.05", *A100, "--python-version", "3.12")
    assert res.code == 2 and "its marker is false on this node (Python 3.12" in res.stderr
    res = check(pin, "--driver", "535.104.05", *A100, "--python-version", "3.11")
    assert res.code == 0, res.stdout + res.stderr


def test_range_across_the_glibc_boundary_answers_for_what_pip_installs():
    res = check("torch>=2.4", "--glibc", "2.17", "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert "2.6.0+cu124 on this node:" in text
    assert "note: 2.7.0–2.15.0 (13 versions) skipped: their wheels need glibc ≥ 2.28 " \
           "(manylinux_2_28), this node has 2.17" in text
    assert "will work here: pip install torch==2.6.0" in text


def test_free_threaded_node_gets_the_patch_that_has_its_wheel():
    res = check("torch>=2.12,<2.13", "--driver", "580.95.05", "--gpu", "sm_90",
                "--python-version", "3.13t")
    assert res.code == 0, res.stdout + res.stderr
    assert "2.12.0+cu130 on this node:" in res.stdout
    assert "2.12.1 skipped: no wheel for Python 3.13t" in " ".join(res.stdout.split())
    # the exact pin pip cannot install there is a "no", with the wheel list's source
    res = check("torch==2.12.1", "--driver", "580.95.05", "--gpu", "sm_90",
                "--python-version", "3.13t", "--format", "json")
    assert res.code == 1
    wheel = json.loads(res.stdout)["answer"]["criteria"][0]
    assert wheel["status"] == "fail" and "flash-attention-prebuild-wheels" in wheel["source"]
    res = check("--suggest", "--driver", "580.95.05", "--gpu", "sm_90",
                "--python-version", "3.13t")
    first = res.stdout.split("will work here:")[1].split()
    assert first[:4] == ["2.12.0+cu130", "pip", "install", "torch==2.12.0"]


def test_index_url_options_choose_the_variant():
    args = ("--driver", "470.82.01", *A100, *PY311)
    res = check("torch<2.5", "--index-url", "https://download.pytorch.org/whl/cu118", *args)
    assert res.code == 0, res.stdout + res.stderr
    assert "2.4.1+cu118 on this node:" in res.stdout
    # any other index is PyPI or a mirror of it
    res = check("torch==2.4.1", "-i", "https://pypi.example.org/simple", *args)
    assert res.code == 1 and "2.4.1+cu121 on this node:" in res.stdout, res.stderr
    # an extra index only adds versions: PyPI's 2.15.0 outranks cu118's 2.7.1+cu118
    res = check("torch>=2.0", "--extra-index-url", "https://download.pytorch.org/whl/cu118",
                *args)
    assert res.code == 1
    assert "2.15.0+cu132 on this node:" in res.stdout
    assert "the cu118 index's best, 2.7.1+cu118, loses to 2.15.0" in " ".join(
        res.stdout.split())


def test_nested_includes_constraints_and_a_cycle(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "requirements.txt").write_text(
        "--index-url https://download.pytorch.org/whl/cu118\n-r sub/base.txt\n"
        "-c constraints.txt\n")
    (tmp_path / "sub" / "base.txt").write_text("-r torch.txt\n-r ../requirements.txt\n")
    (tmp_path / "sub" / "torch.txt").write_text("torch>=2.0\n")
    (tmp_path / "constraints.txt").write_text("-c more.txt\n")
    (tmp_path / "more.txt").write_text("torch<2.5  # the cluster's CUDA 11.8 stack\n")
    res = check("-r", str(tmp_path / "requirements.txt"), "--driver", "470.82.01", *A100,
                *PY311)
    assert res.code == 0, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert "2.4.1+cu118 on this node:" in text
    assert "constrained by %s:1: torch<2.5" % (tmp_path / "more.txt") in text


def test_deep_include_chain_is_one_line_exit_2(tmp_path):
    for i in range(2000):
        (tmp_path / ("r%d.txt" % i)).write_text("-r r%d.txt\n" % (i + 1))
    (tmp_path / "r2000.txt").write_text("torch==2.4.1\n")
    res = check("-r", str(tmp_path / "r0.txt"), "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 2
    assert res.stderr.startswith("envcheck: error: ") and "Traceback" not in res.stderr
    assert "nests requirements files more than 32 deep" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_thousands_of_includes_side_by_side(tmp_path):
    lines = ["-r part%d.txt" % i for i in range(3000)]
    for i in range(3000):
        (tmp_path / ("part%d.txt" % i)).write_text("requests\n-r requirements.txt\n")
    (tmp_path / "part2999.txt").write_text("torch==2.4.1\n")
    (tmp_path / "requirements.txt").write_text("\n".join(lines) + "\n")
    res = check("-r", str(tmp_path / "requirements.txt"), "--driver", "535.104.05", *A100,
                *PY311)
    assert res.code == 0, res.stdout + res.stderr
    assert "2.4.1+cu121 on this node:" in res.stdout


@pytest.mark.parametrize("driver, code", [("570.86.15", 1), ("570.133.20", 0),
                                          ("575.51.03", 0)])
def test_hgx_b200_needs_its_own_floor_inside_r570(driver, code):
    res = check("torch==2.8.0", "--driver", driver, "--gpu", "NVIDIA B200", *PY311)
    assert res.code == code, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    if code:
        assert "HGX B200 (GPU 0) needs driver ≥ 570.133.20 (a floor NVIDIA documents for " \
               "this product, inside R570), found %s" % driver in text
        assert "source: NVIDIA GPU Operator documentation" in text
    # a GB200 is another product, on a Grace (aarch64) node: the HGX B200 floor does not
    # apply, and the matrix cannot judge an aarch64 wheel (never "will work")
    res = check("torch==2.8.0", "--driver", driver, "--gpu", "NVIDIA GB200", *PY311)
    assert res.code == 3 and "HGX B200" not in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("text, fragment", [
    ("numpy\n", "no torch requirement in it"),
    ("torch==2.4.1\ntorch==2.5.1\n", "torch is required more than once"),
    ("torch=2.4.1\n", "is not a requirement"),
    ("--index-url https://download.pytorch.org/whl/cu121\ntorch==2.4.1+cu124\n",
     "asks for +cu124 but the file's index URL serves cu121"),
    ("--index-url notaurl\ntorch==2.4.1\n", "requirements.txt:1: --index-url 'notaurl' is "
                                            "not an index URL"),
])
def test_bad_requirements_files(tmp_path, text, fragment):
    req = tmp_path / "requirements.txt"
    req.write_text(text)
    res = check("-r", str(req))
    assert res.code == 2
    assert fragment in res.stderr


def test_missing_requirements_file(tmp_path):
    res = check("-r", str(tmp_path / "nope.txt"))
    assert res.code == 2 and "no such file" in res.stderr


# ---- --suggest and --json -------------------------------------------------------------

def test_suggest_on_an_old_driver_finds_the_cuda_11_builds():
    res = check("--suggest", "--driver", "470.82.01", *A100, *PY311)
    assert res.code == 0, res.stderr
    lines = res.stdout.split("Newest torch builds that will work here:")[1].splitlines()
    first = [line for line in lines if line.strip()][0]
    assert first.split()[0] == "2.7.1+cu118"
    assert "pip install torch==2.7.1 --index-url https://download.pytorch.org/whl/cu118" in first
    # [9 known issues] beside [8]: which check makes the difference, and where its fix is
    assert res.stdout.endswith(
        "\nWhy the known issues differ (each has its fix: envcheck check torch==VERSION -v):"
        "\n  2.6.0+cu118: checkpoint.default_load, which 2.5.1+cu118 does not have\n")


def test_suggest_on_a_new_node_is_the_plain_pypi_install():
    res = check("--suggest", "--driver", "590.48.01", "--gpu", "sm_90", *PY311)
    assert res.code == 0
    lines = res.stdout.split("Newest torch builds that will work here:")[1].splitlines()
    first = [line for line in lines if line.strip()][0]
    assert first.split()[:4] == ["2.15.0+cu132", "pip", "install", "torch==2.15.0"]


def test_suggest_when_nothing_works():
    res = check("--suggest", "--driver", "390.10", "--gpu", "sm_35", *PY311)
    assert res.code == 1
    assert "No torch build in the matrix will work here." in res.stdout


def test_json_answer():
    res = check("torch==2.4.1+cu124", "--driver", "470.82.01", *A100, *PY311, "--format",
                "json", "--suggest", env={"ENVCHECK_HOST": "node17"})
    assert res.code == 1
    data = json.loads(res.stdout)
    assert data["kind"] == "envcheck-check" and data["exit_code"] == 1
    assert data["host"] == "node17"
    answer = data["answer"]
    assert answer["build"] == "2.4.1+cu124" and answer["works"] is False
    driver = [c for c in answer["criteria"] if c["id"] == "driver"][0]
    assert driver["status"] == "fail"
    assert driver["numbers"] == {"needs": "525.60.13", "found": "470.82.01", "cuda": "12.4",
                                 "full_feature_driver": "550.54.14"}
    assert data["node"]["given"] == ["python", "driver", "gpus"]
    assert data["alternatives"][0]["build"] == "2.4.1+cu118"
    assert data["suggestions"][0]["pip"].startswith("pip install torch==2.7.1 --index-url")


# ---- nvidia-smi: real, fake, broken ---------------------------------------------------

def fake_smi(tmp_path, body):
    d = tmp_path / "bin"
    d.mkdir()
    exe = d / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return {"PATH": "%s%s%s" % (d, os.pathsep, os.environ.get("PATH", ""))}


def test_fake_nvidia_smi_is_read(tmp_path):
    env = fake_smi(tmp_path, "echo '0, NVIDIA A100-SXM4-80GB, 8.0, 535.104.05, 81920'\n"
                             "echo '1, NVIDIA A100-SXM4-80GB, 8.0, 535.104.05, 81920'\n")
    res = check("torch==2.4.1", *PY311, env=env)
    assert res.code == 0, res.stderr
    assert "driver 535.104.05, GPUs: 2× NVIDIA A100-SXM4-80GB sm_80" in res.stdout
    assert "sm_80 (GPU 0,1) is compiled in" in res.stdout


def test_failing_nvidia_smi_is_exit_2(tmp_path):
    env = fake_smi(tmp_path, "echo 'NVIDIA-SMI has failed because it could not communicate "
                             "with the NVIDIA driver.'\nexit 9\n")
    res = check("torch==2.4.1", *PY311, env=env)
    assert res.code == 2
    assert "nvidia-smi failed (exit 9): NVIDIA-SMI has failed" in res.stderr
    assert "--driver VERSION --gpu sm_XY" in res.stderr
    # planning for another node does not need this node's nvidia-smi
    res = check("torch==2.4.1", *PY311, "--driver", "535.104.05", *A100, env=env)
    assert res.code == 0, res.stderr


def test_garbage_from_nvidia_smi_is_exit_2(tmp_path):
    env = fake_smi(tmp_path, "echo 'this is not csv'\n")
    res = check("torch==2.4.1", *PY311, env=env)
    assert res.code == 2
    assert "nvidia-smi printed an unexpected line 1: 'this is not csv'" in res.stderr
    assert "Traceback" not in res.stderr


# ---- no torch, and fast ---------------------------------------------------------------

def test_check_never_imports_torch(tmp_path):
    # How long it takes is measured in bench/bench_check.py (a wall-clock bound here
    # failed under the load of a full suite: 1.43 s on 2 shared cores).
    poison = tmp_path / "poison" / "torch"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('envcheck check imported torch')\n")
    env = {"PYTHONPATH": "%s%s%s" % (poison.parent, os.pathsep, ROOT)}
    args = ("torch==2.4.1+cu124", "--driver", "535.104.05", *A100, *PY311, "--suggest")
    res = check(*args, env=env)
    assert res.code == 0, res.stderr
    assert "imported torch" not in res.stderr
    probe = ("import sys; from envcheck import cli\n"
             "try:\n    cli.entry(%r)\nexcept SystemExit:\n    pass\n"
             "sys.stderr.write('TORCH=%%s' %% ('torch' in sys.modules))" % (list(args),))
    import subprocess
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT)
    assert "TORCH=False" in out.stderr


# ---- the driver can run the GPU at all: each generation's window, both ends ------------
# (sm, driver, expected) from NVIDIA's published branches (gpus.toml cites each):
# Kepler's last branch is R470; Maxwell/Pascal/Volta's R580; Blackwell needs R570+;
# sm_86 needs R455 (CUDA 11.1), sm_80 R450 (CUDA 11.0), Turing R410 (CUDA 10.0), Ada and
# Hopper R520 (no R515 release lists or carries code for them); the sm_103 first branch
# is unconfirmed, so below it is a warning.
WINDOWS = [
    ("sm_37", "470.256.02", "ok"), ("sm_37", "495.29.05", "fail"),
    ("sm_37", "550.54.15", "fail"), ("sm_35", "470.82.01", "ok"),
    ("sm_52", "580.95.05", "ok"), ("sm_52", "590.44.01", "fail"),
    ("sm_61", "580.126.09", "ok"), ("sm_61", "590.48.01", "fail"),
    ("sm_70", "580.65.06", "ok"), ("sm_70", "595.45.04", "fail"),
    ("sm_75", "410.48", "ok"), ("sm_75", "396.26", "fail"), ("sm_75", "610.43.02", "ok"),
    ("sm_80", "450.80.02", "ok"), ("sm_80", "440.33.01", "fail"),
    ("sm_86", "455.23.05", "ok"), ("sm_86", "450.80.02", "fail"),
    ("sm_89", "520.61.05", "ok"), ("sm_89", "515.65.01", "fail"),
    ("sm_90", "520.61.05", "ok"), ("sm_90", "515.65.01", "fail"),
    ("sm_100", "570.26", "ok"), ("sm_100", "560.35.03", "fail"),
    ("sm_120", "570.86.16", "ok"), ("sm_120", "565.77", "fail"),
    ("sm_120", "550.54.15", "fail"), ("sm_120", "535.104.05", "fail"),
    ("sm_103", "575.51.03", "ok"), ("sm_103", "570.124.06", "warn"),
]


@pytest.mark.parametrize("sm, driver, expected", WINDOWS)
def test_driver_window_of_each_gpu_generation(sm, driver, expected):
    m = load()
    release, build, _ = precheck.resolve(m, torch_pin.parse("torch==2.4.1+cu118"))
    node = Node("3.11", "3.11", "Linux", "x86_64", "2.36", driver, (NodeGpu(0, "x", sm),),
                ("python", "driver", "gpus"))
    answer = precheck.evaluate(m, release, build, node)
    window = [c for c in answer.criteria if c.id == "gpu_driver"][0]
    assert window.status == expected, window.message
    assert bool(window.source) == (expected != "ok")


def test_k80_on_a_550_driver_will_not_work_and_says_why():
    res = check("torch==2.3.1+cu118", "--driver", "550.54.15", "--gpu", "sm_37", *PY311)
    assert res.code == 1, res.stdout
    text = " ".join(res.stdout.split())
    assert "✗ driver/GPU sm_37 (GPU 0, Kepler) is not run by drivers after R470 (Kepler's " \
           "last branch), found 550.54.15: install a 470.x driver" in text
    assert "source: NVIDIA, Current graphics driver releases: legacy 470.x for 'Kepler' GPUs" in text
    # the failing fact, next to the answer
    assert "✗ 2.3.1+cu118 will not work here: driver 550.54.15 cannot run sm_37 (Kepler: " \
        "up to R470)" in text


@pytest.mark.parametrize("driver", ["550.54.15", "535.104.05"])
def test_rtx_5090_needs_r570(driver):
    res = check("torch==2.7.1+cu128", "--driver", driver, "--gpu", "sm_120", *PY311)
    assert res.code == 1, res.stdout
    text = " ".join(res.stdout.split())
    assert "sm_120 (GPU 0, Blackwell) needs driver branch R570 or newer, found %s" % driver \
        in text
    assert "✗ 2.7.1+cu128 will not work here: driver %s cannot run sm_120 (Blackwell needs " \
        "R570+)" % driver in text
    assert res.stdout.endswith("No torch build can help until the driver changes: this "
                               "driver cannot run these GPUs (driver/GPU above).\n")
    res = check("torch==2.7.1+cu128", "--driver", "570.86.16", "--gpu", "sm_120", *PY311)
    assert res.code == 0, res.stdout


@pytest.mark.parametrize("sm, name", [("sm_90", "Hopper"), ("sm_89", "Ada")])
def test_hopper_and_ada_need_r520(sm, name):
    # No R515 release lists an H100 or an Ada GPU, nor carries code for them (NVIDIA
    # open-gpu-kernel-modules, every 515.x tag); 520.56.06 is the first to name both.
    res = check("torch==2.4.1+cu118", "--driver", "515.65.01", "--gpu", sm, *PY311)
    assert res.code == 1, res.stdout
    text = " ".join(res.stdout.split())
    assert "✗ driver/GPU %s (GPU 0, %s) needs driver branch R520 or newer, found 515.65.01" \
        % (sm, name) in text
    assert "UNCONFIRMED" not in text.split("driver/GPU")[1].split("GPU arch")[0]
    assert "NVIDIA open-gpu-kernel-modules, README.md 'Compatible GPUs' table" in text
    assert "✗ 2.4.1+cu118 will not work here: driver 515.65.01 cannot run %s (%s needs " \
        "R520+)" % (sm, name) in text
    res = check("torch==2.4.1+cu118", "--driver", "520.61.05", "--gpu", sm, *PY311)
    assert res.code == 0, res.stdout


def test_cudnn_floor_below_the_gpu():
    # 2.4.1+cu118 compiles sm_37 but bundles cuDNN 9.1.0.70, which needs 5.0 (NVIDIA
    # cuDNN 9.0.0 support matrix); 2.3.1+cu118 bundles 8.7.0.84, whose 3.5 floor is not
    # confirmed, and says so.
    res = check("torch==2.4.1+cu118", "--driver", "470.256.02", "--gpu", "sm_37", *PY311)
    assert res.code == 1, res.stdout
    text = " ".join(res.stdout.split())
    assert "✗ cuDNN cuDNN 9.1.0.70 (in 2.4.1+cu118) needs compute capability ≥ sm_50; " \
           "sm_37 (GPU 0) is below it" in text
    assert "source: NVIDIA cuDNN 9.0.0 Support Matrix: compute capability 5.0 and later" in text
    assert "✗ 2.4.1+cu118 will not work here: cuDNN 9.1.0.70 needs sm_50+, GPU sm_37" in text
    res = check("torch==2.3.1+cu118", "--driver", "470.256.02", "--gpu", "sm_37", *PY311)
    assert res.code == 0, res.stdout
    assert "✓ cuDNN cuDNN 8.7.0.84 supports sm_37 (needs ≥ sm_35) [UNCONFIRMED in the " \
           "matrix: cuDNN 8.7.0.84 floor]" in " ".join(res.stdout.split())


# ---- a 470-series driver: nvidia-smi refuses compute_cap ------------------------------

# What an R470 nvidia-smi does with a field it does not know (compute_cap came in R510):
# it prints this line and a blank one on stdout and exits 2 (huggingface/candle#733 on
# 470.182.03; NVIDIA/TensorRT-LLM#735 on 470.82.01; CoHDI/composable-resource-operator#37
# shows the exit code and the blank line).
SMI_470 = r'''#!{python}
import sys
GPUS = {gpus!r}
KNOWN = ("timestamp", "driver_version", "count", "name", "gpu_name", "serial", "uuid",
         "index", "pci.bus_id", "memory.total", "memory.used", "memory.free")
query = [a for a in sys.argv[1:] if a.startswith("--query-gpu=")]
if not query:
    print("NVIDIA-SMI 470.82.01   Driver Version: 470.82.01   CUDA Version: 11.4")
    sys.exit(0)
fields = query[0].split("=", 1)[1].split(",")
for f in fields:
    if f not in KNOWN:
        print('Field "%s" is not a valid field to query.' % f)
        print()
        sys.exit(2)
for i, (name, memory) in enumerate(GPUS):
    row = {{"index": str(i), "name": name, "gpu_name": name, "driver_version": "470.82.01",
           "memory.total": memory, "count": str(len(GPUS))}}
    print(", ".join(row.get(f, "[N/A]") for f in fields))
'''


def fake_smi_470(tmp_path, gpus):
    d = tmp_path / "bin470"
    d.mkdir()
    exe = d / "nvidia-smi"
    exe.write_text(SMI_470.format(python=sys.executable, gpus=gpus))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    # PYTHONNOUSERSITE: no nvidia-ml-py from elsewhere; NVML is not what is under test
    return {"PATH": "%s%s%s" % (d, os.pathsep, os.environ.get("PATH", ""))}


def test_nvidia_smi_of_a_470_driver_is_read_without_compute_cap(tmp_path):
    import subprocess
    env = fake_smi_470(tmp_path, [("NVIDIA A100-SXM4-40GB", "40536")] * 2)
    refused = subprocess.run(["nvidia-smi", "--query-gpu=index,compute_cap",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             env={**os.environ, **env})
    assert (refused.returncode, refused.stdout) == (
        2, 'Field "compute_cap" is not a valid field to query.\n\n')
    # The README's own example node: 470.82.01 runs cu118 builds, not cu121+.
    res = check("torch==2.4.1+cu118", *PY311, env=env)
    assert res.code == 0, res.stdout + res.stderr
    assert "driver 470.82.01, GPUs: 2× NVIDIA A100-SXM4-40GB sm_80" in res.stdout
    assert "note: nvidia-smi 470.82.01 cannot report compute capability: taken from the " \
           "GPU's name (matrix/gpus.toml)" in " ".join(res.stdout.split())
    res = check("torch==2.4.1", *PY311, env=env)
    assert res.code == 1
    assert "cu121 needs driver ≥ 525.60.13 (CUDA 12.x minor-version compatibility), found " \
           "470.82.01" in " ".join(res.stdout.split())


def test_470_node_with_a_k80(tmp_path):
    env = fake_smi_470(tmp_path, [("Tesla K80", "11441")] * 4)
    res = check("torch==2.3.1+cu118", *PY311, env=env)
    assert res.code == 0, res.stdout + res.stderr
    assert "GPUs: 4× Tesla K80 sm_37" in res.stdout
    assert "sm_37 (GPU 0,1,2,3) is compiled in" in " ".join(res.stdout.split())


def test_470_gpu_the_name_table_does_not_know_is_one_line_exit_2(tmp_path):
    env = fake_smi_470(tmp_path, [("NVIDIA Mystery Board", "1024")])
    res = check("torch==2.3.1+cu118", *PY311, env=env)
    assert res.code == 2
    assert res.stderr == (
        "envcheck: error: nvidia-smi 470.82.01 cannot report compute capability (drivers "
        "before R510 refuse compute_cap) and GPU 0 'NVIDIA Mystery Board' is not in "
        "envcheck's GPU name table: pip install nvidia-ml-py (NVML reports it), or give "
        "--gpu sm_XY\n")
    res = check("torch==2.3.1+cu118", *PY311, "--gpu", "sm_86", env=env)
    assert res.code == 0, res.stderr


@pytest.mark.ranks
def test_run_counts_the_gpus_of_a_470_driver(tmp_path):
    env = fake_smi_470(tmp_path, [("Tesla V100-SXM2-32GB", "32510")] * 3)
    out = tmp_path / "r.json"
    res = run_cli("run", "-p", "launch", "--backend", "gloo", "--json", str(out), "-q",
                  env=env)
    data = json.loads(out.read_text())
    assert data["plan"]["nproc"] == 3, res.stdout + res.stderr
    assert not any("GPU" in n for n in data["plan"]["notes"]), data["plan"]["notes"]


def test_glibc_option_plans_for_centos7():
    res = check("torch==2.7.1", "--glibc", "2.17", "--driver", "560.35.03", *A100, *PY311)
    assert res.code == 1
    text = " ".join(res.stdout.split())
    assert "glibc 2.17 (given)" in text
    assert "✗ glibc needs glibc ≥ 2.28 (manylinux_2_28 wheel), found 2.17: pip finds no " \
           "wheel for this node source: PEP 600 (peps.python.org/pep-0600)" in text
    # 2.5.1 is the newest release whose default build runs on glibc 2.17 (manylinux1 tag,
    # GLIBC_2.17 binaries).
    res = check("torch==2.5.1", "--glibc", "2.17", "--driver", "560.35.03", *A100, *PY311)
    assert res.code == 0, res.stdout
    res = check("torch==2.5.1", "--glibc", "centos7", *A100, *PY311)
    assert (res.code, res.stderr) == (
        2, "envcheck: error: --glibc 'centos7': give a glibc version like 2.17\n")


# NVIDIA's binding as an R470 node answers it: the module nvidia-ml-py installs, with the
# calls discovery makes, answering for two K80s on 470.82.01 (NVML has reported compute
# capability since long before R470; nvidia-smi's compute_cap came in R510).
FAKE_PYNVML = '''
class NVMLError(Exception):
    pass
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return b"470.82.01"
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return b"Tesla K80"
def nvmlDeviceGetCudaComputeCapability(h): return (3, 7)
class _Mem:
    total = 11996954624
def nvmlDeviceGetMemoryInfo(h): return _Mem()
'''


def test_nvml_is_asked_first(tmp_path):
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    env = {"PYTHONPATH": "%s%s%s" % (tmp_path, os.pathsep, ROOT), "PATH": "/nonexistent"}
    res = check("torch==2.3.1+cu118", *PY311, env=env)
    assert res.code == 0, res.stdout + res.stderr
    assert "driver 470.82.01, GPUs: 2× Tesla K80 sm_37" in res.stdout
    assert "nvidia-smi" not in res.stdout


def test_nvml_without_its_library_falls_back_to_nvidia_smi(tmp_path):
    pytest.importorskip("pynvml")  # the real nvidia-ml-py; no libnvidia-ml on this machine
    env = fake_smi_470(tmp_path, [("Tesla K80", "11441")])
    res = check("torch==2.3.1+cu118", *PY311, env=env)
    assert res.code == 0, res.stdout + res.stderr
    assert "note: NVML did not start (NVML Shared Library Not Found)" in res.stdout
    assert "GPUs: 1× Tesla K80 sm_37" in res.stdout


# ---- pins as pip reads them; a node without GPUs; ROCm --------------------------------

@pytest.mark.parametrize("pin, build, note", [
    ("torch==2.4", "2.4.0+cu121", "torch==2.4 is torch 2.4.0, as pip reads it"),
    ("torch==2.4.0", "2.4.0+cu121", None),
    ("torch~=2.4.0", "2.4.1+cu121",
     "torch~=2.4.0 resolves to 2.4.1: the newest release in range with a wheel for this node, "
     "as pip picks it"),
    ("torch<2.5", "2.4.1+cu121",
     "torch<2.5 resolves to 2.4.1: the newest release in range with a wheel for this node, "
     "as pip picks it"),
    ("torch>=2.3,<2.6", "2.5.1+cu124",
     "torch>=2.3,<2.6 resolves to 2.5.1: the newest release in range with a wheel for this "
     "node, as pip picks it"),
])
def test_pins_as_pip_reads_them(pin, build, note):
    res = check(pin, "--driver", "535.104.05", *A100, *PY311)
    assert res.code == 0, res.stdout + res.stderr
    assert "%s on this node:" % build in res.stdout
    notes = [line for line in res.stdout.splitlines() if line.startswith("note: ")]
    assert notes == (["note: " + note] if note else [])
    assert "will work here: pip install torch==%s\n" % build.split("+")[0] in res.stdout


def no_gpu_env(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    # no nvidia-smi on PATH and no NVIDIA binding: a node without NVIDIA GPUs
    (tmp_path / "pynvml.py").write_text("raise ImportError('no nvidia-ml-py here')\n")
    return {"PATH": str(empty), "PYTHONPATH": "%s%s%s" % (tmp_path, os.pathsep, ROOT)}


def test_cpu_only_node_gets_the_cpu_wheel(tmp_path):
    env = no_gpu_env(tmp_path)
    res = check("torch==2.13.0", *PY311, env=env)
    assert res.code == 0, res.stdout + res.stderr
    assert "GPUs: none" in res.stdout
    assert "note: no nvidia-smi on PATH: no NVIDIA GPU" in res.stdout
    assert res.stdout.endswith(
        "✓ 2.13.0+cu130 will work here, on CPU only (no NVIDIA GPU): install the CPU build, "
        "without gigabytes of CUDA libraries: pip install torch==2.13.0 --index-url "
        "https://download.pytorch.org/whl/cpu\n")
    res = check("--suggest", *PY311, env=env)
    lines = [line.split()[0] for line in res.stdout.splitlines() if line.startswith("  2.")]
    assert lines == ["2.15.0+cpu", "2.14.1+cpu", "2.13.0+cpu", "2.12.1+cpu", "2.11.0+cpu"]
    assert "--index-url https://download.pytorch.org/whl/cpu" in res.stdout


def test_rocm_pin(tmp_path):
    # On an NVIDIA node a ROCm build is a definite no, whatever the matrix lacks on ROCm.
    res = check("torch==2.6.0+rocm6.1", "--driver", "560.35.03", *A100, *PY311)
    assert res.code == 1, res.stdout
    assert "✗ wheel 2.6.0+rocm6.1 is a ROCm build, for AMD GPUs; this node has NVIDIA " \
           "GPUs (sm_80): pick a CUDA build" in " ".join(res.stdout.split())
    assert "✗ 2.6.0+rocm6.1 will not work here: 2.6.0+rocm6.1 is a ROCm build, GPUs are " \
        "NVIDIA" in res.stdout
    # With no NVIDIA GPU to rule it out, the matrix cannot judge it: exit 3, said so.
    res = check("torch==2.6.0+rocm6.1", *PY311, env=no_gpu_env(tmp_path))
    assert res.code == 3, res.stdout
    assert "? 2.6.0+rocm6.1: nothing fails, but the matrix cannot judge wheel" in res.stdout


def test_check_and_summary_do_not_load_pydantic():
    # typer >= 0.20 would coerce every option through pydantic (0.2 s of CPU per call);
    # check and summary take plain strings and skip it (cli._fast_plain_options).
    import subprocess
    probe = ("import sys; from envcheck import cli\n"
             "try:\n    cli.entry(%r)\nexcept SystemExit as e:\n    code = e.code\n"
             "sys.stderr.write('CODE=%%s PYDANTIC=%%s' %% (code, 'pydantic' in sys.modules))")
    for argv in (["check", "torch==2.4.1+cu124", "--driver", "535.104.05", "--gpu", "sm_80",
                  "--gpu", "sm_86", "-r", "/nonexistent", "--python-version", "3.11"],
                 ["check", "torch==2.4.1+cu124", "--driver", "535.104.05", "--gpu", "sm_80",
                  "--python-version", "3.11", "--format", "json"],
                 ["summary", "/nonexistent"]):
        out = subprocess.run([sys.executable, "-c", probe % (argv,)], capture_output=True,
                             text=True, cwd=ROOT)
        assert out.stderr.endswith("PYDANTIC=False"), out.stderr
    assert "CODE=0 " in subprocess.run(
        [sys.executable, "-c", probe % (["check", "torch==2.4.1+cu124", "--driver",
                                         "535.104.05", "--gpu", "sm_80", "--gpu", "sm_86",
                                         "--python-version", "3.11"],)],
        capture_output=True, text=True, cwd=ROOT).stderr


def test_neither_nvml_nor_nvidia_smi_answers(tmp_path):
    pytest.importorskip("pynvml")  # the real binding, without libnvidia-ml here
    env = fake_smi(tmp_path, "echo 'NVIDIA-SMI has failed because it could not communicate "
                             "with the NVIDIA driver.'\nexit 9\n")
    res = check("torch==2.4.1", *PY311, env=env)
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr == (
        "envcheck: error: nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it "
        "could not communicate with the NVIDIA driver (and NVML did not start (NVML Shared "
        "Library Not Found)). Fix the driver install, or plan without it: --driver VERSION "
        "--gpu sm_XY\n")


def test_json_path_is_written_with_the_host_or_refused_before_any_work(tmp_path):
    out = tmp_path / "node07.json"
    res = check("torch==2.4.1+cu124", "--driver", "470.82.01", *A100, *PY311, "--json",
                str(out), env={"ENVCHECK_HOST": "node07"})
    assert res.code == 1 and "will not work here: driver 470.82.01 < 525.60.13 for cu124" in res.stdout
    data = json.loads(out.read_text())
    assert (data["host"], data["exit_code"], data["answer"]["build"]) == (
        "node07", 1, "2.4.1+cu124")
    assert [c["short"] for c in data["answer"]["criteria"] if c["status"] == "fail"] == [
        "driver 470.82.01 < 525.60.13 for cu124"]
    assert [p.name for p in tmp_path.iterdir()] == ["node07.json"]  # no temporary left
    res = check("torch==2.4.1", *A100, *PY311, "--json", str(tmp_path / "no" / "x.json"))
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr == "envcheck: error: cannot write %s: directory %s does not exist\n" \
        % (tmp_path / "no" / "x.json", tmp_path / "no")


@pytest.mark.parametrize("args", [("torch==2.4.1+cu999",), ("torch==2.4.1", "--cuda", "99.9")])
def test_a_cuda_variant_no_release_has_is_bad_input(args):
    res = check(*args, *PY311)
    assert res.code == 2 and res.stdout == ""
    assert res.stderr == (
        "envcheck: error: torch==2.4.1%s: no torch release has a cu999 build (the CUDA "
        "variants are cu116, cu117, cu118, cu121, cu124, cu126, cu128, cu129, cu130, "
        "cu132); 'envcheck check --suggest' lists the builds that work here\n"
        % ("+cu999" if len(args) == 1 else ""))
    # A real variant this release lacks is an answer, not bad input.
    assert check("torch==2.4.1+cu126", *PY311).code == 1


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_an_answer_for_a_shared_folder_follows_the_umask(tmp_path, umask, mode):
    target = tmp_path / "node01.json"
    proc = subprocess.run([sys.executable, "-m", "envcheck", "check", "torch==2.4.1",
                           "--driver", "535.104.05", "--gpu", "sm_80", "--json", str(target)],
                          cwd=ROOT, capture_output=True, preexec_fn=lambda: os.umask(umask),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(target.stat().st_mode) == mode
    # A file that is there keeps its mode.
    target.chmod(0o664)
    subprocess.run([sys.executable, "-m", "envcheck", "check", "torch==2.4.1", "--driver",
                    "535.104.05", "--gpu", "sm_80", "--json", str(target)], cwd=ROOT,
                   capture_output=True, preexec_fn=lambda: os.umask(umask), timeout=60)
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


# ---- the node's CPU architecture: Grace superchips are aarch64 --------------------------

@pytest.mark.parametrize("gpu, sm", [("NVIDIA GB200", "sm_100"), ("NVIDIA GB10", "sm_121"),
                                     ("NVIDIA GH200 480GB", "sm_90")])
def test_a_grace_gpu_is_judged_for_an_aarch64_node_not_this_machines_wheel(gpu, sm):
    res = check("torch==2.8.0", "--driver", "580.82.07", "--gpu", gpu, *PY311)
    assert res.code == 3, res.stdout + res.stderr  # cannot judge, never "will work"
    lines = res.stdout.splitlines()
    assert lines[0].startswith("node: Linux aarch64, ") and "%s %s" % (gpu, sm) in lines[0]
    assert lines[1] == "note: %s is a Grace superchip: judged for a Linux aarch64 node" % gpu
    assert "  ? wheel        the matrix covers Linux x86_64 wheels; this node is Linux " \
           "aarch64" in res.stdout
    assert "will work here" not in res.stdout


def test_arch_plans_for_another_cpu_and_is_checked_against_what_exists():
    res = check("torch==2.8.0", "--driver", "580.82.07", "--gpu", "sm_90", "--arch",
                "aarch64", *PY311)
    assert res.code == 3 and res.stdout.startswith("node: Linux aarch64, ")
    same = check("torch==2.8.0", "--driver", "580.82.07", "--gpu", "NVIDIA B200", "--arch",
                 "x86_64", *PY311)
    assert same.code == 0 and same.stdout.startswith("node: Linux x86_64, ")
    for args, line in (
            (("--arch", "riscv64", "--gpu", "sm_90"),
             "--arch 'riscv64': give x86_64 or aarch64 (a Grace node: GH200, GB200, GB10), "
             "as uname -m prints it"),
            (("--arch", "x86_64", "--gpu", "NVIDIA GB200"),
             "--gpu 'NVIDIA GB200' comes only on aarch64 nodes, not --arch x86_64")):
        bad = check("torch==2.8.0", "--driver", "580.82.07", *args, *PY311)
        assert (bad.code, bad.stderr) == (2, "envcheck: error: %s\n" % line)

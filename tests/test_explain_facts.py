"""explain.facts: the versions a job printed, judged against the matrix."""

import pytest

from envcheck.explain import job_versions as facts, line
from envcheck.matrix import load as matrix_load


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _judge(matrix, *texts):
    f = facts.Facts()
    for number, text in enumerate(texts, 1):
        f.feed(line.parse(number, text.encode()), "job.log")
    return f, [(j.fact, j.verdict, j.text) for j in facts.judge(f, matrix)]


def test_accelerate_env_torch_before_2_3_with_numpy_2_is_unsupported(matrix):
    # accelerate env's lines (huggingface/accelerate#3010's format)
    f, judged = _judge(matrix, "- Numpy version: 2.0.2",
                       "- PyTorch version (GPU?): 2.2.2+cu121 (True)")
    assert f.one("torch") == "2.2.2+cu121" and f.one("numpy") == "2.0.2"
    problems = [j for j in judged if j[1] == "problem"]
    assert problems == [("numpy", "problem", "torch 2.2.2+cu121 with NumPy 2.0.2: this torch "
                         "was built against NumPy 1.x and cannot use NumPy 2 (object "
                         "collectives, and DCP which uses them, fail with 'Numpy is not "
                         "available'): pip install 'numpy<2', or use torch >= 2.3, the first "
                         "release built against NumPy 2")]


def test_nccl_other_than_the_bundled_one_is_a_note(matrix):
    _, judged = _judge(matrix, "PyTorch version: 2.2.2+cu121", "NCCL version 2.18.1+cuda12.1")
    assert ("nccl", "note") in {(j[0], j[1]) for j in judged}
    _, judged = _judge(matrix, "PyTorch version: 2.2.2+cu121", "NCCL version 2.19.3+cuda12.3")
    assert ("nccl", "ok", "NCCL 2.19.3 is the one torch 2.2.2+cu121 ships") in judged


def test_driver_cuda_of_an_older_major_is_a_problem(matrix):
    # NCCL's cudaDriverVersion 11040 (Fooocus#1313's driver reports CUDA 11.4)
    _, judged = _judge(matrix, "PyTorch version: 2.4.1+cu121",
                       "node-1:1:1 [0] NCCL INFO cudaDriverVersion 11040")
    assert ("driver", "problem", "the driver supports CUDA 11.4, older than the CUDA 12.1 "
            "torch was built with: a CUDA 12 build needs a CUDA 12 driver") in judged


def test_a_release_the_matrix_does_not_know_is_a_note(matrix):
    _, judged = _judge(matrix, "PyTorch version: 1.12.1+cu113")
    assert [j[1] for j in judged] == ["note"]
    assert judged[0][2].startswith("torch 1.12.1+cu113 is not a release the matrix knows")


def test_two_different_torch_versions_are_not_judged_as_one(matrix):
    f, judged = _judge(matrix, "[rank0]: PyTorch version: 2.2.2+cu121",
                       "[rank1]: PyTorch version: 2.4.1+cu121")
    assert f.one("torch") is None and judged == []
    assert {x["value"]: x["ranks"] for x in f.to_list()} == {"2.2.2+cu121": [0],
                                                              "2.4.1+cu121": [1]}

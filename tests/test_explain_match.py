"""explain.match: lines into findings, one per cause; symptoms, differences and needs.
The lines are real texts of tests/data/explain_corpus.toml."""

import pytest

from envcheck.explain import line, match
from envcheck.matrix import load as matrix_load

WATCHDOG = ("[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=42516042, "
            "NumelOut=42516042, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.")
P2P = "ucwlai-k8snode-12-123:15016:15016 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC"
ABORT = "  traceback : Signal 6 (SIGABRT) received by PID 2385923"
CHILD = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a "
       "total capacity of 31.47 GiB of which 12.73 GiB is free.")


@pytest.fixture(scope="module")
def signatures():
    return matrix_load.load().signatures


def _results(signatures, texts):
    m = match.Matcher(signatures)
    for number, text in enumerate(texts, 1):
        m.feed(line.parse(number, text.encode()), "job.log")
    findings, consequences = m.results()
    return [f.signature.id for f in findings], [f.signature.id for f in consequences]


def test_a_cause_makes_the_symptoms_its_consequences(signatures):
    assert _results(signatures, [CHILD, "[rank1]: " + OOM, WATCHDOG, ABORT]) == (
        ["cuda.out_of_memory"],
        ["nccl.watchdog_timeout", "launch.rank_aborted", "launch.child_failed"])


def test_symptoms_alone_give_the_most_specific_as_the_finding(signatures):
    assert _results(signatures, [CHILD, ABORT, WATCHDOG]) == (
        ["nccl.watchdog_timeout"], ["launch.rank_aborted", "launch.child_failed"])


def test_p2p_lines_are_a_cause_only_with_a_timeout(signatures):
    # alone (no timeout, no other finding), P2P lines are a guess said as one (phase D)
    m = match.Matcher(signatures)
    m.feed(line.parse(1, P2P.encode()), "job.log")
    (f,), rest = m.results()
    assert (f.signature.id, f.alone, rest) == ("nccl.p2p_hang", True, [])
    assert f.cause.startswith("possibly")
    assert _results(signatures, [P2P, WATCHDOG]) == (["nccl.p2p_hang"],
                                                     ["nccl.watchdog_timeout"])


def test_the_same_nccl_version_everywhere_is_no_finding(signatures):
    same = ["[rank0]: NCCL version 2.21.5+cuda12.4", "[rank1]: NCCL version 2.21.5+cuda12.4"]
    assert _results(signatures, same) == ([], [])
    differ = ["[rank0]: NCCL version 2.21.5+cuda12.4", "[rank1]: NCCL version 2.20.5+cuda12.4"]
    assert _results(signatures, differ) == (["nccl.version_mismatch"], [])


def test_one_cause_on_many_ranks_and_lines_is_one_finding(signatures):
    m = match.Matcher(signatures)
    for number, rank in enumerate([3, 1, 3, 0], 1):
        m.feed(line.parse(number, ("[rank%d]: %s" % (rank, OOM)).encode()), "job.log")
    (f,), _ = m.results()
    assert (f.ranks, f.count, f.line.number, f.where) == ({0, 1, 3}, 4, 1, "job.log:1")

"""explain.line: one log line's text, rank and host, whatever the launcher wrote."""

import pytest

from envcheck.explain import line

CASES = [
    # (line as the log has it, text, rank, host)
    (b"[rank3]: TypeError: boom", "TypeError: boom", 3, None),
    (b"[default2]:[rank5]: TypeError: boom", "TypeError: boom", 5, None),
    (b"[default2]:RuntimeError: boom", "RuntimeError: boom", 2, None),
    # indented as pasted into a thread (PrimeIntellect-ai/prime-rl#1678)
    (b"  [default3]:FileNotFoundError: [Errno 2] No such file or directory: '/s/t'",
     "FileNotFoundError: [Errno 2] No such file or directory: '/s/t'", 3, None),
    (b"  7: RuntimeError: boom", "RuntimeError: boom", 7, None),
    (b"[1,4]<stdout>:node-3:29882:30400 [0] init.cc:497 NCCL WARN x",
     "node-3:29882:30400 [0] init.cc:497 NCCL WARN x", 4, "node-3"),
    (b"10.10.23.10: so-ucloud-10:1307367:1307586 [0] NCCL WARN y",
     "so-ucloud-10:1307367:1307586 [0] NCCL WARN y", None, "10.10.23.10"),
    (b"[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective",
     "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective", 1, None),
    (b"(Worker pid=12) [rank1]:[E918 23:18:00.3 ProcessGroupNCCL.cpp:632] [Rank 1] W",
     "[E918 23:18:00.3 ProcessGroupNCCL.cpp:632] [Rank 1] W", 1, None),
    # SkyPilot's task prefix, a comma before the pid (oumi-ai/oumi#835)
    (b"(llama405b-qlora-fsdp, pid=17187) [rank0]: AssertionError", "AssertionError", 0, None),
    (b"(a task, pid=17187) [rank0]: AssertionError",
     "(a task, pid=17187) [rank0]: AssertionError", None, None),
    (b"\x1b[31mRuntimeError\x1b[0m: CUDA error\r\n", "RuntimeError: CUDA error", None, None),
    (b"RuntimeError: caf\xe9 \xff broken", "RuntimeError: caf\ufffd \ufffd broken", None, None),
    (b"  2%|##  | 3/100 [00:01<00:30]\r 5%|###  | 5/100\rRuntimeError: late",
     "RuntimeError: late", None, None),
    (b"12:00:01 RuntimeError: not a rank", "12:00:01 RuntimeError: not a rank", None, None),
    (b"RuntimeError: no host", "RuntimeError: no host", None, None),
    # real lines: https://github.com/luca-medeiros/lightning-sam/issues/43 (Lightning),
    # https://github.com/Project-MONAI/MONAI/issues/8355 (a CI runner's timestamps)
    (b"[rank: 3] Global seed set to 1340", "Global seed set to 1340", 3, None),
    (b"[2025-02-18T15:24:11.855Z] _pickle.UnpicklingError: Weights only load failed. ",
     "_pickle.UnpicklingError: Weights only load failed.", None, None),
    # kubectl logs --prefix (kubectl's pkg/cmd/logs/logs.go: '[pod/%s/%s] ', '[node/%s] ')
    (b"[pod/trainer-worker-1/pytorch] [default0]:[rank2]: OSError: x", "OSError: x", 2,
     "trainer-worker-1"),
    (b"[pod/llama-8b-master-0/] 3: RuntimeError: x", "RuntimeError: x", 3, "llama-8b-master-0"),
    (b"[node/gpu-node-3] NVRM: Xid (PCI:0000:3b:00): 79", "NVRM: Xid (PCI:0000:3b:00): 79",
     None, "gpu-node-3"),
    # not kubectl's: a path in brackets, a pod of no container segment
    (b"[pod/x] RuntimeError: y", "[pod/x] RuntimeError: y", None, None),
    # syslog and journalctl (-o short, -o short-iso, rsyslog's RFC 3339 time): the host
    (b"Nov 27 04:00:01 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1",
     "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", None, "gpu-node-7"),
    (b"Nov  7 04:00:01 h1 python3[4242]: [rank3]: RuntimeError: x", "RuntimeError: x", 3,
     "h1"),
    (b"2026-11-27T04:00:01+0000 node1 torchrun[42]: OSError: x", "OSError: x", None, "node1"),
    (b"2026-11-27T04:00:01.123456+00:00 node1 train.sh[9]: OSError: x", "OSError: x", None,
     "node1"),
    # a container runtime's line (CRI: time, stream, tag) is no syslog line
    (b"2026-11-27T04:00:01.37Z stderr F [rank0]: OSError: x", "OSError: x", 0, None),
]


@pytest.mark.parametrize("data,text,rank,host", CASES)
def test_prefixes_are_read_off(data, text, rank, host):
    ln = line.parse(5, data)
    assert (ln.text, ln.rank, ln.host) == (text, rank, host)
    assert ln.number == 5


def test_torchrun_summary_gives_rank_and_host_from_the_lines_before():
    before = [b"[1]:", b"  time      : 2023-06-14_22:36:10", b"  host      : node-1",
              b"  rank      : 1 (local_rank: 1)", b"  exitcode  : -6 (pid: 2385923)",
              b"  error_file: <N/A>"]
    ln = line.parse(9, b"  traceback : Signal 6 (SIGABRT) received by PID 2385923", before)
    assert (ln.rank, ln.host) == (1, "node-1")


def test_summary_lookback_stops_at_the_entry_start():
    before = [b"  rank      : 1 (local_rank: 1)", b"[2]:", b"  time      : x"]
    ln = line.parse(9, b"  traceback : Signal 6 (SIGABRT) received by PID 3", before)
    assert ln.rank is None


# The end of node2's log of a 2-host job (tests/test_cluster_explain.py makes it for real)
NODE2_SUMMARY = [b"Failures:", b"[1]:", b"  time      : 2026-11-27_07:03:27",
                 b"  host      : node2", b"  rank      : 3 (local_rank: 1)",
                 b"  exitcode  : -15 (pid: 9253)  (SIGTERM)", b"Root Cause (first observed "
                 b"failure):", b"[0]:", b"  host      : node2",
                 b"  rank      : 2 (local_rank: 0)", b"  exitcode  : 1 (pid: 9251) "]


def test_a_hosts_summary_says_where_its_local_ranks_start_and_its_host():
    assert line.origin(NODE2_SUMMARY) == (2, "node2")
    # as kubectl logs --prefix gives it
    assert line.origin([b"[pod/job-1/main] " + raw for raw in NODE2_SUMMARY]) == (2, "node2")
    # two hosts' summaries in one log disagree: no guess
    assert line.origin(NODE2_SUMMARY + [b"  host      : node1",
                                        b"  rank      : 1 (local_rank: 1)"]) == (0, None)
    assert line.origin([b"[default0]:all good", b"host : x"]) == (0, None)
    with line.read_as(2, "node2"):
        assert (line.parse(1, b"[default1]:boom").rank, line.parse(1, b"boom").host) == (
            3, "node2")
        assert line.parse(1, b"[default1]:[rank3]: boom").rank == 3  # global already
        assert line.parse(1, b"[rank1]: boom").rank == 1
        assert line.parse(1, b"node7:12:13 [0] NCCL WARN x").host == "node7"  # its own
    # the next log starts afresh
    assert (line.parse(1, b"[default1]:boom").rank, line.parse(1, b"boom").host) == (1, None)

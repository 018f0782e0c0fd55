"""A real 4-rank torchrun failure, made here on CPU (tests/data/explain/
torchrun_pickle_group.py, run with --tee 3: every line carries [defaultN]: and the
tracebacks [rankN]:, interleaved as the ranks wrote them), comes out as one finding with
its four ranks; torchrun's own summary is only a consequence."""

import os

from envcheck.explain import explainer as command

HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HERE, "data", "explain", "torchrun-4rank-pickle-group.log")


def test_four_interleaved_ranks_are_one_finding():
    result = command.explain([LOG])
    assert [f.signature.id for f in result.findings] == ["torch.pickle_process_group"]
    finding = result.findings[0]
    assert finding.ranks == {0, 1, 2, 3}
    assert finding.count == 4
    # The first of the four error lines, as the log has it.
    with open(LOG, encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = next(i for i, text in enumerate(lines, 1) if "TypeError: cannot pickle" in text)
    assert finding.line.number == first
    assert finding.line.shown == lines[first - 1]
    assert [f.signature.id for f in result.consequences] == ["launch.child_failed"]
    assert result.inputs[0]["lines"] == len(lines)
    assert int(result.exit_code) == 0

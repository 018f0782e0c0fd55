"""Every real error text of the corpus (tests/data/explain_corpus.toml) is explained with
the right cause: each entry is a test.

The texts are users' logs from public issues (and torch's own output); they are the
closest thing to GPU ground truth envcheck has. An entry names the signature that must
come out first, and where it says so the ranks, hosts and framework too.
"""

import os

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "data", "explain_corpus.toml")
UNSEEN = os.path.join(HERE, "data", "explain_unseen.toml")

with open(CORPUS, "rb") as f:
    ENTRIES = tomllib.load(f)["entry"]
with open(UNSEEN, "rb") as f:
    # the half of the unseen logs that signatures were written from (the held-out half
    # never backs a signature: tests/test_explain_unseen.py)
    TRAINING = [e for e in tomllib.load(f)["entry"] if e["split"] == "train"]


def _id(entry):
    return "%s-%s" % (entry["expect"], entry["source"].split("//")[-1].split(" ")[0])


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def test_corpus_is_large_enough_and_covers_every_signature(matrix):
    """Every signature has real texts: in this corpus, or in the training half of
    explain_unseen.toml (tested by tests/test_explain_unseen.py)."""
    assert len(ENTRIES) >= 60
    covered = {e["expect"] for e in ENTRIES} | {e["family"] for e in TRAINING
                                               if e["family"] != "user"}
    assert {s.id for s in matrix.signatures} <= covered
    assert {e["expect"] for e in ENTRIES} <= {s.id for s in matrix.signatures}


@pytest.mark.parametrize("entry", ENTRIES, ids=[_id(e) for e in ENTRIES])
def test_real_text_is_explained(entry, tmp_path, matrix):
    assert entry["source"].strip() and entry["text"].strip()
    log = tmp_path / "job.log"
    log.write_text(entry["text"], encoding="utf-8")
    result = command.explain([str(log)], matrix=matrix)
    assert result.findings, "nothing recognised in %s" % entry["source"]
    first = result.findings[0]
    assert first.signature.id == entry["expect"]
    assert int(result.exit_code) == 0
    if "ranks" in entry:
        assert sorted(first.ranks) == entry["ranks"]
    if "hosts" in entry:
        assert sorted(first.hosts) == entry["hosts"]
    if "framework" in entry:
        assert result.frameworks == [entry["framework"]]
    # The line shown is one of the entry's own lines, as the log has it.
    assert first.line.shown.strip() in entry["text"]

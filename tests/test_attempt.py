"""The run model's abort (core/attempt.py): a typed kind, and a JSON round trip."""

import json

import pytest

from envcheck.core.attempt import Abort, AbortKind


def test_an_abort_round_trips_through_json_whole():
    abort = Abort("hang", 2, "probe:collectives",
                  {2: {"exit_code": 124, "stack": "...", "phase": "probe:collectives"},
                   0: {"exit_code": -15, "stopped_by": "envcheck"}},
                  signum=None, waited_s=61.2, limit_s=60.0, stop_s=0.4,
                  deadline=1764115200.1234, waiting=[1])
    back = Abort.from_dict(json.loads(json.dumps(abort.to_dict())))
    assert back == abort
    assert back.kind is AbortKind.HANG and sorted(back.ranks) == [0, 2]


def test_the_kind_is_checked_and_reads_as_its_word():
    assert Abort("crash", 1, "setup", {}).kind is AbortKind.CRASH
    assert "%s" % AbortKind.SETUP_FAILED == "setup_failed"
    assert AbortKind.INTERRUPTED == "interrupted"
    with pytest.raises(ValueError):
        Abort("exploded", 0, "setup", {})
    with pytest.raises(ValueError, match="no field colour"):
        Abort.from_dict(dict(Abort("hang", 0, "setup", {}).to_dict(), colour="red"))


def test_the_reports_summary_of_an_abort():
    abort = Abort(AbortKind.HANG, 3, "probe:fsdp", {}, waited_s=5.0, stop_s=0.25,
                  deadline=12.34567)
    assert abort.summary() == {"kind": "hang", "root_rank": 3, "phase": "probe:fsdp",
                               "waited_s": 5.0, "stop_s": 0.25, "deadline": 12.346}
    assert json.dumps(abort.summary()["kind"]) == '"hang"'

"""The DCP adapter against the call shapes of older torch releases.

Only one torch is installed here, so the older shapes are fake ``dcp`` modules whose
functions have the signatures of those releases (read from the installed wheels of
torch 2.0.1 and 2.2.2 from PyPI): the adapter must pick each call by what the function accepts,
not by which names exist (2.2 has ``dcp.save`` without ``checkpoint_id``; picking the
2.3+ call there failed every DCP check with "save() got an unexpected keyword argument
'checkpoint_id'"). The real torch's module is checked too.
"""

import types

import pytest
import torch

from envcheck.probes.shared.dcp import Dcp, DcpFailed, DcpMissing

# Signatures as in each release's torch/distributed/checkpoint/state_dict_{saver,loader}.py
# (annotations left out). 2.0 and 2.1: only the legacy names.
SHAPE_2_0 = '''
def save_state_dict(state_dict, storage_writer, process_group=None, coordinator_rank=0,
                    no_dist=False, planner=None):
    calls.append(("save_state_dict", (state_dict, storage_writer), dict(
        process_group=process_group, coordinator_rank=coordinator_rank, no_dist=no_dist,
        planner=planner)))

def load_state_dict(state_dict, storage_reader, process_group=None, coordinator_rank=0,
                    no_dist=False, planner=None):
    calls.append(("load_state_dict", (state_dict, storage_reader), dict(
        process_group=process_group, coordinator_rank=coordinator_rank, no_dist=no_dist,
        planner=planner)))
'''

# 2.2: dcp.save/dcp.load arrive with the storage writer/reader (positional or keyword),
# the rest keyword-only, and no checkpoint_id; the legacy names stay (deprecated).
SHAPE_2_2 = SHAPE_2_0 + '''
def save(state_dict, storage_writer, *, process_group=None, coordinator_rank=0,
         no_dist=False, planner=None):
    calls.append(("save", (state_dict,), dict(storage_writer=storage_writer,
                                              process_group=process_group, no_dist=no_dist)))

def load(state_dict, storage_reader, *, process_group=None, coordinator_rank=0,
         no_dist=False, planner=None):
    calls.append(("load", (state_dict,), dict(storage_reader=storage_reader,
                                              process_group=process_group, no_dist=no_dist)))
'''

# 2.13 (this venv's torch): checkpoint_id, no_dist on load, async_save.
SHAPE_2_13 = SHAPE_2_0 + '''
def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None,
         process_group=None, no_dist=False, use_collectives=True):
    calls.append(("save", (state_dict,), dict(checkpoint_id=checkpoint_id,
                                              process_group=process_group)))

def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None,
         process_group=None, no_dist=False):
    calls.append(("load", (state_dict,), dict(checkpoint_id=checkpoint_id,
                                              process_group=process_group, no_dist=no_dist)))

def async_save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None,
               process_group=None):
    calls.append(("async_save", (state_dict,), dict(checkpoint_id=checkpoint_id,
                                                    process_group=process_group)))
    return Done()
'''


class FileSystemWriter:
    def __init__(self, path):
        self.path = path

    def __eq__(self, other):
        return type(other) is type(self) and other.path == self.path


class FileSystemReader(FileSystemWriter):
    pass


class Done:
    def result(self, timeout=None):
        return None


def fake_dcp(source):
    module = types.ModuleType("fake_dcp")
    module.calls = []
    module.FileSystemWriter = FileSystemWriter
    module.FileSystemReader = FileSystemReader
    module.Done = Done
    exec(source, module.__dict__)
    return module


STATE = {"w": 1}


def test_torch_2_0_and_2_1_use_save_state_dict_with_a_writer():
    dcp = fake_dcp(SHAPE_2_0)
    adapter = Dcp(torch, dcp)
    adapter.save(STATE, "/ckpt")
    adapter.load(STATE, "/ckpt")
    assert [(name, args) for name, args, _ in dcp.calls] == [
        ("save_state_dict", (STATE, FileSystemWriter("/ckpt"))),
        ("load_state_dict", (STATE, FileSystemReader("/ckpt")))]
    assert adapter.api == ("dcp.save_state_dict + FileSystemWriter/"
                           "dcp.load_state_dict + FileSystemReader")
    assert adapter.load_alone(STATE, "/ckpt") == "dcp.load_state_dict(no_dist=True)"
    assert dcp.calls[-1][2]["no_dist"] is True
    assert not adapter.has_async_save
    with pytest.raises(DcpMissing, match="has no torch.distributed.checkpoint.async_save"):
        adapter.async_save(STATE, "/ckpt")


def test_torch_2_2_save_has_no_checkpoint_id_so_the_writer_goes_by_keyword():
    dcp = fake_dcp(SHAPE_2_2)
    adapter = Dcp(torch, dcp)
    adapter.save(STATE, "/ckpt")
    adapter.load(STATE, "/ckpt")
    assert dcp.calls == [
        ("save", (STATE,), dict(storage_writer=FileSystemWriter("/ckpt"), process_group=None,
                                no_dist=False)),
        ("load", (STATE,), dict(storage_reader=FileSystemReader("/ckpt"), process_group=None,
                                no_dist=False))]
    assert adapter.api == ("dcp.save(storage_writer=FileSystemWriter)/"
                           "dcp.load(storage_reader=FileSystemReader)")
    assert not adapter.modern
    # 2.2's dcp.load takes no_dist itself.
    assert adapter.load_alone(STATE, "/ckpt") == "dcp.load(no_dist=True)"
    assert dcp.calls[-1] == ("load", (STATE,), dict(storage_reader=FileSystemReader("/ckpt"),
                                                    process_group=None, no_dist=True))


def test_torch_2_3_and_later_use_checkpoint_id():
    dcp = fake_dcp(SHAPE_2_13)
    adapter = Dcp(torch, dcp)
    adapter.save(STATE, "/ckpt")
    adapter.async_save(STATE, "/ckpt").result()
    assert dcp.calls == [
        ("save", (STATE,), dict(checkpoint_id="/ckpt", process_group=None)),
        ("async_save", (STATE,), dict(checkpoint_id="/ckpt", process_group=None))]
    assert adapter.modern and adapter.api == "dcp.save/dcp.load"
    assert adapter.load_alone(STATE, "/ckpt") == "dcp.load(no_dist=True)"
    assert dcp.calls[-1] == ("load", (STATE,), dict(checkpoint_id="/ckpt",
                                                    process_group=None, no_dist=True))


def test_the_installed_torch_is_read_the_same_way():
    adapter = Dcp(torch)
    assert adapter.modern
    assert adapter.api == "dcp.save/dcp.load"


def test_a_checkpoint_exception_names_each_ranks_own_error():
    """torch's CheckpointException is a BaseException whose message names only the
    ranks; the adapter says what failed on each."""
    from torch.distributed.checkpoint.api import CheckpointException, _wrap_exception

    try:
        raise KeyError("rank1")
    except KeyError as exc:
        wrapped = _wrap_exception(exc)
    dcp = fake_dcp(SHAPE_2_0)

    def failing(*args, **kwargs):
        raise CheckpointException("CheckpointException ranks:dict_keys([1])", {1: wrapped})

    dcp.load_state_dict = failing
    adapter = Dcp(torch, dcp)
    with pytest.raises(DcpFailed) as info:
        adapter.load(STATE, "/ckpt")
    assert str(info.value) == ("dcp.load_state_dict raised CheckpointException on 1 "
                               "rank(s): rank 1: KeyError: 'rank1'")
    assert isinstance(info.value.__cause__, CheckpointException)


def test_no_usable_call_is_said_as_missing():
    dcp = fake_dcp("def save(state_dict, *, path):\n    pass\n")
    with pytest.raises(DcpMissing, match=r"dcp\.save takes neither checkpoint_id nor "
                                         r"storage_writer, and there is no save_state_dict"):
        Dcp(torch, dcp)

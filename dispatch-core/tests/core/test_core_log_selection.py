"""``LogSelection``: a request for output is checked once, when it is made, in the core
(S-46); every backend receives it valid, narrowed to one submission of one job."""

from __future__ import annotations

import dataclasses

import pytest
from dispatch import BadInput, LogSelection, Stream


def test_a_selection_is_frozen_and_takes_the_stream_by_name_S46() -> None:
    chosen = LogSelection(stream="stderr", rank=1, tail=5)  # type: ignore[arg-type]
    assert chosen.stream is Stream.STDERR
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.rank = 2  # type: ignore[misc]
    one = chosen.of("job-1", 3, offset=10)
    assert (one.job_id, one.submission, one.offset, one.rank, one.tail) == ("job-1", 3, 10, 1, 5)
    assert chosen.job_id is None and chosen.offset == 0  # the original is unchanged


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"stream": "both"}, "stream 'both': give stdout or stderr"),
        ({"node": "n1", "rank": 0}, "give --node or --rank, not both"),
        ({"rank": -1}, "rank -1: give a rank, 0 or more"),
        ({"rank": True}, "rank True: give a rank"),
        ({"node": ""}, "node: give a node name"),
        ({"tail": -3}, "tail -3: give a number of lines"),
        ({"submission": 0}, "submission 0: give a submission number, 1 or more"),
        ({"offset": -1}, "offset -1: give a number of bytes"),
    ],
)
def test_a_bad_selection_is_refused_when_made_S46(fields: dict[str, object], words: str) -> None:
    with pytest.raises(BadInput, match=words.replace("(", r"\(")):
        LogSelection(**fields)  # type: ignore[arg-type]

"""The sweep grammar, its expansion and placeholders (dispatch.sweep), and the group on the
record: pure, no backend."""

from __future__ import annotations

import json

import pytest
from dispatch.model.errors import BadInput
from dispatch.model.events import JobCreated, decode_event, encode_event
from dispatch.sweep import (
    MAX_MEMBERS,
    check_grid,
    check_uses,
    expand,
    group_of,
    index_of,
    member_id,
    new_group_id,
    parse,
    substitute,
)

from conftest import Events


def test_lists_and_ranges_in_the_order_written() -> None:
    grid = parse("lr=[1e-3, 3e-4],seed=1..3,opt=[adam]")
    assert grid == {"lr": ("1e-3", "3e-4"), "seed": ("1", "2", "3"), "opt": ("adam",)}
    assert parse("n=-2..1") == {"n": ("-2", "-1", "0", "1")}


def test_the_cross_product_varies_the_last_key_fastest() -> None:
    members = expand(parse("lr=[a,b],seed=1..2"))
    assert [(m.index, m.values) for m in members] == [
        (0, {"lr": "a", "seed": "1"}),
        (1, {"lr": "a", "seed": "2"}),
        (2, {"lr": "b", "seed": "1"}),
        (3, {"lr": "b", "seed": "2"}),
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "at character 1: expected a key"),
        ("lr", "at character 3: expected '=' after the key 'lr'"),
        ("lr=", "at character 4: expected a list"),
        ("lr=[1,2", "at character 4: a list opened with '[' is never closed"),
        ("lr=[1,,2]", "at character 7: an empty value in the list of 'lr'"),
        ("lr=[]", "at character 5: an empty value"),
        ("lr=[1]seed=1..2", "at character 7: expected ','"),
        ("lr=[1],", "at character 8: expected a key"),
        ("seed=4..1", "at character 6: the range 4..1 of 'seed' runs backwards"),
        ("seed=1..x", "at character 6: expected a list [v1,v2,...] or a range"),
        ("lr=[1],LR=[2]", "at character 8: the key 'LR' is given twice"),
        ("1x=[1]", "at character 1: expected a key"),
        ("a=[x{y]", "holds a bracket or brace"),
    ],
)
def test_a_bad_grid_names_the_character(text: str, words: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse(text)
    assert words in str(caught.value)


def test_at_most_ten_thousand_members() -> None:
    assert len(expand(parse("a=1..100,b=1..100"))) == MAX_MEMBERS
    with pytest.raises(BadInput, match="10001 members; at most 10000"):
        parse("a=1..10001")
    with pytest.raises(BadInput, match="20000 members; at most 10000"):
        parse("a=1..100,b=1..100,c=[x,y]")
    with pytest.raises(BadInput, match="at most 10000"):
        check_grid({"a": range(10_001)})


def test_a_mapping_grid_keeps_values_as_text() -> None:
    assert check_grid({"lr": [1e-3, 3e-4], "seed": range(1, 3), "opt": ["adam"]}) == {
        "lr": ("0.001", "0.0003"),
        "seed": ("1", "2"),
        "opt": ("adam",),
    }
    for bad, words in [
        ({}, "at least one key"),
        ({"lr": []}, "is empty"),
        ({"lr": "abc"}, "give a list"),
        ({"1x": [1]}, "letters, digits"),
        ({"lr": [True]}, "not a string or a number"),
        ({"lr": [1], "LR": [2]}, "given twice"),
    ]:
        with pytest.raises(BadInput, match=words):
            check_grid(bad)  # type: ignore[arg-type]


def test_placeholders_are_keys_and_every_key_is_used() -> None:
    grid = parse("lr=[1],seed=1..2")
    check_uses(grid, ("train", "--lr", "{lr}"), "run-{seed}")
    with pytest.raises(BadInput, match=r"command word 2 uses \{lrr\}"):
        check_uses(grid, ("train", "{lrr}", "{seed}", "{lr}"), None)
    with pytest.raises(BadInput, match=r"never used: put \{seed\}"):
        check_uses(grid, ("train", "{lr}"), "run")
    with pytest.raises(BadInput, match=r"not a \{key\} placeholder"):
        check_uses(grid, ("train", "{lr}", "{}", "{seed}"), None)
    check_uses(grid, ("sh", "-c", "echo {{}} {lr} {seed}"), None)


def test_substitute_replaces_keys_and_unescapes_braces() -> None:
    values = {"lr": "1e-3", "seed": "2"}
    assert substitute("--lr={lr}/{seed}", values) == "--lr=1e-3/2"
    assert substitute('{{"lr": {lr}}}', values) == '{"lr": 1e-3}'


def test_member_ids_name_their_group_and_index() -> None:
    group = new_group_id()
    assert group_of(member_id(group, 12)) == group and index_of(member_id(group, 12)) == 12
    assert group_of("j0123456789ab") is None and index_of("j0123456789ab") == -1
    assert group_of(f"{group}-x") is None


def test_a_record_written_before_sweeps_decodes_without_a_group() -> None:
    created = Events().created("old-job")
    body = json.loads(encode_event(created))
    body.pop("group")
    old = decode_event(json.dumps(body))
    assert isinstance(old, JobCreated) and old.group is None


def test_a_member_round_trips_with_its_group() -> None:
    from dispatch.model.events import Group

    created = (
        Events()
        .created("g0123456789ab-3")
        .model_copy(
            update={"group": Group(id="g0123456789ab", index=3, size=8, values={"lr": "1e-3"})}
        )
    )
    back = decode_event(encode_event(created))
    assert isinstance(back, JobCreated) and back.group == created.group
    body = json.loads(encode_event(created))
    body["group"]["max_running"] = 0
    with pytest.raises(Exception, match="max_running"):
        decode_event(json.dumps(body))

"""``backends/vulkan/pipeline_keys.py``: the list of pipelines kept in a compilation cache
(``vulkan/pipeline-keys``) round-trips ``Pipelines.get``'s keys exactly, and anything it could
not have written is dropped, never raised."""

from __future__ import annotations

import json

from mnnpy.backends.vulkan.pipeline_keys import MAX_KEYS, decode, encode

VARIANTS = frozenset({"conv_general", "binary_add", "unary_relu_f16"})
KEYS = [
    ("conv_general", 4, 68, ((0, 64), (1, True), (20, False))),
    ("binary_add", 3, 116, ((0, 64), (1, False))),
    ("unary_relu_f16", 2, 12, ((0, 64), (1, 0.5), (2, -3.25), (20, True))),
    ("binary_add", 3, 116, ()),
]


def test_keys_round_trip_with_their_value_types():
    got = decode(encode(KEYS), VARIANTS)
    assert got == KEYS
    assert [type(v) for _, v in got[2][3]] == [int, float, float, bool]  # a bool stays a bool (VkBool32 vs uint)
    assert {k: 1 for k in got}.keys() == {k: 1 for k in KEYS}.keys()  # usable as the same dict keys


def test_unknown_variants_and_malformed_keys_are_dropped():
    good = json.loads(encode(KEYS[:1]))[0]
    items = [
        good,
        ["no_such_variant", 2, 12, []],
        ["binary_add", -1, 12, []],
        ["binary_add", 3, 100000, []],
        ["binary_add", "3", 12, []],
        ["binary_add", 3, 12, [[0, "x"]]],
        ["binary_add", 3, 12, [[0, 1, 2]]],
        ["binary_add", 3, 12],
        "binary_add",
        None,
    ]
    assert decode(json.dumps(items).encode(), VARIANTS) == KEYS[:1]


def test_payloads_that_are_no_key_list_give_none():
    for payload in (b"", b"\xff\xfe", b"{}", b"[1, 2", b'{"a": 1}', b"null", json.dumps("x").encode()):
        assert decode(payload, VARIANTS) == []


def test_at_most_max_keys_are_read():
    many = [("binary_add", 3, 116, ((0, k),)) for k in range(MAX_KEYS + 5)]
    assert len(decode(encode(many), VARIANTS)) == MAX_KEYS

import pytest

from sunk.hostlist import compress, expand


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([f"gpu-{i:03d}" for i in range(1, 129)], "gpu-[001-128]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10", "n11"], "n[09-11]"),
        (["n010", "n10"], "n10,n010"),
        ([f"gb200-{i}" for i in range(18)], "gb200-[0-17]"),
        (["x-0", "x-1", "x-3", "a"], "a,x-[0-1,3]"),
        (["solo"], "solo"),
        (["cpu-1", "cpu-1"], "cpu-1"),
        (["b-2", "a-1", "a-2"], "a-[1-2],b-2"),
    ],
)
def test_compress(names: list[str], expected: str) -> None:
    assert compress(names) == expected


@pytest.mark.parametrize(
    "names",
    [
        [f"h100-{i}" for i in (0, 1, 2, 5, 7, 8, 9, 100)],
        ["n010", "n10", "n9", "n09", "n0", "x"],
        [f"gpu-{i:03d}" for i in range(0, 300, 7)] + [f"gpu-{i}" for i in range(5)],
    ],
)
def test_round_trip_keeps_every_name(names: list[str]) -> None:
    assert sorted(expand(compress(names))) == sorted(set(names))


def test_expand_lists() -> None:
    assert expand("n[09-11],a,b[1,3-4]") == ["n09", "n10", "n11", "a", "b1", "b3", "b4"]

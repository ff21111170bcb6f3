import pytest

from sunk.hostlist import compress, expand


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([f"gpu-{i:03d}" for i in range(1, 129)], "gpu-[001-128]"),
        (["n9", "n10", "n11"], "n9,n[10-11]"),
        (["x-0", "x-1", "x-3", "a"], "a,x-[0-1,3]"),
        (["solo"], "solo"),
        (["cpu-1", "cpu-1"], "cpu-1"),
        (["b-2", "a-1", "a-2"], "a-[1-2],b-2"),
    ],
)
def test_compress(names: list[str], expected: str) -> None:
    assert compress(names) == expected


def test_round_trip_keeps_every_name() -> None:
    names = [f"h100-{i}" for i in (0, 1, 2, 5, 7, 8, 9, 100)]
    assert sorted(expand(compress(names))) == sorted(names)


def test_expand_lists() -> None:
    assert expand("n[09-11],a,b[1,3-4]") == ["n09", "n10", "n11", "a", "b1", "b3", "b4"]

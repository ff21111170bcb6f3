"""sunk.naming.config_file_map: one deterministic, valid and unique ConfigMap name per Slurm file."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from sunk import naming
from sunk.render import render_slurm_files
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[1]
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def valid(name: str) -> bool:
    return len(name) <= 253 and SUBDOMAIN.fullmatch(name) is not None


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("slurm.conf", "c-slurm-conf"),
        ("gres.conf", "c-gres-conf"),
        ("gres-gpu.conf", "c-gres-gpu-conf"),
        ("slurmdbd.conf", "c-slurmdbd-conf"),
        ("accounting-setup.sh", "c-accounting-setup-sh"),
        ("job_submit.lua", "c-job-submit-lua"),
        ("prolog.d/00-mark.sh", "c-prolog-00-mark-sh"),
        ("epilog.d/99-clean.sh", "c-epilog-99-clean-sh"),
    ],
)
def test_sunk_files_get_plain_names(path: str, name: str) -> None:
    assert naming.config_file_map("c", path) == name


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("a_b", "a-b"),
        ("prolog.d/a_b.sh", "prolog.d/a-b.sh"),
        ("prolog.d/00.mark.sh", "prolog.d/00-mark.sh"),
        ("prolog.d/Mark.sh", "prolog.d/mark.sh"),
        ("prolog-x.sh", "prolog.d/x.sh"),
        ("x-sh", "x.sh"),
        ("job-submit.lua", "job_submit.lua"),
        ("prolog.d/prolog-x.sh", "prolog-prolog-x.sh"),  # neither is what the slug reads back
    ],
)
def test_paths_with_one_slug_get_different_names(a: str, b: str) -> None:
    name_a, name_b = naming.config_file_map("c", a), naming.config_file_map("c", b)
    assert name_a != name_b
    # Both keep the slug; the first (at least) adds a hash of its path after the '.' no plain name has.
    assert "." in name_a
    assert name_a.split(".")[0] == name_b.split(".")[0]


def test_names_are_unique_valid_and_stable_over_many_colliding_paths() -> None:
    """Every path built from a few words and every separator the slug folds into '-'."""
    words, seps = ["a", "B", "00", "sh"], ["-", "_", ".", "/", "--", " "]
    paths = {""}
    for n in (1, 2, 3):
        for parts in itertools.product(words, repeat=n):
            for joins in itertools.product(seps, repeat=n - 1):
                body = parts[0] + "".join(j + p for j, p in zip(joins, parts[1:], strict=True))
                paths |= {body, f"prolog.d/{body}", f"epilog.d/{body}", f"prolog-{body}"}
    names = {p: naming.config_file_map("tenant-a", p) for p in paths}
    assert len(set(names.values())) == len(paths)
    assert all(valid(n) for n in names.values()), [n for n in names.values() if not valid(n)]
    assert names == {p: naming.config_file_map("tenant-a", p) for p in paths}
    # Plain names never clash with the cluster's one-word objects (`<cluster>-topology`, -login).
    assert not {"tenant-a-topology", "tenant-a-login", "tenant-a-dashboard"} & set(names.values())


def test_long_paths_are_cut_to_253_and_stay_unique() -> None:
    cluster = "x" * 30
    a, b = "prolog.d/" + "a" * 300 + ".sh", "prolog.d/" + "a" * 300 + ".bash"
    names = [naming.config_file_map(cluster, p) for p in (a, b)]
    assert names[0] != names[1] and all(len(n) == 253 and valid(n) for n in names)
    fits = "b" * (253 - len(cluster) - 1 - len("-conf")) + ".conf"
    assert naming.config_file_map(cluster, fits) == f"{cluster}-{fits.replace('.', '-')}"
    assert "." in naming.config_file_map(cluster, "b" + fits)  # one more character: cut, so hashed


def test_every_rendered_file_of_every_stack_has_a_plain_name() -> None:
    for stack in list_stacks(FIXTURE_STACKS):
        spec = load_stack(stack, FIXTURE_STACKS).spec
        files = render_slurm_files(spec)
        names = {naming.config_file_map(spec.name, p) for p in files}
        assert len(names) == len(files)
        assert all(valid(n) and "." not in n for n in names), stack


def test_key_is_the_file_name_and_cluster_must_be_a_label() -> None:
    assert naming.config_file_key("prolog.d/00-mark.sh") == "00-mark.sh"
    assert naming.config_file_key("slurm.conf") == "slurm.conf"
    with pytest.raises(ValueError, match="DNS-1123 label"):
        naming.config_file_map("a.b", "slurm.conf")

"""The runtime config written beside a root taken from its built layer: the process umoci would
give the image (user from the image's own accounts, arguments, environment, folder). Pure; the
comparison with umoci on real images is in test_images.py. And the move of what pip staged
beside apt into the image's site-packages."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.runtime.images.build import move_into
from sunk.runtime.images.bundle import ConfigError, environment, runtime_config, user_of

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n"
    "broken line\n"
)
GROUP = "root:x:0:\nslurm:x:64030:\nvideo:x:44:slurm\n"
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("slurm", (64030, 64030, "/nonexistent")),
        ("", (0, 0, "/root")),
        ("65534", (65534, 65534, "/nonexistent")),
        ("4242", (4242, 0, "/")),  # an id the image has no account for: group 0, home /
        ("slurm:video", (64030, 44, "/nonexistent")),
        ("0:7", (0, 7, "/root")),
    ],
)
def test_the_user_is_resolved_in_the_images_own_accounts(spec: str, expected: tuple[int, int, str]) -> None:
    assert user_of(spec, PASSWD, GROUP) == expected


def test_a_user_or_group_the_image_lacks_is_named() -> None:
    with pytest.raises(ConfigError, match="image User 'munge' is not in the image's /etc/passwd"):
        user_of("munge", PASSWD, GROUP)
    with pytest.raises(ConfigError, match="image User group 'render' is not in the image's /etc/group"):
        user_of("slurm:render", PASSWD, GROUP)


def test_the_environment_is_the_defaults_then_the_images_then_home() -> None:
    assert environment(["SLURM_JWT=daemon"], "/nonexistent") == [
        PATH,
        "TERM=xterm",
        "SLURM_JWT=daemon",
        "HOME=/nonexistent",
    ]
    # a key the image sets replaces the default where it stands; an image's HOME is kept
    assert environment(["TERM=dumb", "HOME=/srv", "PATH=/opt/bin"], "/root") == [
        "PATH=/opt/bin",
        "TERM=dumb",
        "HOME=/srv",
    ]


def test_the_config_runs_entrypoint_then_cmd_as_the_images_user() -> None:
    image = {
        "architecture": "amd64",
        "config": {
            "User": "nobody",
            "Env": ["SLURM_JWT=daemon"],
            "Entrypoint": ["/usr/local/bin/start"],
            "Cmd": ["slurmrestd", "-a", "rest_auth/jwt"],
            "WorkingDir": "/var/spool",
            "Labels": {"b": "2", "a": "1"},
        },
    }
    config = runtime_config(image, PASSWD, GROUP)
    assert config["process"] == {
        "terminal": False,
        "user": {"uid": 65534, "gid": 65534},
        "args": ["/usr/local/bin/start", "slurmrestd", "-a", "rest_auth/jwt"],
        "env": [PATH, "TERM=xterm", "SLURM_JWT=daemon", "HOME=/nonexistent"],
        "cwd": "/var/spool",
    }
    assert config["root"] == {"path": "rootfs"}
    assert config["annotations"] == {"a": "1", "b": "2"}


def test_an_image_without_a_config_runs_as_root_in_the_top_folder() -> None:
    config = runtime_config({}, PASSWD, GROUP)
    assert config["process"] == {
        "terminal": False,
        "user": {"uid": 0, "gid": 0},
        "args": [],
        "env": [PATH, "TERM=xterm", "HOME=/root"],
        "cwd": "/",
    }


def test_what_pip_staged_is_moved_into_the_images_site_packages_merging_folders(tmp_path: Path) -> None:
    """The layer's pip install runs beside apt into a staging folder; its content then joins the
    image's site-packages, which apt (or the layer below) may have made already."""
    stage, site = tmp_path / "stage", tmp_path / "root" / "usr/local/lib/python3.14/dist-packages"
    (stage / "sunk" / "runtime").mkdir(parents=True)
    (stage / "sunk" / "runtime" / "loop.py").write_text("new")
    (stage / "sunk-0.1.0.dist-info").mkdir()
    (stage / "sunk-0.1.0.dist-info" / "RECORD").write_text("r")
    (site / "sunk").mkdir(parents=True)
    (site / "sunk" / "old.py").write_text("kept")
    (site / "msgspec").mkdir()
    move_into(stage, site)
    assert sorted(str(p.relative_to(site)) for p in site.rglob("*")) == [
        "msgspec",
        "sunk",
        "sunk-0.1.0.dist-info",
        "sunk-0.1.0.dist-info/RECORD",
        "sunk/old.py",
        "sunk/runtime",
        "sunk/runtime/loop.py",
    ]
    assert not [p for p in stage.rglob("*") if p.is_file()]  # every file moved, none copied
    move_into(stage, tmp_path / "fresh" / "site")  # a site-packages not there yet is made
    assert (tmp_path / "fresh" / "site").is_dir()

"""The public API (sunk.api): one place to import from, every name that programs use, and an
import that works with the core install alone (no Pulumi)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

import sunk.api

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = [
    "Accounting",
    "Auth",
    "ClusterSpec",
    "Controller",
    "GpuSpec",
    "Image",
    "KeyGenerator",
    "Login",
    "Monitoring",
    "NetworkPolicies",
    "NodeSetResourceSpec",
    "NodeSetSpec",
    "NodeSetStatus",
    "NodeSets",
    "Operator",
    "OperatorSpec",
    "PartitionSpec",
    "QosSpec",
    "Resources",
    "RestApi",
    "Runtime",
    "SecretRef",
    "SlurmCluster",
    "SlurmConfig",
    "SpecError",
    "TenantPolicy",
    "TopologySpec",
    "Webhook",
    "keys",
    "late",
    "load_spec",
    "stack_program",
]
"""Programs import these. Removing or renaming one breaks them: keep the old name as a deprecated
alias for a release instead, and add the new one here."""


def test_the_public_names_are_all_still_there() -> None:
    assert sorted(sunk.api.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(sunk.api, name) is not None, name
    assert set(PUBLIC) <= set(dir(sunk.api))


def test_the_lazy_names_are_the_table_of_parts_and_what_type_checkers_read() -> None:
    """sunk.api and sunk.components take the component names from the table of the cluster's
    parts (sunk.manifests.parts); type checkers can read only literal imports, so the package's
    TYPE_CHECKING block is held equal to them here (a component added to the table and missing
    there would type-check as an unknown name)."""
    import ast

    import sunk.components

    from sunk.manifests.parts import components

    assert sorted(sunk.api.PULUMI_BOUND) == sorted(sunk.components.__all__)
    assert set(components()) | {"late", "stack_program"} == set(sunk.components.__all__)
    tree = ast.parse((ROOT / "components" / "__init__.py").read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    typed = {
        (a.asname, imp.module)
        for imp in block.body
        if isinstance(imp, ast.ImportFrom)
        for a in imp.names
        if a.asname == a.name
    }
    assert typed == {(name, module) for name, module in sunk.components._WHERE.items()}


def test_each_public_name_is_the_object_its_home_module_defines() -> None:
    from sunk.components import Controller, Operator, late

    from sunk import keys
    from sunk.nodeset_resource import NodeSetResourceSpec
    from sunk.spec.cluster import ClusterSpec
    from sunk.spec.operator import OperatorSpec, TenantPolicy

    assert sunk.api.ClusterSpec is ClusterSpec and sunk.api.OperatorSpec is OperatorSpec
    assert sunk.api.TenantPolicy is TenantPolicy and sunk.api.NodeSetResourceSpec is NodeSetResourceSpec
    assert sunk.api.keys is keys and sunk.api.late is late
    assert sunk.api.Controller is Controller and sunk.api.Operator is Operator


def test_the_operator_models_old_homes_still_import() -> None:
    """OperatorSpec and TenantPolicy moved to sunk.spec.operator; a program that imported them from
    their old modules keeps working for one release, warned (sunk.api is the public surface)."""
    import sunk.manifests.operator
    import sunk.policy

    with pytest.warns(DeprecationWarning, match="import OperatorSpec from sunk.api"):
        assert sunk.manifests.operator.OperatorSpec is sunk.api.OperatorSpec
    with pytest.warns(DeprecationWarning, match="import TenantPolicy from sunk.api"):
        assert sunk.policy.TenantPolicy is sunk.api.TenantPolicy
    with pytest.raises(AttributeError):
        _ = sunk.policy.NoSuchName


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'ControlPlane'"):
        sunk.api.ControlPlane  # noqa: B018  (the deprecated names live in sunk.components only)


def test_the_named_extra_is_the_one_that_installs_pulumi() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extra = sunk.api.PULUMI_EXTRA.removeprefix("sunk[").removesuffix("]")
    assert any(req.startswith("pulumi>") for req in extras[extra])


WITHOUT_PULUMI = """
import importlib.abc, sys

class NoPulumi(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("pulumi"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPulumi())
import sunk.api
from sunk.api import ClusterSpec, OperatorSpec, TenantPolicy, keys
assert ClusterSpec.__name__ == "ClusterSpec" and keys.CLUSTER
assert not [m for m in sys.modules if m.startswith("pulumi")], "importing sunk.api loaded Pulumi"
for name in sys.argv[1:]:
    try:
        getattr(sunk.api, name)
    except ImportError as err:
        print(f"{name}: {err}")
    else:
        print(f"{name}: loaded")
try:
    from sunk.api import SlurmCluster
except ImportError as err:
    print(f"from-import: {err}")
"""


def test_the_core_install_imports_the_public_module_and_names_the_extra() -> None:
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_PULUMI, "late", "Operator", "Controller"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 4, run.stdout
    for line, name in zip(lines, ["late", "Operator", "Controller", "from-import"], strict=True):
        assert line.startswith(f"{name}: "), line
        assert "pip install 'sunk[pulumi]'" in line and "pulumi" in line.split(": ", 1)[1], line
    assert "sunk.api.late needs Pulumi" in lines[0]
    assert "sunk.api.SlurmCluster needs Pulumi" in lines[3]


@pytest.mark.parametrize(("old", "new"), [("ControlPlane", "Controller"), ("SunkOperator", "Operator")])
def test_the_earlier_component_names_warn_and_give_the_renamed_class(old: str, new: str) -> None:
    import sunk.components

    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: use {new}"):
        cls = getattr(sunk.components, old)
    assert cls is getattr(sunk.api, new)
    assert old not in sunk.components.__all__


def test_the_earlier_module_of_slurmctld_warns_and_gives_controller() -> None:
    from sunk.components import controlplane

    with pytest.warns(DeprecationWarning, match="use sunk.components.Controller"):
        cls = controlplane.ControlPlane
    assert cls is sunk.api.Controller


def test_the_current_names_do_not_warn() -> None:
    import sunk.components

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sunk.components.Controller is sunk.api.Controller
        assert sunk.components.Operator is sunk.api.Operator

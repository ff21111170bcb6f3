"""A resource's URN is its identity in a user's stack: the type tokens and names of the resource
and of every component above it. When a URN changes and no alias names the old one, `pulumi up`
plans a delete and a create (and the protected state PVCs then block the whole update).

- tests/golden/urns/ holds the URNs each program registers, as the engine writes them, so that
  any change to one is deliberate (rerun with --update-golden and review the diff).
- tests/golden/released-urns/ holds the URNs of the last release. Every one of them must still be
  reached: by a resource that has that URN today, or through the aliases the engine would derive
  (a component's own aliases, and those its children inherit from it). Drop a file's line only
  when the release that registered it is out of support.

The mock engine qualifies a type by its parent's type alone; the real engine by the whole chain
of component types above it (which is what a renamed component in the middle changes), so the
URNs here are rebuilt from the registrations as the engine builds them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from sunk.components.offline import AliasSpec, Evaluation, Registration

from .conftest import LIBRARY, STACKS

GOLDEN_PROGRAMS = (*STACKS, LIBRARY)
"""Every stack (acme-dev and acme-prod also install the operator) and a platform's own program
(its provider, a Namespace it makes, no login)."""
RELEASED = Path(__file__).resolve().parents[1] / "golden" / "released-urns"


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def _name(urn: str) -> str:
    return urn.split("::", 3)[3]


def _urn(ev: Evaluation, parent: str, type_: str, name: str) -> str:
    """The engine's URN: a child's type is qualified by its parent's whole type chain; a
    resource whose parent is the stack has its type alone."""
    qualified = type_ if not parent else f"{_qualified_type(parent)}${type_}"
    return f"urn:pulumi:{ev.stack}::{ev.project}::{qualified}::{name}"


class EngineView:
    """Each registration's URN and alias URNs as the engine derives them."""

    def __init__(self, ev: Evaluation) -> None:
        self.ev = ev
        self.by_mock_urn = {r.urn: r for r in ev.registrations}
        self.urn: dict[str, str] = {}
        """mock URN -> engine URN."""
        self.aliases: dict[str, set[str]] = {}
        """engine URN -> the engine URNs it also answers to."""
        for r in ev.registrations:  # registration order: a parent before its children
            parent = self.by_mock_urn.get(r.parent)
            parent_urn = self.urn[parent.urn] if parent is not None else ""
            urn = _urn(ev, parent_urn, r.type, r.name)
            self.urn[r.urn] = urn
            self.aliases[urn] = self._aliases(r, parent, parent_urn)

    def _aliases(self, r: Registration, parent: Registration | None, parent_urn: str) -> set[str]:
        own: list[tuple[str, str, str]] = []  # (parent urn, type, name)
        out: set[str] = set()
        for alias in r.aliases:
            if alias.urn:
                out.add(alias.urn)
                continue
            where = "" if alias.no_parent else (self.urn.get(alias.parent, alias.parent) or parent_urn)
            own.append((where, alias.type or r.type, alias.name or r.name))
        out |= {_urn(self.ev, *parts) for parts in own}
        if parent is None:
            return out
        # A child inherits each alias of its parent; a name that starts with the parent's name
        # follows the parent's old name (Pulumi's inheritedChildAlias).
        for old_parent in self.aliases[parent_urn]:
            for _, type_, name in [(parent_urn, r.type, r.name), *own]:
                if name.startswith(parent.name):
                    name = _name(old_parent) + name[len(parent.name) :]
                out.add(_urn(self.ev, old_parent, type_, name))
        return out

    def urns(self) -> list[str]:
        return sorted(self.urn.values())


def _lines(urns: Iterable[str]) -> str:
    return "".join(f"{u}\n" for u in sorted(urns))


def test_the_registered_urns_match_the_golden(evaluations: dict[str, Evaluation], golden: Any) -> None:
    files = {}
    for program in GOLDEN_PROGRAMS:
        urns = EngineView(evaluations[program]).urns()
        assert len(set(urns)) == len(urns), f"{program}: two resources with one URN, which the engine refuses"
        files[f"{program}.txt"] = _lines(urns)
    golden("urns", files)


@pytest.mark.parametrize("program", GOLDEN_PROGRAMS)
def test_every_released_urn_is_still_reached(program: str, evaluations: dict[str, Evaluation]) -> None:
    view = EngineView(evaluations[program])
    released = (RELEASED / f"{program}.txt").read_text().split()
    answering: dict[str, list[str]] = {}
    for urn, aliases in view.aliases.items():
        for old in {urn, *aliases}:
            answering.setdefault(old, []).append(urn)
    lost = [u for u in released if u not in answering]
    assert not lost, f"{len(lost)} released URNs would be deleted and recreated, first: {lost[:3]}"
    shared = {u: answering[u] for u in released if len(answering[u]) > 1}
    assert not shared, f"a released URN is claimed by more than one resource: {shared}"


def test_the_engine_view_follows_a_renamed_parent_to_its_children() -> None:
    """The alias model itself: a component renamed in type and name, and its child whose name
    starts with the component's, reach their old URNs; a child named otherwise keeps its name."""
    stack = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"
    parent = Registration(
        urn="urn:pulumi:s::p::sunk:index:New::c-new",
        type="sunk:index:New",
        name="c-new",
        parent=stack,
        custom=False,
        inputs={},
        aliases=(AliasSpec(type="sunk:index:Old", name="c-old"),),
    )
    child = Registration(
        urn="urn:pulumi:s::p::sunk:index:New$k:Thing::c-new-state",
        type="k:Thing",
        name="c-new-state",
        parent=parent.urn,
        custom=True,
        inputs={},
    )
    other = Registration(
        urn="urn:pulumi:s::p::sunk:index:New$k:Thing::fixed",
        type="k:Thing",
        name="fixed",
        parent=parent.urn,
        custom=True,
        inputs={},
    )
    view = EngineView(Evaluation(project="p", stack="s", registrations=[parent, child, other]))
    assert view.aliases["urn:pulumi:s::p::sunk:index:New::c-new"] == {"urn:pulumi:s::p::sunk:index:Old::c-old"}
    assert view.aliases["urn:pulumi:s::p::sunk:index:New$k:Thing::c-new-state"] == {
        "urn:pulumi:s::p::sunk:index:Old$k:Thing::c-old-state"
    }
    assert view.aliases["urn:pulumi:s::p::sunk:index:New$k:Thing::fixed"] == {
        "urn:pulumi:s::p::sunk:index:Old$k:Thing::fixed"
    }


@pytest.mark.parametrize(
    ("program", "token", "earlier"),
    [
        ("acme-dev", "sunk:index:Controller", {AliasSpec(type="sunk:index:ControlPlane")}),
        ("acme-dev", "sunk:index:Operator", {AliasSpec(type="sunk:index:SunkOperator")}),
        ("library", "sunk:index:Operator", {AliasSpec(type="sunk:index:SunkOperator")}),
    ],
)
def test_a_renamed_component_carries_an_alias_to_its_earlier_type(
    program: str, token: str, earlier: set[AliasSpec], evaluations: dict[str, Evaluation]
) -> None:
    (component,) = [r for r in evaluations[program].registrations if r.type == token]
    assert earlier <= set(component.aliases)


def test_slurmctld_answers_to_its_earlier_name_and_type(evaluations: dict[str, Evaluation]) -> None:
    for program in GOLDEN_PROGRAMS:
        ev = evaluations[program]
        (cluster,) = [r for r in ev.registrations if r.type == "sunk:index:SlurmCluster"]
        (controller,) = [r for r in ev.registrations if r.type == "sunk:index:Controller"]
        assert controller.name == f"{cluster.name}-controller"
        assert AliasSpec(name=f"{cluster.name}-controlplane", type="sunk:index:ControlPlane") in controller.aliases

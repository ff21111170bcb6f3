"""The fuzzer's slots cover the schema: every field of every spec model is a place it writes, and
each sink the judges read (the Slurm files, the pods, sssd.conf) has slots of its own, the
governed ones among them (tests/fuzz/slots.py)."""

from __future__ import annotations

import random

from tests.fuzz.schema_stacks import draw_stack
from tests.fuzz.slots import AIM_GAIN, DEFS, aims, by_sink, slots


def test_every_field_of_every_model_is_a_slot() -> None:
    """A field added to a model is drawn without anyone listing it."""
    reached = {step for slot in slots() for step in slot.path}
    missing = [f"{name}.{field}" for name, model in DEFS.items() for field in model.get("properties", {})
               if field not in reached]  # fmt: skip
    assert not missing


def test_each_sink_the_judges_read_has_slots() -> None:
    groups = by_sink()
    assert {"slurm", "pod", "sssd"} <= set(groups)
    lines = [s for s in groups["slurm"][0] if ".".join(s.path) == "controller.extraSlurmConf.[]"]
    assert lines and lines[0].weight > min(groups["slurm"][1])  # a line sunk writes as given weighs more
    assert all(s.path[:2] == ("auth", "ldap") for s in groups["sssd"][0])


def test_the_slots_the_role_table_governs_weigh_most_in_the_pod_class() -> None:
    candidates, weights = by_sink()["pod"]
    governed = [s for s in candidates if s.weight >= AIM_GAIN]
    assert sum(s.weight for s in governed) > sum(weights) / 2
    assert any(s.path[-1] == "secretName" for s in governed)
    assert any("capabilities" in s.path for s in governed)
    assert not aims(("controller", "securityContext", "capabilities", "drop"), "io.k8s.api.core.v1.Capabilities")


def test_a_seed_replays_its_stacks() -> None:
    assert [draw_stack(random.Random(7)) for _ in range(3)] == [draw_stack(random.Random(7)) for _ in range(3)]

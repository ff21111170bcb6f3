"""LeaderWorkerSet's own keys that sunk's webhook does not read but the tests' pods carry, as
LeaderWorkerSet v0.10.0 defines them (kubernetes-sigs/lws, tag v0.10.0, commit 2161f38f,
api/leaderworkerset/v1/leaderworkerset_types.go, line of each below). The keys sunk reads (group
key, size, set name, worker index, subgroup keys) are runtime/webhook/gangs.py's."""

GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
"""GroupIndexLabelKey (41): the group's index, on the leader (LWS's pod webhook) and the workers."""
LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
"""LeaderPodNameAnnotationKey (60): on the workers, their leader pod's name."""
REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
"""RevisionKey (63): the LeaderWorkerSet template's revision, on both StatefulSets' pod templates."""

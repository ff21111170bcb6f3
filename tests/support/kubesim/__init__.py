"""kubesim: a Kubernetes API for tests and benchmarks: kmock's emulator served from a background thread,
with the gaps the operator, syncer and scheduler hit filled, and a kubelet's admission.

Not used in production (kmock is a dev dependency). Added on top of kmock's KubernetesEmulator:
- RESOURCES declared up front, so listing a kind with no objects answers [] instead of 404
  (PodDisruptionBudgets included: policy/v1 poddisruptionbudgets can be created and listed).
- Nodes: a Node must carry status.allocatable or status.capacity (every kubelet reports both;
  a Node without them is refused with 422 rather than silently admitting everything); allocatable
  is filled from capacity when only capacity is given (a kubelet with nothing reserved), and
  allocatable "pods" defaults to 110 (the kubelet's --max-pods).
- Kubelet admission (`tests.support.kubelet.admit`, on by default, `admission=False` to
  switch off): when a pod gets a Node (Binding, or created/patched with spec.nodeName), its
  effective requests plus those of the pods the "kubelet" admitted there before and that are not
  Succeeded/Failed must fit the Node's allocatable for every resource the pod requests, and one
  more pod must fit allocatable "pods"; else the pod turns Failed with reason OutOf<resource> and
  the kubelet's "Pod was rejected: Node didn't have enough resource: ..." message. Pods bound to a
  Node that does not exist wait for it (admitted when it is created, as a kubelet registering).
  `rejections` lists them. Admitted pods keep their phase: nothing runs containers, so tests set
  Running/Ready themselves.
- pods/eviction: PodDisruptionBudgets of the pod's namespace whose selector matches it are honoured
  (`kubelet.eviction`: 429 TooManyRequests "Cannot evict pod as it would violate the pod's
  disruption budget." below minAvailable / above maxUnavailable, int or percent; 500 for two PDBs;
  Pending, terminal and deleting pods skip the check); an allowed eviction deletes the pod at once
  (no kubelet to finish a graceful deletion); 409 for a uid precondition that does not match;
  `block_evictions` answers 429 for every pod, as a PDB with no budget left would.
- pods/binding: sets spec.nodeName, copies the Binding's annotations onto the pod, sets
  PodScheduled=True, answers 201 with a Status; 409 when the pod is already bound or the uid
  differs (as the API server does); `fail_bindings` makes it answer 500 (an API outage).
- GET /api/v1/namespaces/{name}, the namespace list (label selectors `key` and `key=value`) and
  its watch from `add_namespace` (kmock has no cluster-scoped namespace reads): a namespace added
  later is an ADDED event to open watches; a watch from a version streams the namespaces added
  after it, then bookmarks until its `timeoutSeconds`. Namespaces are never modified or deleted.
- create fills what an API server fills: metadata.namespace from the URL (namespaced watches drop
  objects without it), uid, creationTimestamp, generation and resourceVersion, and
  status.phase=Pending for pods.
- kmock's request log is not kept (its reaction lookup scans it: quadratic over a run).
- Watches as informers use them: every write gets the next resourceVersion (objects and events
  carry it; a list answers the current one); a watch from version V streams only the events
  after V from a bounded history, and from a version older than that history (`compact()` forgets
  it) one ERROR event with code 410, as the API server does; without a version it starts with
  every object as ADDED. `timeoutSeconds` ends a watch; with `allowWatchBookmarks` a BOOKMARK
  goes out every `bookmark_interval` seconds. Each event is a snapshot of the object when it was
  written (kmock sends the live dict, which later writes would change under a slow reader).
- Label selectors (`key`, `!key`, `=`, `==`, `!=`, `in`, `notin`) filter lists and watches; an
  object that does not match is sent to a watch as DELETED (it may just have left the selection;
  an API server only sends that when it had matched before, and an informer ignores a deletion of
  what it does not have). Of field selectors only a pod list's spec.nodeName=<node> is honoured.
- `drop_watches()` ends open watches and can refuse new ones (an API server restarting);
  `requests` counts requests by (verb, resource plural), for tests that assert a quiet
  controller makes none; `seed()` puts many objects in place without a request each (a
  benchmark's 10,000 Nodes), as if they had existed before anyone watched.
resourceVersion preconditions on writes are not checked: no user relies on optimistic
concurrency from this server. Lists are not paged (no `continue`: a client pages once).

Not modelled: the kubelet's other admission handlers (node selector and affinity, taints, host
ports, the CPU manager's exclusive cores, the device plugin's assignment of device IDs, topology
manager), eviction under node pressure, containers starting (no Running phase, no readiness),
graceful termination, PDB status fields (the budget is computed at each eviction; expected pods
are the matching pods, not the owners' replica counts), PDBs' "disrupted pods" bookkeeping and the
API server's defaulting of requests from limits (the admission model applies it itself).

The parts, one concept each: replies.py (the kinds served, Status replies, Nodes as a kubelet
reports them), watches.py (resourceVersions, the event history, lists and watches),
namespaces.py, pods.py (kubelet admission, binding, eviction), emulator.py (kmock's emulator
with those parts, and which part serves a request), server.py (KubeSim: the thread and what
tests set and read).
"""

from __future__ import annotations

from tests.support.kubesim.server import KubeSim

__all__ = ["KubeSim"]

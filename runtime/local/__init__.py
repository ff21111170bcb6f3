"""`sunk local`: a one-machine Kubernetes for tests and demos that runs a stack's rendered objects
as they are, from the images `sunk images build` made, and that the real kubectl talks to.

It is not a Kubernetes distribution. Its parts, each a module with its own limits:
- store.py and api.py: the API server (HTTPS, bearer tokens, discovery, CRUD, watch, patch,
  logs, exec over WebSocket), rbac.py its authorizer, resources.py the kinds it serves, patch.py
  the patch types;
- controllers.py: scheduler, StatefulSet, Deployment, Job, claims; inventory.py the Nodes (derived
  from the render, or a file);
- agent.py: the node agent (heartbeats, the pod watch, names), podrunner.py one pod's life on its
  Node (containers, restarts, termination, status), sandbox.py its namespaces, volumes and mounts
  (on a bridge: net.py), probes.py its probes; container.py decides what runs, volumes.py the
  volumes, enter.py starts each container;
- ports.py: NodePort and LoadBalancer Services on 127.0.0.1;
- offcluster.py: every difference from a real cluster a pod can see, with its reason;
- cluster.py: the process holding them; cli.py: `sunk local up|status|kubeconfig|down`.

Not modelled anywhere here: admission webhooks,
NetworkPolicy, multi-host networking (every Node's pods run on this machine, on one bridge, with
its address as their hostIP), DNS (names live in /etc/hosts), resource limits (cgroups),
persistence of the API's objects across a restart of the cluster's process.
"""

"""`sunk local`: a one-machine Kubernetes for tests and demos that runs a stack's rendered objects
as they are, from the images `sunk images build` made, and that the real kubectl talks to.

It is not a Kubernetes distribution. Its parts, each a module with its own limits:
- the API server: store.py (objects, watches, garbage collection) and api.py (HTTPS, bearer
  tokens, discovery, CRUD, watch, patch, logs, exec over WebSocket), rbac.py its authorizer,
  resources.py the kinds it serves, patch.py the patch types, printing.py kubectl's tables,
  eviction.py the disruption budgets' check, podexec.py exec's channels, pki.py its certificates
  and tokens;
- controllers/: one module per controller (claims, StatefulSets, Deployments, Jobs, the default
  scheduler); lifecycle.py the node lifecycle, taint-eviction and pod GC controllers and
  DefaultTolerationSeconds admission; inventory.py the Nodes (derived from the render, or a file);
- the node agent: agent.py (heartbeats, the pod watch, devices, names), podrunner.py one pod's
  life on its Node (containers, restarts, termination, status), sandbox.py its namespaces,
  volumes and mounts, probes.py its probes; container.py decides what runs, volumes.py the
  volumes, images.py finds the images, enter.py starts each container;
- the network: net.py (a bridge, a veth per pod, nothing routed off it), netpolicy.py
  (NetworkPolicy as iptables rules on that bridge), dns.py (the cluster.local names pods resolve,
  beside their /etc/hosts), ports.py (NodePort and LoadBalancer Services on 127.0.0.1);
- offcluster.py: every difference from a real cluster a pod can see, with its reason;
- cluster.py: the process holding them; cli.py: `sunk local up|apply|status|kubeconfig|node|down`;
  demo.py: `sunk local demo`.

Not modelled anywhere here: admission webhooks, ClusterIP translation (a Service's name resolves
to one ready endpoint), multi-host networking (every Node's pods run on this machine, on one
bridge, with its address as their hostIP), resource limits (cgroups), persistence of the API's
objects across a restart of the cluster's process.
"""

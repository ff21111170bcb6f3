"""`sunk local`: a one-machine Kubernetes for tests and demos that runs a stack's rendered objects
as they are, from the images `sunk images build` made, and that the real kubectl talks to.

Kubernetes' own control plane, and our parts beside it, each a module with its own limits:
- the control plane: kubebuild.py builds etcd, kube-apiserver, kube-controller-manager and
  kube-scheduler from their Go modules, controlplane.py runs them as processes (pki.py their
  certificates); the API server, admission (webhooks included), RBAC, the controllers, the node
  lifecycle and the scheduler are theirs; resources.py the kinds our parts address;
- the node agent, our kubelets: nodeagents.py registers each Node with its own certificate,
  remote.py is its Store on the API server as each Node (apitypes.py the types), agent.py
  (heartbeats, the pod watch, devices, names), podrunner.py one pod's life on its Node
  (containers, restarts, termination, status), sandbox.py its namespaces, volumes and mounts,
  probes.py its probes, kubeletapi.py the kubelet API (logs, exec, port-forward: podexec.py,
  portforward.py); container.py decides what runs, volumes.py the volumes, images.py finds the
  images, enter.py starts each container; inventory.py the Nodes (derived from the render, or a file);
- claims: provisioner.py, a host folder per PersistentVolumeClaim;
- the network: net.py (a bridge, a veth per pod, nothing routed off it), netpolicy.py
  (NetworkPolicy as iptables rules on that bridge), dns.py (the cluster.local names pods resolve,
  beside their /etc/hosts), ports.py (NodePort and LoadBalancer Services on 127.0.0.1);
- offcluster.py: every difference from a real cluster a pod can see, with its reason;
- cluster.py: the process holding them; cli.py: `sunk local up|apply|status|kubeconfig|node|down`;
  demo.py: `sunk local demo`.

Not modelled anywhere here: multi-host networking (every Node's pods run on this machine, on one
bridge, with its address as their hostIP), resource limits (cgroups), persistence of the API's
objects across a restart of the cluster's process.
"""

"""Real nodes for envtest: the upstream kubelet, containerd + runc and kube-proxy per node, in the
node's own namespaces on this machine, with CoreDNS (``Environment(runtime="kubelet")``).

- ``plan``: the slot's address ranges and its machine-wide claim;
- ``host``: the host's bridge, routes, veths, and the nodes' cgroups;
- ``configs``: containerd, CNI, kubelet and kube-proxy configuration;
- ``supervisor``: the node's PID 1 inside its namespaces;
- ``node``: ``RealNodes``, what the environment drives;
- ``addons``: CoreDNS as a Deployment.
See docs/real-node.md.
"""

"""Security material of a RedisCluster, in both modes: ``tls`` (the TLS Secret checked, the
client context, certificate reloads) and ``users`` (``spec.users``: the ACL file Secret, the
operator's own ``pyctrl-operator`` user, ``ACL LOAD``).

This package's ``__init__`` imports nothing (the backup worker imports ``tls`` alone).
"""

"""Tests of pyctrl.crdgen and the RedisCluster API types."""

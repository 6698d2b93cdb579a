"""Tests of the RedisCluster operator's Redis domain layer (topology, redis_admin, prober)."""

"""The RedisCluster operator: a Redis master with replicas and automatic failover."""

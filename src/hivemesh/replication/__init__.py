"""Replication between zones (metastores and their warehouses): policies, and the machinery that
keeps targets current. So far: the policy configuration (:mod:`hivemesh.replication.config`)."""

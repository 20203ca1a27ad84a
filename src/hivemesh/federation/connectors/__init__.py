"""Connectors: catalogs that reach a member metastore (Thrift, SSH-tunnelled Thrift, AWS Glue)."""

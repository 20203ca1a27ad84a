"""The HMS Thrift server: bytes on a socket <-> calls on a catalog object (:mod:`hivemesh.thrift.server`,
:mod:`hivemesh.thrift.processor`)."""

import hivemesh.hive  # noqa: F401 - the HMS Thrift types as hivemesh uses them

# SPDX-License-Identifier: Apache-2.0
"""Adapters with the method names and semantics of KV-cache stores' own
storage interfaces, so a framework can use railio without railio knowing
the framework (neither is imported here):

- :mod:`railio.integrations.sglang`: ``RailioHiCacheStorage``, SGLang's
  hierarchical cache storage (``get``/``batch_get`` into a host memory pool,
  ``set``/``batch_set``, ``exists``, ``batch_exists``, ``clear``).
- :mod:`railio.integrations.lmcache`: ``RailioConnector``, LMCache's remote
  connector (async ``exists``/``get``/``put``/``list``/``close``).
"""

__all__ = ["sglang", "lmcache"]

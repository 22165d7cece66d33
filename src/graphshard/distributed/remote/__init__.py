"""The remote wing: reading any partition's data from any rank — sampling graphs and the distributed
sampler, the distributed feature store and its caches (host and device), ``DistTensor``/``DistEmbedding``,
co-located partitions read in-process, and the services a process starts to answer its peers (services).

May import from every wing below it: host, stores, transport, ranks, groups.
"""

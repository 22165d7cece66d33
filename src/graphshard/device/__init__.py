"""Accelerators: which device each rank computes on (:mod:`.choice`), copies that overlap the model's compute
(:mod:`.streams`, :mod:`.buffers`, :mod:`.transfer`), rows kept on the device (:mod:`.rowcache`), and the
device's memory (:mod:`.memory`).

Everything here runs on a CPU too: a stream there is no stream (its copies happen at once, its events are
always done), a buffer is not pinned, and the device is ``cpu``; so the same path that feeds a GPU is tested
on machines without one. This package imports torch and graphshard's ground floor only."""

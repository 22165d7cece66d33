"""The groups wing: processes that serve partitions to each other — an RPC group with bounded waits and
owner-routed requests (rpc), the channels of a group (channels), and sums of small tensors over them (reduce).

May import from the host, transport and ranks wings.
"""

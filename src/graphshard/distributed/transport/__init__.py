"""The transport wing: bytes between processes — where to listen (network), the frame layout, the job
secret and handshake, optional TLS, the direct channels every request travels on, liveness (a lost host
found in seconds) and how feature rows travel (wire).

May import from the host wing only.
"""

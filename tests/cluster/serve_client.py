"""The client side of tests/cluster/test_serve.py, run on an emulated host (the service's address is reachable
from the hosts only). ``python serve_client.py URL TOKEN``: waits for the service, asks it, waits for the file
``cut`` (the test writes it once it has cut a link), asks again, and prints one JSON line per step."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx

BOUND = 120.0  # seconds any step may wait (the test's own deadline is shorter)


def say(**what) -> None:
    print(json.dumps(what), flush=True)


def main() -> None:
    url, token = sys.argv[1], sys.argv[2]
    auth = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + BOUND
    while True:  # the service answers once rank 0 printed its line: poll it, against a deadline
        try:
            if httpx.get(f"{url}/healthz", headers=auth, timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the service never answered"
        time.sleep(0.2)
    say(step="unauthorised", status=httpx.post(f"{url}/v1/predict", json={"nodes": [1]}, timeout=30).status_code)
    r = httpx.post(f"{url}/v1/predict", json={"nodes": list(range(3000))}, headers=auth, timeout=30)
    say(step="answered", status=r.status_code, scores=r.json().get("scores"))
    while not Path("cut").exists():  # the test cuts host 1's link, then writes this file: poll, against a deadline
        assert time.monotonic() < deadline + BOUND, "the test never cut the link"
        time.sleep(0.05)
    cut = time.monotonic()
    while (h := httpx.get(f"{url}/healthz", headers=auth, timeout=30)).status_code == 200:
        assert time.monotonic() - cut < BOUND, "the cut was never noticed"
        time.sleep(0.1)
    say(step="health", status=h.status_code, body=h.json(), seconds=time.monotonic() - cut)
    asked = time.monotonic()
    r = httpx.post(f"{url}/v1/predict", json={"nodes": list(range(3000))}, headers=auth, timeout=30)
    say(step="lost", status=r.status_code, body=r.json(), seconds=time.monotonic() - asked)


if __name__ == "__main__":
    main()

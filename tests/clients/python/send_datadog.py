"""Sends a fixed set of metrics, an event and a service check with the
`datadog` package's DogStatsd (PyPI 0.56.0).

Usage: send_datadog.py HOST PORT. The expected values are asserted in
tests/it/clients.rs; keep both in step. Client-side sampling is made
deterministic (every sampled call is sent, carrying its `@rate`).
"""
import sys

import datadog.dogstatsd.base as base
from datadog.dogstatsd import DogStatsd

base.random = lambda: 0.0  # "always sampled": DogStatsd drops when random() > rate

host, port = sys.argv[1], int(sys.argv[2])
d = DogStatsd(host=host, port=port, namespace="dd", constant_tags=["env:test"],
              disable_telemetry=True, disable_buffering=True)
api = ["route:/api"]
d.increment("req", tags=api)
d.increment("req", tags=api)
d.increment("req", 3, sample_rate=0.5, tags=api)   # weight 2
d.decrement("req", tags=api)
d.gauge("depth", 7, tags=["q:main"])
d.gauge("depth", 9, tags=["q:main"])
d.histogram("payload", 512, tags=api)
d.histogram("payload", 1024, sample_rate=0.5, tags=api)
d.distribution("latd", 0.0125, tags=api)
d.distribution("latd", 0.0125, tags=api)
d.timing("lat", 12.5, tags=api)
d.set("users", "alice")
d.set("users", "bob")
d.set("users", "carol")
d.event("deploy", "v1 rolled out", tags=api)
d.service_check("dd.up", DogStatsd.OK, tags=api)
d.close_socket()

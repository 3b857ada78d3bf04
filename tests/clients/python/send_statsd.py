"""Sends a fixed set of metrics with the `statsd` package (PyPI 4.0.1).

Usage: send_statsd.py HOST PORT. The expected values are asserted in
tests/it/clients.rs; keep both in step. Client-side sampling is made
deterministic (every sampled call is sent, carrying its `@rate`), so the
server's 1/rate weighting can be checked exactly.
"""
import random
import sys

import statsd

random.random = lambda: 0.0  # "always sampled": statsd sends when random() <= rate

host, port = sys.argv[1], int(sys.argv[2])
c = statsd.StatsClient(host, port, prefix="py")
for _ in range(3):
    c.incr("req")                  # py.req:1|c
c.incr("req", 5, rate=0.5)         # py.req:5|c|@0.5  -> weight 2
c.decr("req")                      # py.req:-1|c
c.incr("tagged,route=/x", 2)       # Influx-style tags in the name
c.gauge("depth", 42)               # py.depth:42|g
c.gauge("depth", -3, delta=True)   # py.depth:-3|g
c.gauge("depth", 5, delta=True)    # py.depth:+5|g
c.gauge("neg", -7)                 # py.neg:0|g\npy.neg:-7|g (one datagram)
c.timing("lat", 12.5)              # py.lat:12.500000|ms
c.timing("lat", 12.5)
c.timing("lat", 250, rate=0.5)     # weight 2
c.set("users", "alice")
c.set("users", "bob")
c.set("users", "alice")
with c.pipeline() as p:            # one datagram, two lines
    p.incr("piped")
    p.timing("piped.lat", 3)

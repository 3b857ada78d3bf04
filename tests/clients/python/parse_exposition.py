"""Reads a /metrics body on stdin with prometheus_client's own parsers and
prints every sample as one JSON line: {"name", "labels", "value"}, the value
as Python's repr of the float (exact, and spells nan and inf).

Usage: parse_exposition.py text|openmetrics < body

"text" is prometheus_client.parser (text 0.0.4 and 1.0.0), "openmetrics"
its OpenMetrics parser; both read quoted UTF-8 names ({"a.b",...}) since
prometheus-client 0.22. A body either refuses makes this exit non-zero with
the parser's error on stderr. Used by tests/it/formats.rs."""

import json
import sys

if sys.argv[1] == "text":
    from prometheus_client.parser import text_string_to_metric_families as parse
elif sys.argv[1] == "openmetrics":
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as parse,
    )
else:
    sys.exit(f"unknown format {sys.argv[1]!r}")

body = sys.stdin.buffer.read().decode("utf-8")
for family in parse(body):
    for s in family.samples:
        print(
            json.dumps(
                {"name": s.name, "labels": s.labels, "value": repr(float(s.value))}
            )
        )

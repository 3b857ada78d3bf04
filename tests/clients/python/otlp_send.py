"""Pushes a fixed set of metrics with the OpenTelemetry Python SDK (1.45.2)
over OTLP, as an instrumented Python service would. Run by
tests/it/otlp_ingest.rs against rollstat's OTLP listener.

Usage: otlp_send.py --endpoint URL --protocol http|grpc
                    --temporality cumulative|delta --rounds N
                    [--service NAME] [--prefix P] [--compression none|gzip]

--endpoint is the full URL: http://127.0.0.1:PORT/v1/metrics for http
(protobuf body), http://127.0.0.1:PORT (or HOST:PORT) for grpc (insecure).
Each round r = 1..N records deterministic values, then exports exactly once
(one request; no timer, no extra export at shutdown) and exits 1 if that
export failed. Last, prints one JSON line with the totals recorded:
{"requests": {"/a": .., "/b": ..}, "inflight": .., "latency": {"count",
"sum", "min", "max", "values"}, "temperature": ..}.
"""
import argparse
import json
import sys

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import (
    Counter, Histogram, MeterProvider, ObservableCounter, ObservableGauge,
    ObservableUpDownCounter, UpDownCounter)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality, MetricExportResult, MetricReader)
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
# Dyadic values, so sums are exact whatever the order of addition; 0.25 sits
# on a bound (OTLP buckets are upper-inclusive), 2.0 lands in the +Inf bucket.
LATENCIES = [0.00390625, 0.03125, 0.25, 0.75, 2.0]
TIMEOUT_S = 5


class FlushReader(MetricReader):
    """Exports only when asked (force_flush/collect), keeping the result, which
    PeriodicExportingMetricReader would drop (it also exports at shutdown)."""

    def __init__(self, exporter, temporality):
        super().__init__(preferred_temporality=temporality)
        self.exporter, self.result = exporter, None

    def _receive_metrics(self, metrics_data, timeout_millis=10_000, **kwargs):
        self.result = self.exporter.export(metrics_data, timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis=30_000, **kwargs):
        self.exporter.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--protocol", choices=["http", "grpc"], required=True)
    ap.add_argument("--temporality", choices=["cumulative", "delta"], required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--service", default="otel-test")
    ap.add_argument("--prefix", default="otel.")
    ap.add_argument("--compression", choices=["none", "gzip"], default="none")
    a = ap.parse_args()

    t = (AggregationTemporality.DELTA if a.temporality == "delta"
         else AggregationTemporality.CUMULATIVE)
    # Every instrument kind, UpDownCounters included (the spec's "delta"
    # preference would keep those cumulative; here they follow the flag).
    temporality = {k: t for k in (Counter, UpDownCounter, Histogram, ObservableCounter,
                                  ObservableUpDownCounter, ObservableGauge)}
    gzip = a.compression == "gzip"
    if a.protocol == "http":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        exporter = OTLPMetricExporter(
            endpoint=a.endpoint, timeout=TIMEOUT_S,
            compression=Compression.Gzip if gzip else Compression.NoCompression)
    else:
        import grpc
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        exporter = OTLPMetricExporter(
            endpoint=a.endpoint, insecure=True, timeout=TIMEOUT_S,
            compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression)
    reader = FlushReader(exporter, temporality)
    provider = MeterProvider(
        metric_readers=[reader], shutdown_on_exit=False,
        resource=Resource.create({"service.name": a.service,
                                  "service.instance.id": "otlp-send-py-1"}),
        views=[View(instrument_name=a.prefix + "latency",
                    aggregation=ExplicitBucketHistogramAggregation(boundaries=BOUNDS))])
    meter = provider.get_meter("rollstat.it.otlp_send", "1.0")

    rnd = 0

    def temperature(_options: CallbackOptions):
        return [Observation(20 + rnd)]

    p = a.prefix
    requests = meter.create_counter(p + "requests", unit="1", description="requests served")
    inflight = meter.create_up_down_counter(p + "inflight", unit="1")
    latency = meter.create_histogram(p + "latency", unit="s")
    meter.create_observable_gauge(p + "temperature", [temperature], unit="Cel")

    totals = {"/a": 0, "/b": 0}
    net, values = 0, []
    for rnd in range(1, a.rounds + 1):
        requests.add(rnd, {"route": "/a"})
        requests.add(2 * rnd, {"route": "/b"})
        totals["/a"] += rnd
        totals["/b"] += 2 * rnd
        inflight.add(3)
        inflight.add(-1)
        net += 2
        for v in LATENCIES:
            latency.record(v)
            values.append(v)
        reader.result = None
        provider.force_flush(timeout_millis=TIMEOUT_S * 1000)  # collect + one export
        if reader.result is not MetricExportResult.SUCCESS:
            provider.shutdown()
            sys.exit(f"otlp_send.py: export of round {rnd} failed ({reader.result})")
    provider.shutdown()
    print(json.dumps({
        "requests": totals,
        "inflight": net,
        "latency": {"count": len(values), "sum": sum(values),
                    "min": min(values, default=None), "max": max(values, default=None),
                    "values": values},
        "temperature": 20 + rnd,
    }))


if __name__ == "__main__":
    main()

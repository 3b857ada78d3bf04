// Pushes a fixed set of metrics with the OpenTelemetry JS metrics SDK
// (@opentelemetry/sdk-metrics 2.12.0) and its OTLP/HTTP exporter
// (exporter-metrics-otlp-http 0.223.0, JSON bodies), as an instrumented Node
// service would. Run by tests/it/otlp_ingest.rs against rollstat's OTLP
// listener; the Python twin is ../python/otlp_send.py (same instruments).
//
// Usage: node otlp_send.js --endpoint URL --temporality cumulative|delta
//          --rounds N [--service NAME] [--prefix P] [--compression none|gzip]
// URL is the full http://127.0.0.1:PORT/v1/metrics. Each round r = 1..N
// records deterministic values, then exports exactly once (one POST; no
// timer, nothing sent at shutdown); exits 1 if that export failed. Last,
// prints one JSON line with the totals recorded: {"requests": {"/a", "/b"},
// "inflight", "latency": {"count", "sum", "min", "max", "values"},
// "temperature"}.
'use strict';
const { parseArgs } = require('node:util');
const { ValueType } = require('@opentelemetry/api');
const {
  AggregationTemporality, AggregationType, MeterProvider, MetricReader,
} = require('@opentelemetry/sdk-metrics');
const { OTLPMetricExporter } = require('@opentelemetry/exporter-metrics-otlp-http');
const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
// Dyadic values, so sums are exact whatever the order of addition; 0.25 sits
// on a bound (OTLP buckets are upper-inclusive), 2.0 lands in the +Inf bucket.
const LATENCIES = [0.00390625, 0.03125, 0.25, 0.75, 2.0];
const TIMEOUT_MS = 5000;

const fail = (msg) => { console.error(`otlp_send.js: ${msg}`); process.exit(1); };
const { values: a } = parseArgs({
  options: {
    endpoint: { type: 'string' }, temporality: { type: 'string' }, rounds: { type: 'string' },
    service: { type: 'string', default: 'otel-test' }, prefix: { type: 'string', default: 'otel.' },
    compression: { type: 'string', default: 'none' },
  },
});
if (!a.endpoint || !['cumulative', 'delta'].includes(a.temporality) || !(Number(a.rounds) >= 0)
    || !['none', 'gzip'].includes(a.compression)) {
  fail('usage: otlp_send.js --endpoint URL --temporality cumulative|delta --rounds N '
    + '[--service NAME] [--prefix P] [--compression none|gzip]');
}
setTimeout(() => fail('did not finish within 60 s'), 60000).unref();

// A reader that only collects when asked. Every instrument kind follows
// --temporality, UpDownCounters included (the exporter's own "delta"
// preference would keep those cumulative).
const temporality = a.temporality === 'delta'
  ? AggregationTemporality.DELTA : AggregationTemporality.CUMULATIVE;
class FlushReader extends MetricReader {
  constructor() { super({ aggregationTemporalitySelector: () => temporality }); }
  async onForceFlush() {}
  async onShutdown() {}
}
const reader = new FlushReader();
const exporter = new OTLPMetricExporter({
  url: a.endpoint, timeoutMillis: TIMEOUT_MS, compression: a.compression,
});
const provider = new MeterProvider({
  resource: defaultResource().merge(resourceFromAttributes({
    'service.name': a.service, 'service.instance.id': 'otlp-send-js-1',
  })),
  readers: [reader],
  views: [{
    instrumentName: `${a.prefix}latency`,
    aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: BOUNDS } },
  }],
});
const meter = provider.getMeter('rollstat.it.otlp_send', '1.0');
const p = a.prefix;
// ValueType.INT makes the SDK send asInt, as Python does for ints (the JS default is asDouble).
const requests = meter.createCounter(`${p}requests`, { unit: '1', description: 'requests served', valueType: ValueType.INT });
const inflight = meter.createUpDownCounter(`${p}inflight`, { unit: '1', valueType: ValueType.INT });
const latency = meter.createHistogram(`${p}latency`, { unit: 's' });
let round = 0;
meter.createObservableGauge(`${p}temperature`, { unit: 'Cel', valueType: ValueType.INT })
  .addCallback((result) => result.observe(20 + round));

async function main() {
  const totals = { '/a': 0, '/b': 0 };
  let net = 0;
  const values = [];
  for (round = 1; round <= Number(a.rounds); round++) {
    requests.add(round, { route: '/a' });
    requests.add(2 * round, { route: '/b' });
    totals['/a'] += round;
    totals['/b'] += 2 * round;
    inflight.add(3);
    inflight.add(-1);
    net += 2;
    for (const v of LATENCIES) { latency.record(v); values.push(v); }
    const { resourceMetrics, errors } = await reader.collect({ timeoutMillis: TIMEOUT_MS });
    if (errors.length) fail(`collect of round ${round} failed: ${errors}`);
    const result = await new Promise((resolve) => exporter.export(resourceMetrics, resolve));
    if (result.code !== 0) fail(`export of round ${round} failed: ${result.error}`); // 0 = ExportResultCode.SUCCESS
  }
  await provider.shutdown();
  await exporter.shutdown();
  console.log(JSON.stringify({
    requests: totals,
    inflight: net,
    latency: {
      count: values.length, sum: values.reduce((s, v) => s + v, 0),
      min: values.length ? Math.min(...values) : null, max: values.length ? Math.max(...values) : null,
      values,
    },
    temperature: 20 + Number(a.rounds),
  }));
}
main().catch((e) => fail(e && e.stack ? e.stack : e));

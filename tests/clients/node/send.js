// Sends a fixed set of metrics, an event and a service check with hot-shots
// (npm 17.1.1). Usage: node send.js HOST PORT. The expected values are
// asserted in tests/it/clients.rs; keep both in step. Client-side sampling is
// made deterministic: hot-shots sends when Math.random() < rate, so every
// sampled call is sent, carrying its `@rate`.
'use strict';
const StatsD = require('hot-shots');

Math.random = () => 0;
const [host, port] = process.argv.slice(2);
const c = new StatsD({
  host, port: Number(port), prefix: 'js.', globalTags: { env: 'test' },
  errorHandler: (e) => { console.error(e); process.exit(1); },
});
const api = ['route:/api'];
const calls = [
  (cb) => c.increment('req', 1, 1, api, cb),
  (cb) => c.increment('req', 1, 1, api, cb),
  (cb) => c.increment('req', 2, 0.5, api, cb),     // weight 2
  (cb) => c.decrement('req', 1, 1, api, cb),
  (cb) => c.gauge('depth', 42, 1, ['q:main'], cb),
  (cb) => c.gaugeDelta('depth', -3, 1, ['q:main'], cb),
  (cb) => c.timing('lat', 12.5, 0.5, api, cb),      // weight 2
  (cb) => c.timing('lat', 100, 1, api, cb),
  (cb) => c.histogram('payload', 512, 1, api, cb),
  (cb) => c.distribution('latd', 0.0125, 0.5, api, cb),
  (cb) => c.set('users', 'alice', 1, [], cb),
  (cb) => c.set('users', 'bob', 1, [], cb),
  (cb) => c.event('deploy', 'v1 rolled out', {}, api, cb),
  (cb) => c.check('up', c.CHECKS.OK, {}, api, cb),
];
let pending = calls.length;
const done = (err) => {
  if (err) { console.error(err); process.exit(1); }
  if (--pending === 0) c.close((e) => process.exit(e ? 1 : 0));
};
for (const call of calls) call(done);
setTimeout(() => { console.error('hot-shots did not call back within 10 s'); process.exit(1); }, 10000).unref();

// rollstat live page: polls the JSON API every second, keeps the last two
// minutes in memory and draws them on <canvas>. No framework, no network
// beyond the daemon that served this file.
'use strict';
(() => {
  const KEEP = 120; // seconds of history kept and drawn
  const COLORS = ['#4e9af1', '#f5a623', '#e5534b', '#57ab5a', '#b083f0', '#39c5cf'];
  const STATE_COLORS = { closed: '#57ab5a', open: '#e5534b', half_open: '#f5a623' };
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
  const picked = decodeURIComponent(location.hash.replace(/^#metrics=/, '')).split(',').filter(Boolean);
  let names = []; // [{metric, type, series}]
  let listAt = 0;
  let windowName = '';
  const hist = new Map(); // series key -> {metric, type, labels, t: [], w: {window: {rate: [], ...}}}
  const cards = new Map(); // series key -> {el, canvases}
  const bHist = new Map(); // breaker -> {t: [], state: [], drop: []}
  const lHist = new Map(); // limit -> {t: [], allowed: [], denied: [], prev}

  const num = (v) => {
    if (v == null || !isFinite(v)) return '–';
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e3) return (v / 1e3).toFixed(1) + 'k';
    if (a >= 100 || a === 0) return v.toFixed(0);
    if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, '');
    return v.toPrecision(2);
  };

  const getJSON = async (url) => {
    const r = await fetch(url, { cache: 'no-store' });
    if (!r.ok) throw new Error(url + ': HTTP ' + r.status);
    return r.json();
  };

  const push = (arr, v) => {
    arr.push(v);
    if (arr.length > KEEP + 5) arr.shift();
  };

  // === charts ===

  // Draws lines (each {label, color, v: []} aligned with t) and an optional
  // shaded band {lo: [], hi: []}; returns the number of finite points drawn.
  function draw(canvas, t, lines, band, small) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 300;
    const h = canvas.clientHeight || 120;
    if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
    if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const now = Date.now() / 1000;
    const left = small ? 2 : 44;
    const top = small ? 2 : 18;
    const bottom = small ? 2 : 16;
    const all = [];
    for (const l of lines) for (const v of l.v) if (v != null && isFinite(v)) all.push(v);
    if (band) for (const a of [band.lo, band.hi]) for (const v of a) if (v != null && isFinite(v)) all.push(v);
    let lo = Math.min(0, ...all);
    let hi = Math.max(...all, lo + 1e-9);
    if (all.length === 0) hi = 1;
    hi += (hi - lo) * 0.08;
    // Span the data's age, between 30 s and KEEP, so a fresh tab fills its charts.
    const span = Math.min(KEEP, Math.max(30, t.length ? now - t[0] : KEEP));
    const x = (ts) => left + ((ts - (now - span)) / span) * (w - left - 4);
    const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (h - top - bottom);
    const style = getComputedStyle(document.body);
    if (!small) {
      g.font = '10px system-ui, sans-serif';
      g.fillStyle = style.getPropertyValue('--dim');
      g.strokeStyle = style.getPropertyValue('--grid');
      g.lineWidth = 1;
      for (let i = 0; i <= 3; i++) {
        const v = lo + ((hi - lo) * i) / 3;
        const yy = Math.round(y(v)) + 0.5;
        g.beginPath();
        g.moveTo(left, yy);
        g.lineTo(w - 4, yy);
        g.stroke();
        g.fillText(num(v), 2, yy + 3);
      }
      g.fillText('-' + Math.round(span) + 's', left, h - 3);
      g.fillText('-' + Math.round(span / 2) + 's', x(now - span / 2) - 8, h - 3);
      g.fillText('now', w - 24, h - 3);
    }
    if (band) {
      g.fillStyle = 'rgba(78,154,241,0.15)';
      for (let i = 0; i < t.length; i++) {
        const a = band.lo[i];
        const b = band.hi[i];
        if (a == null || b == null) continue;
        const x0 = x(t[i] - 1);
        g.fillRect(x0, y(b), x(t[i]) - x0 + 0.5, Math.max(1, y(a) - y(b)));
      }
    }
    let points = 0;
    let lx = left + 4;
    for (const l of lines) {
      g.strokeStyle = l.color;
      g.lineWidth = 1.5;
      g.setLineDash(l.dash ? [4, 3] : []);
      g.beginPath();
      let pen = false;
      for (let i = 0; i < t.length; i++) {
        const v = l.v[i];
        if (v == null || !isFinite(v) || t[i] < now - span) {
          pen = false;
          continue;
        }
        points++;
        if (pen) g.lineTo(x(t[i]), y(v));
        else g.moveTo(x(t[i]), y(v));
        pen = true;
      }
      g.stroke();
      if (!small && l.label) {
        const last = l.v.length ? l.v[l.v.length - 1] : null;
        const txt = l.label + ' ' + num(last);
        g.fillStyle = l.color;
        g.fillText(txt, lx, 11);
        lx += g.measureText(txt).width + 10;
      }
    }
    g.setLineDash([]);
    canvas.dataset.points = points;
    canvas.dataset.lines = lines.filter((l) => l.v.some((v) => v != null)).map((l) => l.label).join(',');
    return points;
  }

  // === metric list ===

  async function loadList() {
    // Names, types and series counts only: the statistics of the picked
    // metrics are fetched one metric at a time.
    const list = await getJSON('/api/v1/metrics');
    names = list.metrics;
    const sel = $('window');
    const ws = list.windows;
    if (sel.options.length !== ws.length) {
      sel.innerHTML = ws.map((w) => '<option>' + esc(w) + '</option>').join('');
      if (!ws.includes(windowName)) windowName = ws[0] || '';
      sel.value = windowName;
    }
    renderList();
  }

  function renderList() {
    const q = $('search').value.trim().toLowerCase();
    const shown = names.filter((n) => n.metric.toLowerCase().includes(q)).slice(0, 200);
    $('metrics').innerHTML = shown
      .map((n) => '<li data-metric="' + esc(n.metric) + '"' + (picked.includes(n.metric) ? ' class="on"' : '') +
        '><span>' + esc(n.metric) + '</span><small>' + esc(n.type) + (n.series > 1 ? ' ×' + n.series : '') + '</small></li>')
      .join('') || '<li class="none">no metric matches</li>';
  }

  function toggle(metric) {
    const i = picked.indexOf(metric);
    if (i >= 0) picked.splice(i, 1);
    else picked.push(metric);
    history.replaceState(null, '', picked.length ? '#metrics=' + encodeURIComponent(picked.join(',')) : '#');
    renderList();
    renderCards();
  }

  // === series cards ===

  const keyOf = (s) => s.metric + '\u0000' + JSON.stringify(s.labels);

  function record(s, now) {
    const k = keyOf(s);
    let h = hist.get(k);
    if (!h) {
      h = { metric: s.metric, type: s.type, labels: s.labels, t: [], w: {} };
      hist.set(k, h);
    }
    h.seen = now;
    push(h.t, now);
    for (const [wn, v] of Object.entries(s.windows)) {
      const d = h.w[wn] || (h.w[wn] = { rate: [], avg: [], min: [], max: [], unique: [], funique: [], q: {}, fq: {} });
      while (d.rate.length < h.t.length - 1) for (const a of [d.rate, d.avg, d.min, d.max, d.unique, d.funique]) a.unshift(null);
      push(d.rate, v.rate);
      push(d.avg, v.avg);
      push(d.min, v.min);
      push(d.max, v.max);
      push(d.unique, v.unique == null ? null : v.unique);
      // A set shared through Redis: the distinct members of the whole fleet.
      push(d.funique, v.fleet?.unique == null ? null : v.fleet.unique);
      for (const [q, x] of Object.entries(v.quantiles || {})) {
        const qa = d.q[q] || (d.q[q] = new Array(d.rate.length - 1).fill(null));
        push(qa, x);
      }
      // A series shared through Redis: the quantiles of the whole fleet.
      for (const [q, x] of Object.entries(v.fleet?.quantiles || {})) {
        const qa = d.fq[q] || (d.fq[q] = new Array(d.rate.length - 1).fill(null));
        push(qa, x);
      }
      // A quantile missing this time (the fleet view stale) leaves a gap.
      for (const qa of Object.values(d.fq)) while (qa.length < d.rate.length) push(qa, null);
    }
  }

  function card(k, h) {
    let c = cards.get(k);
    if (c) return c;
    const el = document.createElement('div');
    el.className = 'card';
    const tags = Object.entries(h.labels).map(([a, b]) => esc(a) + '=' + esc(b)).join(' ');
    const third = h.type === 'set' ? 'distinct members' : ['timer', 'histogram', 'distribution'].includes(h.type) ? 'quantiles' : '';
    el.innerHTML = '<h3>' + esc(h.metric) + ' <small>' + esc(h.type) + ' ' + tags + '</small></h3><div class="row">' +
      ['rate /s', h.type === 'set' ? '' : 'average (band: min–max)', third].filter(Boolean)
        .map((t) => '<figure><figcaption>' + t + '</figcaption><canvas data-metric="' + esc(h.metric) + '"></canvas></figure>').join('') +
      '</div>';
    c = { el, canvases: [...el.querySelectorAll('canvas')] };
    cards.set(k, c);
    return c;
  }

  function renderCards() {
    const box = $('charts');
    const want = [...hist.entries()].filter(([, h]) => picked.includes(h.metric)).slice(0, 24);
    const keys = new Set(want.map(([k]) => k));
    for (const [k, c] of cards) if (!keys.has(k)) { c.el.remove(); cards.delete(k); }
    box.querySelector('.empty')?.remove();
    if (want.length === 0) box.innerHTML = '<p class="empty">' + (picked.length ? 'Waiting for data…' : 'No metric picked yet.') + '</p>';
    let drawn = 0;
    for (const [k, h] of want) {
      const c = card(k, h);
      if (c.el.parentNode !== box) box.appendChild(c.el);
      const d = h.w[windowName];
      if (!d) continue;
      const [cr, ca, cq] = h.type === 'set' ? [c.canvases[0], null, c.canvases[1]] : c.canvases;
      drawn += draw(cr, h.t, [{ label: 'rate', color: COLORS[0], v: d.rate }]);
      if (ca) drawn += draw(ca, h.t, [{ label: 'avg', color: COLORS[1], v: d.avg }], { lo: d.min, hi: d.max });
      if (cq && h.type === 'set') {
        drawn += draw(cq, h.t, [
          { label: 'unique', color: COLORS[3], v: d.unique },
          { label: 'fleet unique', color: COLORS[3], v: d.funique, dash: true },
        ]);
      }
      else if (cq) {
        const pq = (q) => 'p' + Math.round(q * 1000) / 10;
        const local = Object.entries(d.q).map(([q, v], i) => ({ label: pq(q), color: COLORS[(i + 2) % COLORS.length], v }));
        const fleet = Object.entries(d.fq).map(([q, v], i) => ({ label: 'fleet ' + pq(q), color: COLORS[(i + 2) % COLORS.length], v, dash: true }));
        drawn += draw(cq, h.t, local.concat(fleet));
      }
    }
    window.__rollstatDrawn = drawn;
  }

  // === breakers and limits ===

  function renderBreakers(list, now) {
    const rows = list.map((b) => {
      const h = bHist.get(b.name) || { t: [], state: [], drop: [] };
      bHist.set(b.name, h);
      push(h.t, now);
      push(h.state, b.state);
      push(h.drop, b.drop_ratio);
      return '<tr><td>' + esc(b.name) + ' <small>' + esc(b.kind) + '</small></td><td><b class="st ' + esc(b.state) + '">' +
        esc(b.state.replace('_', '-')) + '</b></td><td>drop ' + num(b.drop_ratio) + '</td><td>fail ' + num(b.failure_ratio) +
        ' <small>' + b.failures + '/' + b.requests + '</small></td><td><canvas class="strip" data-breaker="' + esc(b.name) + '"></canvas></td></tr>';
    });
    $('breakers').innerHTML = rows.join('') || '<tr><td class="none">no breakers configured</td></tr>';
    for (const cv of $('breakers').querySelectorAll('canvas')) {
      const h = bHist.get(cv.dataset.breaker);
      const dpr = window.devicePixelRatio || 1;
      const w = cv.clientWidth || 120;
      const ht = cv.clientHeight || 14;
      cv.width = w * dpr;
      cv.height = ht * dpr;
      const g = cv.getContext('2d');
      g.scale(dpr, dpr);
      const step = w / KEEP;
      h.state.forEach((s, i) => {
        g.fillStyle = STATE_COLORS[s] || '#888';
        g.fillRect(w - (h.state.length - i) * step, 0, Math.ceil(step), ht);
      });
    }
  }

  function renderLimits(list, now) {
    const rows = list.map((l) => {
      const d = l.decisions || { allowed: 0, denied: 0, error: 0 };
      const h = lHist.get(l.name) || { t: [], allowed: [], denied: [], prev: null };
      lHist.set(l.name, h);
      const p = h.prev;
      const dt = p ? now - p.now : 0;
      push(h.t, now);
      push(h.allowed, p && dt > 0 ? (d.allowed - p.allowed) / dt : null);
      push(h.denied, p && dt > 0 ? (d.denied - p.denied) / dt : null);
      h.prev = { now, allowed: d.allowed, denied: d.denied };
      const rules = l.rules.map((r) => r.max + '/' + num(r.window_secs) + 's').join(', ');
      return '<tr><td>' + esc(l.name) + ' <small>' + esc(l.algorithm) + ' ' + esc(rules) + '</small></td><td class="ok">' +
        d.allowed + ' allowed</td><td class="bad">' + d.denied + ' denied</td><td>' + (d.error ? d.error + ' errors ' : '') +
        l.keys + ' keys</td><td><canvas class="strip" data-limit="' + esc(l.name) + '"></canvas></td></tr>';
    });
    $('limits').innerHTML = rows.join('') || '<tr><td class="none">no limits configured</td></tr>';
    for (const cv of $('limits').querySelectorAll('canvas')) {
      const h = lHist.get(cv.dataset.limit);
      draw(cv, h.t, [{ color: COLORS[3], v: h.allowed }, { color: COLORS[2], v: h.denied }], null, true);
    }
  }

  // === the loop ===

  let busy = false;
  async function tick() {
    if (busy) return;
    busy = true;
    const now = Date.now() / 1000;
    try {
      if (now - listAt > 5) {
        listAt = now;
        await loadList();
      }
      // One picked metric at a time, by its exact name (never read as a
      // glob, whatever it contains): the server runs at most a few registry
      // reads at once and answers 503 beyond them.
      const series = [];
      for (const m of picked) {
        // Every tag set of the metric, page by page (at most 10 pages of
        // 1000: more charts than a page can show).
        let cursor = null;
        for (let pages = 0; pages < 10; pages++) {
          const page = await getJSON('/api/v1/series?metric=' + encodeURIComponent(m) +
            (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
          series.push(...page.series);
          cursor = page.next_cursor;
          if (!cursor) break;
        }
      }
      const [breakers, limits] = await Promise.all([
        getJSON('/api/v1/breakers'),
        getJSON('/api/v1/limits'),
      ]);
      for (const s of series) record(s, now);
      for (const [k, h] of hist) if (now - h.seen > KEEP) hist.delete(k);
      renderCards();
      renderBreakers(breakers, now);
      renderLimits(limits, now);
      $('status').textContent = 'updated ' + new Date().toLocaleTimeString() + ' · ' + names.length + ' metrics';
      $('status').className = 'status';
    } catch (e) {
      $('status').textContent = 'cannot reach rollstat: ' + e.message;
      $('status').className = 'status bad';
    } finally {
      busy = false;
    }
  }

  $('search').addEventListener('input', renderList);
  $('search').addEventListener('keydown', (e) => {
    const first = $('metrics').querySelector('li[data-metric]');
    if (e.key === 'Enter' && first) toggle(first.dataset.metric);
  });
  $('metrics').addEventListener('click', (e) => {
    const li = e.target.closest('li[data-metric]');
    if (li) toggle(li.dataset.metric);
  });
  $('window').addEventListener('change', (e) => {
    windowName = e.target.value;
    renderCards();
  });
  window.addEventListener('resize', renderCards);
  tick();
  setInterval(tick, 1000);
})();

// strom log page: draws the tables and sparklines of each snapshot the
// server pushes on "events" (Server-Sent Events, event "snapshot", the
// JSON of snapshot.json). Hand-written, no framework, no outside assets.
//
// Every figure sits in an element with data-field (and data-value holding
// the raw number where the text is formatted); partition rows carry
// data-topic and data-partition, position rows data-state, data-topic and
// data-partition, so a test can read the page. body[data-snapshots]
// counts the snapshots drawn and body[data-time] is the last one's time.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const topic = new URLSearchParams(location.search).get("topic");
  const query = topic === null ? "" : "?topic=" + encodeURIComponent(topic);
  let drawn = 0;

  function byId(id) { return document.getElementById(id); }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      e.setAttribute(k, String(v));
    }
    if (text !== undefined) {
      e.textContent = text; // text, never markup: names, paths and errors are data
    }
    return e;
  }

  // cell is a td for one figure: data-field names it, data-value holds the
  // raw value when the text is formatted.
  function cell(field, value, text, cls) {
    const attrs = { "data-field": field };
    if (value !== null && value !== undefined) {
      attrs["data-value"] = value;
    }
    if (cls) {
      attrs["class"] = cls;
    }
    return el("td", attrs, text === undefined ? (value === null ? "-" : String(value)) : text);
  }

  function fmtBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
  }

  function fmtRate(r) {
    return r >= 100 ? Math.round(r).toLocaleString("en") : r.toFixed(r === 0 ? 0 : 1);
  }

  // sparkline draws rates (records/s, oldest first) as an SVG polyline,
  // scaled to its largest rate, the newest at the right edge and the width
  // standing for history samples, so a young page's line grows leftwards.
  function sparkline(rates, history, intervalMs) {
    const w = 150;
    const h = 26;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", w);
    svg.setAttribute("height", h);
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("data-points", rates.length);
    const base = document.createElementNS(SVG, "line");
    base.setAttribute("x1", 0);
    base.setAttribute("x2", w);
    base.setAttribute("y1", h - 1);
    base.setAttribute("y2", h - 1);
    svg.appendChild(base);
    const max = Math.max(1, ...rates);
    const step = w / Math.max(1, history - 1, rates.length - 1);
    const y = (r) => (h - 1 - (r / max) * (h - 3)).toFixed(1);
    const pts = rates.map((r, i) => (w - (rates.length - 1 - i) * step).toFixed(1) + "," + y(r));
    if (pts.length === 1) {
      pts.unshift((w - step).toFixed(1) + "," + y(rates[0]));
    }
    if (pts.length > 0) {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", pts.join(" "));
      svg.appendChild(line);
    }
    const title = document.createElementNS(SVG, "title");
    const secs = Math.round((rates.length * intervalMs) / 1000);
    title.textContent = "records/s over the last " + secs + " s, peak " + fmtRate(Math.max(0, ...rates));
    svg.appendChild(title);
    return svg;
  }

  function drawPartitions(snap) {
    const body = byId("partitions-body");
    const rows = [];
    for (const t of snap.topics) {
      if (t.error) {
        const tr = el("tr", { "class": "topic-error", "data-topic": t.topic });
        tr.appendChild(cell("topic", null, t.topic));
        const td = el("td", { "colspan": 7, "data-field": "error" }, t.error);
        tr.appendChild(td);
        rows.push(tr);
      }
      for (const p of t.partitions) {
        const tr = el("tr", { "data-topic": t.topic, "data-partition": p.partition });
        tr.appendChild(cell("topic", null, t.topic));
        tr.appendChild(cell("partition", p.partition));
        tr.appendChild(cell("logStartOffset", p.logStartOffset, undefined, "num"));
        tr.appendChild(cell("nextOffset", p.nextOffset, undefined, "num"));
        tr.appendChild(cell("segments", p.segments, undefined, "num"));
        tr.appendChild(cell("bytes", p.bytes, fmtBytes(p.bytes), "num"));
        tr.appendChild(cell("rate", p.rate, fmtRate(p.rate), "num"));
        const spark = el("td", { "data-field": "rates" });
        spark.appendChild(sparkline(p.rates, snap.history, snap.sampleIntervalMs));
        tr.appendChild(spark);
        rows.push(tr);
      }
    }
    body.replaceChildren(...rows);
    byId("no-topics").hidden = snap.topics.length > 0;
  }

  function drawPositions(snap) {
    const body = byId("positions-body");
    const rows = snap.positions.map((p) => {
      const tr = el("tr", { "data-state": p.state, "data-topic": p.topic, "data-partition": p.partition });
      tr.appendChild(cell("state", null, p.state));
      tr.appendChild(cell("topic", null, p.topic));
      tr.appendChild(cell("partition", p.partition));
      tr.appendChild(cell("position", p.position, undefined, "num"));
      tr.appendChild(cell("nextOffset", p.nextOffset, undefined, "num"));
      tr.appendChild(cell("lag", p.lag, undefined, p.lag > 0 ? "num lagging" : "num"));
      tr.appendChild(cell("note", null, p.note || "", "note"));
      return tr;
    });
    body.replaceChildren(...rows);
    byId("no-positions").hidden = snap.positions.length > 0;
  }

  function drawErrors(snap) {
    byId("errors").replaceChildren(...snap.errors.map((e) => el("li", { "data-field": "error" }, e)));
    byId("errors-section").hidden = snap.errors.length === 0;
  }

  function draw(snap) {
    byId("dir").textContent = snap.dir;
    const updated = byId("updated");
    updated.textContent = new Date(snap.time).toLocaleTimeString();
    updated.setAttribute("datetime", snap.time);
    byId("interval").textContent = String(snap.sampleIntervalMs);
    drawErrors(snap);
    drawPartitions(snap);
    drawPositions(snap);
    drawn++;
    document.body.setAttribute("data-snapshots", drawn);
    document.body.setAttribute("data-time", snap.time);
  }

  function status(s) {
    const e = byId("status");
    e.textContent = s;
    e.className = "status " + s;
  }

  function connect() {
    const es = new EventSource("events" + query);
    es.addEventListener("snapshot", (ev) => {
      draw(JSON.parse(ev.data));
      status("live");
    });
    es.onerror = () => {
      // EventSource reconnects by itself (after the server's retry hint),
      // unless the server refused the stream (a bad topic parameter).
      status(es.readyState === EventSource.CLOSED ? "closed" : "reconnecting");
    };
  }

  connect();
})();

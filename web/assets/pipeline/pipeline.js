// The live page of a strom pipeline: it reads snapshots from the page's
// event stream ("events", one JSON snapshot per event) and draws them with
// the DOM (textContent only: names and errors are never parsed as HTML).
// Stable hooks for tests: data-stage, data-topic, data-partition, data-field,
// data-watermark-stage (a watermark cell's stage index), data-ms (a
// watermark in ms since the Unix epoch, "" for none) and data-idle.
"use strict";

const fieldsOfStage = [
  ["in", "in"], ["out", "out"], ["inPerSecond", "in/s"], ["outPerSecond", "out/s"],
  ["inFlight", "in flight"], ["skipped", "skipped"], ["deadLettered", "dead-lettered"], ["failed", "failed"],
  ["retried", "retried"], ["late", "late"],
  ["busy", "busy ms/s"], ["backPressured", "back-pressured ms/s"], ["idle", "idle ms/s"],
];

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n) {
  if (typeof n !== "number") return String(n);
  if (Number.isInteger(n)) return n.toLocaleString("en");
  return n.toFixed(1);
}

function duration(ns) {
  const s = ns / 1e9;
  if (s < 1) return (ns / 1e6).toFixed(1) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  return (s / 60).toFixed(1) + " min";
}

// stageColour follows Flink's job graph: back-pressure from grey to black,
// otherwise from blue (idle) to red (busy).
function stageColour(st) {
  const busy = st.busyMsPerSecond / 1000, back = st.backPressuredMsPerSecond / 1000;
  if (back > busy && back > 0.1) {
    const l = Math.round(60 - 50 * back);
    return "hsl(0, 0%, " + l + "%)";
  }
  const hue = Math.round(215 - 215 * busy); // 215 blue .. 0 red
  return "hsl(" + hue + ", 70%, 45%)";
}

function stageValue(st, f) {
  if (!st.timed && (f === "busy" || f === "backPressured" || f === "idle")) return "–";
  switch (f) {
    case "busy": return st.busyMsPerSecond;
    case "backPressured": return st.backPressuredMsPerSecond;
    case "idle": return st.idleMsPerSecond;
    default: return st[f];
  }
}

// watermark formats a watermark in ms since the Unix epoch as a UTC date
// and time with milliseconds, "2026-12-03 08:00:19.000" ("–" when there is
// none yet): the same text whatever the browser's zone, so a test can
// compare it.
function watermark(has, ms) {
  if (!has) return "–";
  const d = new Date(ms);
  if (isNaN(d.getTime())) return String(ms);
  return d.toISOString().replace("T", " ").replace("Z", "");
}

function drawStages(stages) {
  const box = document.getElementById("stages");
  box.replaceChildren();
  if (!stages || stages.length === 0) {
    box.append(el("p", { class: "empty" }, "no stages"));
    return;
  }
  stages.forEach((st, i) => {
    if (i > 0) box.append(el("span", { class: "arrow" }, "→"));
    const div = el("div", { class: "stage", "data-stage": String(st.index), "data-name": st.name });
    const h = el("h3", { "data-field": "name" }, st.name + (st.workers > 1 ? " ×" + st.workers : ""));
    h.style.background = st.timed ? stageColour(st) : "#777";
    div.append(h);
    const bar = el("div", { class: "bar", title: st.timed ? "busy / back-pressured / idle" : "not timed" });
    for (const [cls, v] of (st.timed ? [["busy", st.busyMsPerSecond], ["back", st.backPressuredMsPerSecond], ["idle", st.idleMsPerSecond]] : [])) {
      const s = el("span", { class: cls });
      s.style.width = (v / 10) + "%";
      bar.append(s);
    }
    div.append(bar);
    const dl = el("dl");
    for (const [f, label] of fieldsOfStage) {
      dl.append(el("dt", {}, label), el("dd", { "data-field": f }, fmt(stageValue(st, f))));
    }
    if (st.eventTime) {
      dl.append(el("dt", {}, "watermark"),
        el("dd", { "data-field": "watermark", "data-ms": st.hasWatermark ? String(st.watermarkMs) : "" }, watermark(st.hasWatermark, st.watermarkMs)));
    }
    div.append(dl);
    box.append(div);
  });
}

function sparkline(values) {
  const w = 120, h = 24, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  if (values && values.length > 1) {
    const top = Math.max(...values, 1);
    const pts = values.map((v, i) => (i * w / (values.length - 1)).toFixed(1) + "," + (h - 1 - (v / top) * (h - 2)).toFixed(1));
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    svg.append(line);
  }
  return svg;
}

// drawPartitionHead sets the partitions' header: the fixed columns and one
// per event-time stage (its watermark for each partition).
function drawPartitionHead(stages) {
  const row = document.querySelector("#partitions thead tr");
  for (const th of row.querySelectorAll("th[data-watermark-stage]")) th.remove();
  for (const st of stages || []) {
    if (!st.eventTime) continue;
    row.append(el("th", { "data-watermark-stage": String(st.index), title: "the partition's watermark in stage " + st.name }, "watermark: " + st.name));
  }
}

function drawPartitions(parts, history, stages) {
  drawPartitionHead(stages);
  const body = document.querySelector("#partitions tbody");
  body.replaceChildren();
  if (!parts || parts.length === 0) {
    const tr = el("tr");
    const cols = document.querySelectorAll("#partitions thead th").length;
    tr.append(el("td", { colspan: String(cols), class: "empty text" }, "no partition read yet"));
    body.append(tr);
    return;
  }
  const hist = new Map((history || []).map(h => [h.topic + "/" + h.partition, h]));
  for (const p of parts) {
    const tr = el("tr", { "data-topic": p.topic, "data-partition": String(p.partition) });
    if (p.stalled) tr.classList.add("stalled");
    const h = hist.get(p.topic + "/" + p.partition);
    tr.append(
      el("td", { class: "text", "data-field": "topic" }, p.topic),
      el("td", { "data-field": "partition" }, String(p.partition)),
      el("td", { "data-field": "position" }, fmt(p.position)),
      el("td", { "data-field": "highWatermark" }, p.hasHighWatermark ? fmt(p.highWatermark) : "–"),
      el("td", { "data-field": "lag" }, p.hasHighWatermark ? fmt(p.lag) : "–"),
      el("td", { "data-field": "inFlight" }, fmt(p.inFlight)),
      el("td", { "data-field": "recordsPerSecond" }, fmt(p.recordsPerSecond)),
    );
    const spark = el("td", { "data-field": "sparkline" });
    spark.append(sparkline(h ? h.recordsPerSecond : []));
    tr.append(spark,
      el("td", { "data-field": "sinceProgress" }, duration(p.sinceProgressNs)),
      el("td", { class: "text", "data-field": "state" }, p.stalled ? "STALLED" : (p.lag > 0 || p.inFlight > 0 ? "behind" : "caught up")));
    for (const w of p.watermarks || []) {
      const td = el("td", { "data-field": "watermark", "data-watermark-stage": String(w.index),
        "data-ms": w.hasWatermark ? String(w.watermarkMs) : "", "data-idle": String(w.idle) },
        watermark(w.hasWatermark, w.watermarkMs));
      if (w.idle) {
        td.classList.add("idle");
        td.append(el("span", { class: "idle-mark", "data-field": "idle" }, " idle"));
      }
      tr.append(td);
    }
    body.append(tr);
  }
}

function drawCheckpoints(cps) {
  const body = document.querySelector("#checkpoints tbody");
  body.replaceChildren();
  if (!cps || cps.length === 0) {
    const tr = el("tr");
    tr.append(el("td", { colspan: "5", class: "empty text" }, "no checkpoint yet"));
    body.append(tr);
    return;
  }
  cps.slice().reverse().forEach((c, i) => {
    const tr = el("tr", { "data-checkpoint": String(i) });
    if (c.error) tr.classList.add("failed");
    const pos = (c.positions || []).map(p => p.topic + "/" + p.partition + "@" + p.position.offset).join(", ");
    tr.append(
      el("td", { class: "text", "data-field": "at" }, new Date(c.at).toLocaleTimeString()),
      el("td", { "data-field": "duration" }, duration(c.durationNs)),
      el("td", { class: "text", "data-field": "positions" }, pos),
      el("td", { "data-field": "stateBytes" }, fmt(c.stateBytes)),
      el("td", { class: "text", "data-field": "result" }, c.error ? "failed: " + c.error : "saved"));
    body.append(tr);
  });
}

function drawErrors(errs) {
  const body = document.querySelector("#errors tbody");
  body.replaceChildren();
  if (!errs || errs.length === 0) {
    const tr = el("tr");
    tr.append(el("td", { colspan: "7", class: "empty text" }, "no error"));
    body.append(tr);
    return;
  }
  errs.slice().reverse().forEach((e, i) => {
    const tr = el("tr", { "data-error": String(i) });
    tr.append(
      el("td", { class: "text", "data-field": "at" }, new Date(e.at).toLocaleTimeString()),
      el("td", { class: "text", "data-field": "stage" }, e.stage),
      el("td", { class: "text", "data-field": "topic" }, e.topic),
      el("td", { "data-field": "partition" }, String(e.partition)),
      el("td", { "data-field": "offset" }, fmt(e.offset)),
      el("td", { "data-field": "attempt" }, String(e.attempt)),
      el("td", { class: "text", "data-field": "error" }, e.error));
    body.append(tr);
  });
}

function draw(snap) {
  document.getElementById("status").textContent = snap.running ? "running" : "not running";
  document.getElementById("time").textContent = new Date(snap.time).toLocaleTimeString();
  document.getElementById("stall-limit").textContent = snap.stallAfterNs > 0 ? "stall after " + duration(snap.stallAfterNs) : "stall detection off";
  drawStages(snap.stages);
  drawPartitions(snap.partitions, snap.history, snap.stages);
  drawCheckpoints(snap.checkpoints);
  drawErrors(snap.errors);
  document.body.setAttribute("data-updated", String(Date.now()));
  document.body.setAttribute("data-time", snap.time);
}

function connect() {
  const es = new EventSource("events" + location.search);
  es.addEventListener("snapshot", ev => draw(JSON.parse(ev.data)));
  es.onerror = () => { document.getElementById("status").textContent = "disconnected: retrying"; };
}

connect();

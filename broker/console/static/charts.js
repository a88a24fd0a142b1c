// filtex-broker console: small SVG line charts of the broker's last 15 minutes (GET
// /api/history, docs/CONSOLE.md). No libraries. The x axis runs from the oldest point kept to
// now, at the right edge; the y axis starts at 0 and ends at the chart's data-max (the largest value
// drawn, or a fixed maximum such as --max-memory). A missing point (null: the node or link
// did not exist then) breaks the line. Everything is inside one function: the page sees only
// window.filtexCharts.
"use strict";

(() => {

  const SVG = "http://www.w3.org/2000/svg";
  const CHART_WIDTH = 180;
  const CHART_HEIGHT = 36;

  function svgEl(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return node;
  }

  // A path through the points (x, y in the chart's pixels); null values break it.
  // x: CHART_WIDTH * (time - start) / span; y: CHART_HEIGHT * (1 - value / max).
  function pathData(times, values, start, span, max) {
    let d = "";
    let drawing = false;
    values.forEach((value, i) => {
      if (value === null || value === undefined) { drawing = false; return; }
      const x = (CHART_WIDTH * (times[i] - start) / span).toFixed(1);
      const y = (CHART_HEIGHT - CHART_HEIGHT * value / max).toFixed(2);
      d += `${drawing ? "L" : "M"}${x},${y} `;
      drawing = true;
    });
    return d.trim();
  }

  function formatValue(value, unit) {
    if (value === null || value === undefined) return "–";
    if (unit === "B") {
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0;
      while (value >= 1024 && i < units.length - 1) { value /= 1024; i += 1; }
      return `${value.toFixed(i ? 1 : 0)} ${units[i]}`;
    }
    return `${Number(value.toFixed(1))}${unit}`;
  }

  // series: [{name, label, values}], drawn in order; options: {max, unit, chart}.
  // Returns an <svg> whose <path data-series=name> are the lines; the tooltip has the latest
  // value of each.
  function lineChart(history, series, options) {
    const opts = options || {};
    const times = history.times;
    // The window drawn: the last span seconds, or since the first point while there are
    // fewer (a broker that started a minute ago fills the chart with that minute).
    const end = times.length ? times[times.length - 1] : 0;
    const start = times.length ? Math.max(end - history.span, times[0]) : 0;
    const width = Math.max(end - start, history.interval);
    let max = opts.max || 0;
    if (!opts.max) {
      for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
    }
    max = max > 0 ? max : 1;
    const svg = svgEl("svg", {
      class: "chart", width: CHART_WIDTH, height: CHART_HEIGHT,
      viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, "data-chart": opts.chart || "",
      "data-max": max, "data-start": start, "data-span": width,
      "data-width": CHART_WIDTH, "data-height": CHART_HEIGHT,
    });
    svg.append(svgEl("rect", { class: "frame", x: 0, y: 0, width: CHART_WIDTH,
                               height: CHART_HEIGHT }));
    const latest = [];
    for (const s of series) {
      svg.append(svgEl("path", { class: `line ${s.name}`, "data-series": s.name,
                                 d: pathData(times, s.values, start, width, max) }));
      const last = s.values.length ? s.values[s.values.length - 1] : null;
      latest.push(`${s.label}: ${formatValue(last, opts.unit || "")}`);
    }
    const title = svgEl("title");
    const minutes = width >= 90 ? `${Math.round(width / 60)} min` : `${Math.round(width)} s`;
    title.textContent = `last ${minutes} (top: ${formatValue(max, opts.unit || "")}); now ${latest.join(", ")}`;
    svg.prepend(title);
    return svg;
  }

  // The charts the console draws, by what they show.
  const CHARTS = {
    nodeRates(history, name) {
      const node = history.nodes[name];
      if (!node) return null;
      return lineChart(history, [
        { name: "in", label: "in/s", values: node.in },
        { name: "out", label: "out/s", values: node.out },
        { name: "filtered_out", label: "filtered out/s", values: node.filtered_out },
      ], { unit: "/s", chart: `rates:${name}` });
    },
    nodeDepth(history, name) {
      const node = history.nodes[name];
      if (!node) return null;
      return lineChart(history, [{ name: "depth", label: "depth", values: node.depth }],
                       { chart: `depth:${name}` });
    },
    link(history, id) {
      const link = history.links[id];
      if (!link) return null;
      return lineChart(history, [
        { name: "matched", label: "matched/s", values: link.matched },
        { name: "not_matched", label: "not matched/s", values: link.not_matched },
      ], { unit: "/s", chart: `link:${id}` });
    },
    memory(history) {
      return lineChart(history, [{ name: "memory", label: "used", values: history.memory.used }],
                       { max: history.memory.limit, unit: "B", chart: "memory" });
    },
  };

  // The latest rate of a series (what the tables show before two polls give one of their own).
  function latestRate(history, kind, key, series) {
    const found = history && history[kind][key];
    if (!found) return null;
    const values = found[series];
    return values.length ? values[values.length - 1] : null;
  }

  window.filtexCharts = { CHARTS, latestRate, formatValue };
})();

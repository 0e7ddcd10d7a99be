// Canvas drawing of one panel of a view (render.py): a quantised image with its axes, ticks,
// units, colour bar and markers, or a line plot. No external code.
"use strict";

const Plot = (() => {
  const NO_VALUE = 255;          // render.NO_VALUE: pixel without a value
  const LEVELS = 254;            // render.LEVELS: codes 0..LEVELS span the colour limits
  const PANEL_WIDTH = 430;       // CSS pixels of one panel
  const PANEL_HEIGHT = 380;
  const MARGIN = {left: 62, right: 92, top: 30, bottom: 46};
  const COLOURS = {text: "#d9dee8", muted: "#8e98aa", axis: "#6c7689", empty: "#262b33",
                   background: "#151920", line: "#7cc4ff", zero: "#4b5566"};
  const FONT = "12px system-ui, sans-serif";
  const TITLE_FONT = "600 13px system-ui, sans-serif";

  // About `count` round tick values (1, 2, 2.5, 5 x 10^n) covering [low, high].
  function ticks(low, high, count = 5) {
    if (!(high > low)) return [low];
    const raw = (high - low) / count;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map(f => f * power).find(s => s >= raw);
    const values = [];
    for (let v = Math.ceil(low / step - 1e-9) * step; v <= high + step * 1e-9; v += step) {
      values.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return values;
  }

  function label(value, values) {
    const span = Math.max(...values.map(Math.abs));
    const step = values.length > 1 ? Math.abs(values[1] - values[0]) : span;
    if (span >= 1e4 || (span > 0 && span < 1e-3)) return value.toExponential(1);
    const decimals = Math.max(0, Math.min(4, -Math.floor(Math.log10(step || 1) + 1e-9)));
    return value.toFixed(decimals);
  }

  function prepare(canvas, width, height) {
    const ratio = window.devicePixelRatio || 1;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const context = canvas.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.fillStyle = COLOURS.background;
    context.fillRect(0, 0, width, height);
    return context;
  }

  function title(context, text, width) {
    context.font = TITLE_FONT;
    context.fillStyle = COLOURS.text;
    context.textAlign = "center";
    context.textBaseline = "top";
    context.fillText(text, width / 2, 8, width - 12);
  }

  // Pixel-edge extent of pixel-centre coordinates first..last over `count` pixels.
  function edges(axis, count) {
    const step = count > 1 ? (axis.last - axis.first) / (count - 1) : 1;
    return [axis.first - step / 2, axis.last + step / 2];
  }

  // Ticks and label of the x axis below, the y axis to the left of box {x, y, w, h}; `xRange`
  // maps to left..right, `yRange` to top..bottom.
  function axes(context, box, xRange, yRange, xLabel, yLabel) {
    context.strokeStyle = COLOURS.axis;
    context.lineWidth = 1;
    context.strokeRect(box.x - 0.5, box.y - 0.5, box.w + 1, box.h + 1);
    context.font = FONT;
    context.fillStyle = COLOURS.muted;
    const toX = v => box.x + (v - xRange[0]) / (xRange[1] - xRange[0]) * box.w;
    const toY = v => box.y + (v - yRange[0]) / (yRange[1] - yRange[0]) * box.h;
    const xTicks = ticks(Math.min(...xRange), Math.max(...xRange), Math.max(2, Math.round(box.w / 70)));
    context.textAlign = "center";
    context.textBaseline = "top";
    for (const v of xTicks) {
      const x = toX(v);
      context.beginPath(); context.moveTo(x, box.y + box.h); context.lineTo(x, box.y + box.h + 4); context.stroke();
      context.fillText(label(v, xTicks), x, box.y + box.h + 6);
    }
    const yTicks = ticks(Math.min(...yRange), Math.max(...yRange), Math.max(2, Math.round(box.h / 50)));
    context.textAlign = "right";
    context.textBaseline = "middle";
    for (const v of yTicks) {
      const y = toY(v);
      context.beginPath(); context.moveTo(box.x - 4, y); context.lineTo(box.x, y); context.stroke();
      context.fillText(label(v, yTicks), box.x - 6, y);
    }
    context.fillStyle = COLOURS.text;
    context.textAlign = "center";
    context.textBaseline = "bottom";
    context.fillText(xLabel, box.x + box.w / 2, box.y + box.h + 38);
    context.save();
    context.translate(14, box.y + box.h / 2);
    context.rotate(-Math.PI / 2);
    context.textBaseline = "middle";
    context.fillText(yLabel, 0, 0);
    context.restore();
    return {toX, toY};
  }

  function colourBar(context, box, colour, table) {
    const bar = {x: box.x + box.w + 12, y: box.y, w: 12, h: box.h};
    const rows = Math.max(2, Math.round(bar.h));
    for (let i = 0; i < rows; i++) {  // top row = high end of the map
      const [r, g, b] = table[Math.round((1 - i / (rows - 1)) * LEVELS)];
      context.fillStyle = `rgb(${r},${g},${b})`;
      context.fillRect(bar.x, bar.y + i * bar.h / rows, bar.w, bar.h / rows + 0.5);
    }
    context.strokeStyle = COLOURS.axis;
    context.strokeRect(bar.x - 0.5, bar.y - 0.5, bar.w + 1, bar.h + 1);
    const values = ticks(colour.low, colour.high, Math.max(2, Math.round(bar.h / 55)));
    context.font = FONT;
    context.fillStyle = COLOURS.muted;
    context.textAlign = "left";
    context.textBaseline = "middle";
    let widest = 0;
    for (const v of values) {
      const y = bar.y + (colour.high - v) / ((colour.high - colour.low) || 1) * bar.h;
      context.beginPath(); context.moveTo(bar.x + bar.w, y); context.lineTo(bar.x + bar.w + 3, y); context.stroke();
      const text = label(v, values);
      widest = Math.max(widest, context.measureText(text).width);
      context.fillText(text, bar.x + bar.w + 5, y);
    }
    context.save();  // the label reads upwards, beside the tick labels (as matplotlib's colour bars)
    context.fillStyle = COLOURS.text;
    context.translate(bar.x + bar.w + 5 + widest + 12, bar.y + bar.h / 2);
    context.rotate(-Math.PI / 2);
    context.textAlign = "center";
    context.textBaseline = "middle";
    context.fillText(colour.label, 0, 0);
    context.restore();
  }

  // The panel's pixels through the colour table, on an offscreen canvas of rows x columns. Where
  // a pixel has no value, the panel's underlay (render.py: same grid, own map) shows through.
  function picture(panel, table, colormaps) {
    const decode = text => Uint8Array.from(atob(text), c => c.charCodeAt(0));
    const codes = decode(panel.pixels);
    const under = panel.underlay ? decode(panel.underlay.pixels) : null;
    const underTable = panel.underlay ? (colormaps[panel.underlay.colour.map] || colormaps.gray) : null;
    const image = new ImageData(panel.columns, panel.rows);
    const empty = [0x26, 0x2b, 0x33];
    for (let i = 0; i < codes.length; i++) {
      let colour = empty;
      if (codes[i] !== NO_VALUE) colour = table[codes[i]];
      else if (under && under[i] !== NO_VALUE) colour = underTable[under[i]];
      const [r, g, b] = colour;
      image.data[4 * i] = r; image.data[4 * i + 1] = g; image.data[4 * i + 2] = b; image.data[4 * i + 3] = 255;
    }
    const offscreen = document.createElement("canvas");
    offscreen.width = panel.columns;
    offscreen.height = panel.rows;
    offscreen.getContext("2d").putImageData(image, 0, 0);
    return offscreen;
  }

  function drawImage(canvas, panel, colormaps) {
    const context = prepare(canvas, PANEL_WIDTH, PANEL_HEIGHT);
    title(context, panel.title, PANEL_WIDTH);
    const xRange = edges(panel.x, panel.columns);
    const yRange = edges(panel.y, panel.rows);
    const box = {x: MARGIN.left, y: MARGIN.top, w: PANEL_WIDTH - MARGIN.left - MARGIN.right,
                 h: PANEL_HEIGHT - MARGIN.top - MARGIN.bottom};
    if (panel.aspect === "equal") {  // physical proportions: shrink one side, centred
      const dataWidth = Math.abs(xRange[1] - xRange[0]), dataHeight = Math.abs(yRange[1] - yRange[0]);
      const scale = Math.min(box.w / dataWidth, box.h / dataHeight);
      const w = dataWidth * scale, h = dataHeight * scale;
      box.x += (box.w - w) / 2; box.y += (box.h - h) / 2; box.w = w; box.h = h;
    }
    const table = colormaps[panel.colour.map] || colormaps.gray;
    context.imageSmoothingEnabled = false;
    context.drawImage(picture(panel, table, colormaps), box.x, box.y, box.w, box.h);
    const {toX, toY} = axes(context, box, xRange, yRange, panel.x.label, panel.y.label);
    for (const marker of panel.markers || []) {
      context.save();
      context.strokeStyle = marker.colour;
      context.setLineDash([5, 4]);
      context.lineWidth = 1.2;
      context.beginPath();
      if (marker.axis === "x") { context.moveTo(toX(marker.value), box.y); context.lineTo(toX(marker.value), box.y + box.h); }
      else { context.moveTo(box.x, toY(marker.value)); context.lineTo(box.x + box.w, toY(marker.value)); }
      context.stroke();
      context.restore();
    }
    colourBar(context, {x: box.x, y: box.y, w: box.w, h: box.h}, panel.colour, table);
  }

  function drawLine(canvas, panel) {
    const context = prepare(canvas, PANEL_WIDTH, PANEL_HEIGHT);
    title(context, panel.title, PANEL_WIDTH);
    const box = {x: MARGIN.left, y: MARGIN.top, w: PANEL_WIDTH - MARGIN.left - 24, h: PANEL_HEIGHT - MARGIN.top - MARGIN.bottom};
    const xs = panel.x.values, ys = panel.y.values;
    const finite = ys.filter(v => v !== null);
    let low = Math.min(0, ...finite), high = Math.max(0, ...finite);
    if (!(high > low)) { low -= 1; high += 1; }
    const pad = (high - low) * 0.06;
    const xLow = Math.min(...xs), xHigh = Math.max(...xs);
    const xRange = xHigh > xLow ? [xLow, xHigh] : [xLow - 1, xLow + 1];
    const {toX, toY} = axes(context, box, xRange, [high + pad, low - pad], panel.x.label, panel.y.label);
    context.strokeStyle = COLOURS.zero;
    context.beginPath(); context.moveTo(box.x, toY(0)); context.lineTo(box.x + box.w, toY(0)); context.stroke();
    context.strokeStyle = COLOURS.line;
    context.fillStyle = COLOURS.line;
    context.lineWidth = 1.6;
    context.beginPath();
    let drawing = false;
    xs.forEach((x, i) => {
      if (ys[i] === null) { drawing = false; return; }
      if (drawing) context.lineTo(toX(x), toY(ys[i])); else context.moveTo(toX(x), toY(ys[i]));
      drawing = true;
    });
    context.stroke();
    xs.forEach((x, i) => {
      if (ys[i] === null) return;
      context.beginPath(); context.arc(toX(x), toY(ys[i]), 2.2, 0, 2 * Math.PI); context.fill();
    });
  }

  function draw(canvas, panel, colormaps) {
    if (panel.kind === "line") drawLine(canvas, panel); else drawImage(canvas, panel, colormaps);
  }

  return {draw, ticks};
})();

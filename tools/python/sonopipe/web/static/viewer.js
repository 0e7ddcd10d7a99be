// The page: one WebSocket to sonopipe-web; per pipeline a card with its latest images and status
// numbers; the daemon's totals on top, the viewer's own counters (conflation) below. After
// drawing a message the page acknowledges it; only then does the server send the next one.
// Live parameters (docs/live-parameters.md): a slider per numeric live parameter with a declared
// range (a list for choices), with its unit; a change goes to POST /parameters, which the server
// applies through its control connection; the page shows the generation or the daemon's reason.
// window.sonopipeViewer exposes what was drawn (for tests and the curious).
"use strict";

(() => {
  const CHAINS = {arfi: "ARFI", strain: "Strain", perfusion: "Perfusion", doppler: "Doppler", generic: "Generic"};
  const state = {colormaps: null, views: {}, statusMessages: 0, cards: {}, status: null, viewer: null, errors: [],
                 controlsEnabled: false, lastSet: null};

  const number = value => Number(value ?? 0);
  const fixed = (value, decimals) => number(value).toFixed(decimals);
  const element = (tag, className, text) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };

  function setField(root, name, text) {
    const node = root.querySelector(`[data-field="${name}"]`);
    if (!node) return;
    node.textContent = text;
    const item = node.parentElement;
    if (item.classList.contains("alert")) item.classList.toggle("nonzero", Number(text) > 0);  // drops in red
  }

  // A pipeline's card: heading, status numbers, panels.
  function card(pipeline) {
    if (state.cards[pipeline]) return state.cards[pipeline];
    document.getElementById("waiting").hidden = true;
    const section = element("section", "pipeline");
    section.dataset.pipeline = pipeline;
    const head = element("div", "pipeline-head");
    head.append(element("h2", null, pipeline), element("span", "chain", ""), element("span", "caption", ""),
                element("span", "frame", "waiting for results…"));
    const numbers = element("dl", "pipeline-status");
    const fields = [
      ["rate", "rate (frames/s)"], ["latencyMsP50", "latency p50 (ms)"], ["latencyMsP99", "latency p99 (ms)"],
      ["framesAccepted", "accepted"], ["framesProcessed", "processed"], ["resultsPublished", "published"],
      ["framesDropped", "dropped"], ["stageErrors", "stage errors"], ["queue", "queue"]];
    for (const [name, title] of fields) {
      const item = element("div", name === "framesDropped" || name === "stageErrors" ? "count alert" : "count");
      const value = element("dd", null, "–");
      value.dataset.field = name;
      item.append(element("dt", null, title), value);
      numbers.append(item);
    }
    const controls = element("div", "controls");
    const panels = element("div", "panels");
    section.append(head, numbers, controls, panels);
    document.getElementById("pipelines").append(section);  // the status lists pipelines in config order
    return (state.cards[pipeline] = {section, head, numbers, controls, panels, canvases: [], inputs: {}});
  }

  // A step that moves a slider in round numbers: a power of ten near a thousandth of the range.
  const stepOf = (min, max) => Math.pow(10, Math.floor(Math.log10((max - min) / 1000)));

  async function setParameter(name, value, note) {
    note.textContent = "…";
    note.className = "note";
    try {
      const response = await fetch("/parameters", {method: "POST", headers: {"Content-Type": "application/json"},
                                                   body: JSON.stringify({name, value})});
      const reply = await response.json();
      state.lastSet = {name, value, reply};
      note.textContent = reply.ok ? `generation ${reply.generation}` : reply.error;
      note.className = reply.ok ? "note ok" : "note refused";
    } catch (error) {
      state.lastSet = {name, value, reply: {ok: false, error: String(error)}};
      note.textContent = String(error);
      note.className = "note refused";
    }
  }

  // One control per live parameter that has one: numbers with a finite range (slider), choices (list).
  function parameterControl(target, parameter) {
    const min = Number(parameter.min ?? 0), max = Number(parameter.max ?? 0);
    const numeric = (parameter.type === "integer" || parameter.type === "real") && isFinite(min) && isFinite(max) && max > min;
    if (!parameter.live || !(numeric || parameter.type === "choice")) return null;
    const row = element("label", "control");
    row.append(element("span", "control-name", parameter.name.split(".").slice(1).join(".")));
    let input;
    if (numeric) {
      input = element("input");
      input.type = "range";
      input.min = String(min);
      input.max = String(max);
      input.step = parameter.type === "integer" ? "1" : String(stepOf(min, max));
    } else {
      input = element("select");
      for (const choice of parameter.choices || []) input.append(element("option", null, choice));
    }
    input.dataset.parameter = parameter.name;
    input.value = parameter.value;
    const shown = element("output", "control-value", parameter.value);
    const unit = element("span", "control-unit", parameter.unit || "");
    const note = element("span", "note", "");
    input.addEventListener("input", () => { input.dataset.editing = "1"; shown.textContent = input.value; });
    input.addEventListener("change", async () => {
      const value = parameter.type === "integer" ? parseInt(input.value, 10)
                  : parameter.type === "real" ? Number(input.value) : input.value;
      await setParameter(parameter.name, value, note);
      delete input.dataset.editing;
    });
    row.title = parameter.doc || "";
    row.append(input, shown, unit, note);
    target.controls.append(row);
    return {input, shown};
  }

  function showParameters(target, parameters) {
    if (!state.controlsEnabled) return;
    for (const parameter of parameters || []) {
      if (!(parameter.name in target.inputs)) target.inputs[parameter.name] = parameterControl(target, parameter);
      const control = target.inputs[parameter.name];
      if (control && !control.input.dataset.editing) {  // the daemon's value, unless the user is moving it
        control.input.value = parameter.value;
        control.shown.textContent = parameter.value;
      }
    }
  }

  function showView(view) {
    const target = card(view.pipeline);
    target.head.querySelector(".chain").textContent = CHAINS[view.chain] || view.chain;
    target.head.querySelector(".caption").textContent = view.caption;
    const latency = view.daemon_latency_ms === null ? "" : ` · ${view.daemon_latency_ms.toFixed(1)} ms in the daemon`;
    target.head.querySelector(".frame").textContent =
      `input #${view.input_sequence} · stream ${view.stream_id} · ${view.backend}${latency}`;
    while (target.canvases.length < view.panels.length) {
      const canvas = element("canvas", "panel");
      target.panels.append(canvas);
      target.canvases.push(canvas);
    }
    while (target.canvases.length > view.panels.length) target.canvases.pop().remove();
    view.panels.forEach((panel, i) => {
      Plot.draw(target.canvases[i], panel, state.colormaps);
      target.canvases[i].dataset.title = panel.title;
    });
    const previous = state.views[view.pipeline];
    state.views[view.pipeline] = {count: (previous ? previous.count : 0) + 1, chain: view.chain,
                                  input_sequence: view.input_sequence, stream_id: view.stream_id,
                                  version: view.version, panels: view.panels.map(p => p.title)};
  }

  function showStatus(status, viewer) {
    state.status = status;
    state.viewer = viewer;
    state.statusMessages += 1;
    const daemon = document.getElementById("daemon");
    setField(daemon, "backend", status.backend || "–");
    setField(daemon, "deviceName", status.deviceName || "–");
    setField(daemon, "uptimeS", fixed(status.uptimeS, 1));
    for (const name of ["framesReceived", "framesProcessed", "resultsPublished", "framesRejected", "framesDropped",
                        "framesMissing"]) {
      setField(daemon, name, String(number(status[name])));
    }
    daemon.querySelector(".backend-reason").textContent = status.backendReason ? `(${status.backendReason})` : "";
    for (const pipeline of status.pipelines || []) {
      const target = card(pipeline.name);
      const interval = number(pipeline.intervalMsP50);
      setField(target.numbers, "rate", interval > 0 ? (1000 / interval).toFixed(1) : "–");
      setField(target.numbers, "latencyMsP50", fixed(pipeline.latencyMsP50, 3));
      setField(target.numbers, "latencyMsP99", fixed(pipeline.latencyMsP99, 3));
      for (const name of ["framesAccepted", "framesProcessed", "resultsPublished", "framesDropped", "stageErrors"]) {
        setField(target.numbers, name, String(number(pipeline[name])));
      }
      setField(target.numbers, "queue", `${number(pipeline.queueDepth)}/${number(pipeline.queueCapacity)}`);
      showParameters(target, pipeline.parameters);
    }
    const footer = document.getElementById("viewer");
    for (const [name, value] of Object.entries(viewer)) setField(footer, name, String(value));
  }

  function connect() {
    const connection = document.getElementById("connection");
    const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
    socket.onopen = () => { connection.textContent = "connected"; connection.className = "connection live"; };
    socket.onclose = () => {
      connection.textContent = "disconnected – retrying";
      connection.className = "connection lost";
      setTimeout(connect, 2000);
    };
    socket.onmessage = event => {
      const message = JSON.parse(event.data);
      try {
        if (message.type === "view") showView(message);
        else if (message.type === "status") showStatus(message.status, message.viewer);
      } catch (error) {  // kept for the tests and the console; the next message is still asked for
        state.errors.push(`${message.type} ${message.pipeline || ""}: ${error.stack || error}`);
        console.error(error);
      } finally {
        // Acknowledge once the browser has painted what it drew: a slow or hidden page asks for less.
        requestAnimationFrame(() => socket.readyState === WebSocket.OPEN && socket.send('{"type":"ack"}'));
      }
    };
  }

  // Per pipeline and panel: mean and standard deviation of the drawn canvas's grey levels.
  function canvasStatistics() {
    const statistics = {};
    for (const [pipeline, target] of Object.entries(state.cards)) {
      statistics[pipeline] = target.canvases.map(canvas => {
        const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        let sum = 0, squares = 0;
        const count = data.length / 4;
        for (let i = 0; i < data.length; i += 4) {
          const grey = (data[i] + data[i + 1] + data[i + 2]) / 3;
          sum += grey; squares += grey * grey;
        }
        const mean = sum / count;
        return {title: canvas.dataset.title, mean, sd: Math.sqrt(Math.max(0, squares / count - mean * mean))};
      });
    }
    return statistics;
  }

  window.sonopipeViewer = {
    state: () => ({views: state.views, statusMessages: state.statusMessages, viewer: state.viewer,
                   colormaps: state.colormaps !== null, errors: state.errors,
                   controlsEnabled: state.controlsEnabled, lastSet: state.lastSet}),
    canvasStatistics,
  };

  Promise.all([fetch("/colormaps.json").then(response => response.json()),
               fetch("/controls.json").then(response => response.json())]).then(([tables, controls]) => {
    state.colormaps = tables;
    state.controlsEnabled = Boolean(controls.enabled);
    connect();
  });
})();

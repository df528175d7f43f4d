// SeaTide web UI: a small single-page app over the REST API (/api/v1). No build step.
//
// Every page is a view with a root element and a refresh() that reads the API; the router
// calls refresh() once a second while the view is shown, so the page updates without a
// reload. The UI only uses /api/v1, so any coordinator serves it and it survives failover.
"use strict";

const POLL_MS = 1000;
const TOKEN_KEY = "seatide.apiToken";
const TERMINAL = ["FINISHED", "FAILED", "CANCELED", "SAVEPOINT_DONE"];
const STATUSES = ["CREATED", "PENDING", "SCHEDULED", "RUNNING", "FAILING", "DOING_SAVEPOINT", "CANCELING",
                  ...TERMINAL];

// -- small DOM helpers (text is always set as text, never parsed as HTML) -----------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}
const escapeXml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const badge = (kind, value) => value ? el("span", {class: `badge ${kind}-${value}`, text: value}) : el("span", {class: "muted", text: "–"});
const jobLink = (id) => el("a", {href: `#/jobs/${encodeURIComponent(id)}`, text: id});

function fmtNumber(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
}
function fmtSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60), h = Math.floor(m / 60);
  return h ? `${h} h ${String(m % 60).padStart(2, "0")} m` : `${m} m ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
}

// -- the API -------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function errorMessage(body, response) {
  if (body && typeof body.error === "string") return body.error;
  if (body && typeof body.detail === "string") return body.detail;
  if (body && Array.isArray(body.detail)) return body.detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  return `${response.status} ${response.statusText}`;
}

async function api(method, path, body) {
  const headers = {};
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = {method, headers};
  if (body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const response = await fetch(`/api/v1${path}`, init);
  let data = null;
  try { data = await response.json(); } catch (_) { /* an empty or non-JSON body */ }
  if (!response.ok) throw new ApiError(response.status, errorMessage(data, response));
  return data;
}

// A submission's or a resume's warnings, as lines under its answer.
function warningLines(warnings) {
  return warnings && warnings.length ? `\nWarnings:\n${warnings.join("\n")}` : "";
}

// An action the operator confirms first; its outcome is shown in `box`.
async function confirmed(question, box, action) {
  if (!window.confirm(question)) return;
  box.replaceChildren();
  try {
    const message = await action();
    box.replaceChildren(el("div", {class: "message ok", text: message}));
  } catch (error) {
    box.replaceChildren(el("div", {class: "message error", text: error.message}));
  }
}

// What releases left on the sources' servers, no run's to drop (job-info and overview ``leftBehind``):
// shown until the leader finds it gone, whatever run or job row it came from, with how to settle it.
function leftBehindSection(id, withJob) {
  const rows = el("tbody", {id: `${id}-rows`});
  const names = [...(withJob ? ["Job"] : []), "Source", "Slot", "Retained", "State", "Left (UTC)", "Why", "To settle it"];
  const section = el("div", {id, hidden: true}, el("h2", {text: "Left on source servers (no run of SeaTide will drop it)"}),
    el("table", {}, el("thead", {}, el("tr", {}, names.map((n) => el("th", {text: n})))), rows));
  function render(list) {
    section.hidden = !(list && list.length);
    rows.replaceChildren(...(list || []).map((l) => el("tr", {class: "warning", "data-holds": l.holds},
      ...(withJob ? [el("td", {}, el("a", {href: `#/jobs/${encodeURIComponent(l.jobId)}`, text: l.jobId}))] : []),
      el("td", {text: `${l.source} ${l.connector}`}), el("td", {text: l.holds}),
      el("td", {class: "num", text: fmtBytes(l.retainedBytes)}), el("td", {text: l.lost ? "LOST" : (l.state ?? "–")}),
      el("td", {text: `${l.time ?? "–"}${l.run ? ` (run ${l.run})` : ""}`}),
      el("td", {text: l.why + (l.error ? ` (last measurement failed: ${l.error})` : "")}), el("td", {text: l.settle}))));
  }
  return {section, render};
}

// -- overview ------------------------------------------------------------------------------
function overviewView() {
  const leader = el("section", {class: "card", id: "leader"});
  const counts = el("div", {class: "chips", id: "job-counts"});
  const nodes = el("tbody");
  const left = leftBehindSection("left-behind-all", true);
  const root = el("div", {},
    el("h1", {text: "Overview"}), leader, left.section,
    el("h2", {text: "Jobs by status"}), el("section", {class: "card"}, counts),
    el("h2", {text: "Nodes"}),
    el("table", {id: "nodes-table"}, el("thead", {}, el("tr", {},
      ["Role", "Node", "State", "Last heartbeat", "Address", "Slots", "Running attempts"].map((h) => el("th", {text: h})))), nodes));

  async function refresh() {
    const [info, cluster] = await Promise.all([api("GET", "/overview"), api("GET", "/nodes")]);
    const lead = cluster.leader;
    leader.replaceChildren(lead
      ? el("div", {}, el("b", {text: "Leader "}), el("span", {id: "leader-node", text: lead.nodeId}),
          el("span", {text: `  · epoch `}), el("b", {id: "leader-epoch", text: lead.epoch}),
          el("span", {class: "muted", text: `  · ${lead.url || ""} · since ${lead.since} UTC · lease valid ${lead.leaseExpiresInSeconds} s more`}))
      : el("div", {}, el("b", {text: "No leader right now "}),
          el("span", {class: "muted", text: `(last epoch ${cluster.epoch}); a coordinator takes the lease within its TTL`})),
      el("div", {class: "muted", text: `This page is served by ${info.servedBy}.`}));
    left.render(info.leftBehind);
    const jobs = info.jobs;
    counts.replaceChildren(
      el("a", {class: "chip", href: "#/jobs"}, "total", el("b", {text: jobs.total})),
      el("a", {class: "chip", href: "#/jobs?status=active"}, "active", el("b", {text: jobs.running})),
      ...STATUSES.filter((s) => jobs[s.toLowerCase()]).map((s) =>
        el("a", {class: "chip", href: `#/jobs?status=${s}`, "data-status": s}, badge("status", s), el("b", {text: jobs[s.toLowerCase()]}))));
    const rows = [...cluster.coordinators.map((n) => ({...n, role: "coordinator"})),
                  ...cluster.workers.map((n) => ({...n, role: "worker"}))];
    nodes.replaceChildren(...rows.map((n) => el("tr", {"data-node-id": n.nodeId},
      el("td", {text: n.role + (n.leader ? " (leader)" : "")}), el("td", {text: n.nodeId}), el("td", {}, badge("state", n.state)),
      el("td", {text: `${fmtSeconds(n.secondsSinceHeartbeat)} ago`}), el("td", {text: n.url || `${n.host} pid ${n.pid}`}),
      el("td", {class: "num", text: n.role === "worker" ? n.slots : ""}),
      el("td", {class: "num", text: n.role === "worker" ? n.runningAttempts : ""}))));
    if (!rows.length) nodes.replaceChildren(el("tr", {}, el("td", {colspan: 7, class: "empty", text: "no node has registered"})));
  }
  return {root, refresh};
}

// -- jobs ----------------------------------------------------------------------------------
function checkpointCell(checkpoint) {
  if (!checkpoint) return el("td", {class: "ckpt muted", text: "–"});
  const age = checkpoint.secondsSinceLastCheckpoint;
  return el("td", {class: "ckpt"},
    el("span", {class: "ckpt-age", "data-seconds": age ?? "", text: age === null ? "none yet" : `${fmtSeconds(age)} ago`}), " ",
    badge("health", checkpoint.health));
}

function jobsView(query) {
  const status = el("select", {id: "filter-status"},
    el("option", {value: "", text: "all statuses"}), el("option", {value: "active", text: "active (not ended)"}),
    el("option", {value: "ended", text: "ended"}), ...STATUSES.map((s) => el("option", {value: s, text: s})));
  status.value = query.get("status") || "";
  const name = el("input", {type: "text", id: "filter-name", placeholder: "name or id contains…", value: query.get("name") || ""});
  const body = el("tbody");
  const root = el("div", {},
    el("h1", {text: "Jobs"}),
    el("div", {class: "filters"}, el("label", {}, "Status ", status), el("label", {}, "Name ", name),
      el("a", {href: "#/submit", text: "Submit a job…"})),
    el("table", {id: "jobs-table"}, el("thead", {}, el("tr", {},
      el("th", {text: "Job"}), el("th", {text: "Name"}), el("th", {text: "Status"}), el("th", {text: "Created (UTC)"}),
      el("th", {class: "num", text: "Duration"}), el("th", {class: "num", text: "Rows in"}), el("th", {class: "num", text: "Rows out"}),
      el("th", {class: "num", text: "Rows/s"}), el("th", {text: "Last checkpoint"}))), body));
  let jobs = [];

  function wanted(job) {
    const s = status.value, text = name.value.trim().toLowerCase();
    const statusOk = !s || (s === "active" ? !TERMINAL.includes(job.jobStatus)
      : s === "ended" ? TERMINAL.includes(job.jobStatus) : job.jobStatus === s);
    return statusOk && (!text || job.jobId.toLowerCase().includes(text) || (job.jobName || "").toLowerCase().includes(text));
  }

  function render() {
    const shown = jobs.filter(wanted);
    body.replaceChildren(...shown.map((j) => el("tr", {"data-job-id": j.jobId},
      el("td", {}, jobLink(j.jobId)), el("td", {text: j.jobName}), el("td", {class: "status"}, badge("status", j.jobStatus)),
      el("td", {text: j.createTime}), el("td", {class: "num", text: fmtSeconds(j.durationSeconds)}),
      el("td", {class: "num", text: fmtNumber(j.rowsRead)}), el("td", {class: "num", text: fmtNumber(j.rowsWritten)}),
      el("td", {class: "num", text: fmtNumber(j.rowsPerSecond)}), checkpointCell(j.checkpoint))));
    if (!shown.length) body.replaceChildren(el("tr", {}, el("td", {colspan: 9, class: "empty",
      text: jobs.length ? "no job matches the filter" : "no jobs yet"})));
  }
  status.addEventListener("change", render);
  name.addEventListener("input", render);

  async function refresh() {
    // Every job from one read: two lists read one after the other miss a job resumed between them.
    const all = await api("GET", "/jobs");
    const newest = (a, b) => (b.createTime || "").localeCompare(a.createTime || "");
    jobs = [...all.filter((j) => !j.finishedTime).sort(newest), ...all.filter((j) => j.finishedTime).sort(newest)];
    render();
  }
  return {root, refresh};
}

// -- job detail ----------------------------------------------------------------------------
const NODE_W = 150, NODE_H = 38, COL_W = 200, ROW_H = 52, PAD = 14, HEAD = 24;

// The DAG as SVG: one box per pipeline, plugins in columns by their distance from a source.
function dagSvg(plan, statusOf) {
  const parts = [];
  let y = 0, width = 0;
  for (const pipe of plan.pipelines) {
    const depth = {};
    for (const p of pipe.plugins) depth[p.id] = p.inputs.length ? 1 + Math.max(...p.inputs.map((i) => depth[i] ?? 0)) : 0;
    const columns = {}, place = {};
    for (const p of pipe.plugins) {
      const col = depth[p.id], row = (columns[col] = (columns[col] || 0) + 1) - 1;
      place[p.id] = {x: PAD + col * COL_W, y: y + HEAD + PAD / 2 + row * ROW_H};
    }
    const height = HEAD + PAD + Math.max(...Object.values(columns)) * ROW_H - (ROW_H - NODE_H);
    width = Math.max(width, PAD * 2 + Object.keys(columns).length * COL_W - (COL_W - NODE_W));
    parts.push(`<rect class="pipeline-box" x="2" y="${y}" width="WIDTH" height="${height}" rx="6"/>`,
      `<text x="${PAD}" y="${y + 16}"><tspan font-weight="600">Pipeline ${pipe.pipelineId}</tspan> · ${escapeXml(statusOf(pipe.pipelineId) || "")}</text>`);
    for (const p of pipe.plugins) {
      for (const input of p.inputs) {
        const a = place[input], b = place[p.id];
        const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mid = (x1 + x2) / 2;
        parts.push(`<path class="edge" marker-end="url(#arrow)" d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 2},${y2}"/>`);
      }
      const {x, y: top} = place[p.id];
      parts.push(`<g class="node kind-${p.kind}" data-plugin="${escapeXml(p.id)}"><title>${escapeXml(p.id)}${p.line ? ` (line ${p.line})` : ""}</title>`,
        `<rect x="${x}" y="${top}" width="${NODE_W}" height="${NODE_H}"/>`,
        `<text x="${x + 8}" y="${top + 16}" font-weight="600">${escapeXml(p.name)}</text>`,
        `<text x="${x + 8}" y="${top + 30}" fill="#6b7785">${escapeXml(p.id)}${p.output ? ` → ${escapeXml(p.output)}` : ""}</text></g>`);
    }
    y += height + 10;
  }
  const body = parts.join("").replaceAll("WIDTH", String(width - 4));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${Math.max(y - 10, 0)}">` +
    `<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">` +
    `<path d="M0,0 L8,4 L0,8 z" fill="#8996a3"/></marker></defs>${body}</svg>`;
}

// A small line chart over time, one line per pipeline; failed checkpoints are red dots.
const PALETTE = ["#0b6bcb", "#1f8a4c", "#9b6ed0", "#b7791f", "#2a9d9f", "#d1497b"];

function chartSvg(series) {
  const W = 520, H = 150, L = 52, R = 10, T = 10, B = 24;
  const all = series.flatMap((s) => s.points);
  if (!all.length) return `<svg width="${W}" height="${H}"><text x="${L}" y="${H / 2}" fill="#6b7785">no checkpoint yet</text></svg>`;
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t), t0 + 1);
  const vmax = Math.max(1, ...all.map((p) => p.v));
  const x = (t) => (L + (W - L - R) * (t - t0) / (t1 - t0)).toFixed(1), y = (v) => (H - B - (H - T - B) * v / vmax).toFixed(1);
  const clock = (t) => new Date(t).toISOString().slice(11, 19);
  const lines = series.map((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const ok = s.points.filter((p) => !p.failed).map((p) => `${x(p.t)},${y(p.v)}`).join(" ");
    const dots = s.points.map((p) => `<circle cx="${x(p.t)}" cy="${y(p.v)}" r="${p.failed ? 3.5 : 2.2}" fill="${p.failed ? "#c0392b" : color}"/>`).join("");
    const legend = series.length > 1 ? `<text x="${W - R}" y="${T + 12 * (i + 1)}" text-anchor="end" fill="${color}">${escapeXml(s.name)}</text>` : "";
    return `<polyline class="series" stroke="${color}" points="${ok}"/>${dots}${legend}`;
  }).join("");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">` +
    `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}"/><line class="axis" x1="${L}" y1="${T}" x2="${L}" y2="${H - B}"/>` +
    `<text x="${L - 6}" y="${T + 8}" text-anchor="end">${fmtNumber(vmax)}</text><text x="${L - 6}" y="${H - B}" text-anchor="end">0</text>` +
    `<text x="${L}" y="${H - 6}">${clock(t0)}</text><text x="${W - R}" y="${H - 6}" text-anchor="end">${clock(t1)} UTC</text>${lines}</svg>`;
}

function eventClass(kind) {
  if (/FAIL|STALE|HUNG|LOST|TIMED_OUT|KILL|WARNING/.test(kind)) return "k-fail";
  if (/RETRY|RESTART|STOP_REQUESTED|CANCEL|RELEASE/.test(kind)) return "k-retry";
  if (/RESUME|RESTORE|FALLBACK|LEADER/.test(kind)) return "k-resume";
  if (/FINISHED|COMPLETED|RUNNING|SUBMITTED/.test(kind)) return "k-ok";
  return "";
}

function eventDetail(detail) {
  if (detail === null || typeof detail !== "object") return String(detail ?? "");
  return Object.entries(detail).filter(([, v]) => v !== null).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("  ");
}

function summaryItem(label, value, id) {
  return el("div", {}, el("span", {text: label}), el("b", {id, text: value ?? "–"}));
}

function jobView(jobId) {
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  const title = el("h1", {}, `Job ${jobId} `, el("span", {id: "job-status"}));
  const notice = el("div");
  const summary = el("div", {class: "grid", id: "job-summary"});
  const outcome = el("div", {id: "action-message"});
  const savepoints = el("select", {id: "resume-from"}, el("option", {value: "", text: "latest checkpoints"}));
  const fallback = el("select", {id: "resume-fallback"}, el("option", {value: "", text: "fallback: fail"}),
                      el("option", {value: "fresh", text: "fallback: start fresh"}));
  const cancel = el("button", {id: "btn-cancel", class: "danger", text: "Cancel"});
  const release = el("button", {id: "btn-release", class: "danger", text: "Cancel and release"});
  const held = el("tbody", {id: "retained-rows"});
  const heldSection = el("div", {id: "retained", hidden: true}, el("h2", {text: "Held on source servers"}),
    el("table", {id: "retained-table"}, el("thead", {}, el("tr", {}, ["Pipeline", "Source", "Holds", "Retained / behind",
      "State", "Measured (UTC)", ""].map((n) => el("th", {text: n})))), held));
  const left = leftBehindSection("left-behind", false);
  const savepoint = el("button", {id: "btn-savepoint", text: "Stop with savepoint"});
  const resume = el("button", {id: "btn-resume", class: "primary", text: "Resume"});
  const dag = el("div", {id: "dag"}), pipes = el("tbody"), attempts = el("tbody");
  const charts = el("div", {class: "charts", id: "checkpoint-charts"});
  const timeline = el("ol", {class: "timeline", id: "events"});
  const config = el("pre", {class: "config", id: "config"});
  const logAttempt = el("select", {id: "log-attempt"}, el("option", {value: "", text: "current attempt"}));
  const log = el("pre", {id: "log"}), logNote = el("div", {class: "muted"});
  const head = (...names) => el("thead", {}, el("tr", {}, names.map((n) => el("th", {text: n}))));
  const root = el("div", {}, title, notice,
    el("div", {class: "actions"}, cancel, release, savepoint, el("span", {class: "muted", text: "│"}), savepoints, fallback, resume), outcome,
    el("section", {class: "card"}, summary), heldSection, left.section,
    el("h2", {text: "DAG"}), el("section", {class: "card"}, dag),
    el("div", {class: "two"},
      el("div", {}, el("h2", {text: "Pipelines"}), el("table", {id: "pipelines-table"},
        head("Pipeline", "Status", "Rows in", "Rows out", "Last batch", "Checkpoints", "Last checkpoint"), pipes)),
      el("div", {}, el("h2", {text: "Attempts"}), el("table", {id: "attempts-table"},
        head("Attempt", "#", "Worker", "State", "Pid", "Launched (UTC)", "Ended (UTC)", "Error"), attempts))),
    el("h2", {text: "Checkpoints over time"}), el("section", {class: "card"}, charts),
    el("h2", {text: "Events"}), el("section", {class: "card"}, timeline),
    el("div", {class: "two"},
      el("div", {}, el("h2", {text: "Config (secrets masked)"}), config),
      el("div", {}, el("h2", {}, "Driver log ", logAttempt), log, logNote)));

  let info = null, plan = null, planFor = null, lastSeq = 0, follow = true;
  log.addEventListener("scroll", () => { follow = log.scrollTop + log.clientHeight >= log.scrollHeight - 4; });

  cancel.addEventListener("click", () => confirmed(`Cancel job ${jobId}? Its pipelines stop at the next batch boundary.`,
    outcome, async () => { await api("POST", "/stop-job", {jobId}); return "Cancel requested."; }));
  release.addEventListener("click", () => confirmed(`Cancel job ${jobId} and release what its sources hold `
    + "on their servers (a Postgres-CDC replication slot is dropped, so the server frees the WAL it kept)? "
    + "The job can then only restart fresh, with a new snapshot (resume with \"fallback: start fresh\").",
    outcome, async () => { await api("POST", "/stop-job", {jobId, release: true});
      return "Cancel and release requested: the job can now only restart fresh."; }));
  savepoint.addEventListener("click", () => confirmed(`Stop job ${jobId} with a savepoint?`, outcome,
    async () => { await api("POST", `${path}/savepoint`); return "Stop with savepoint requested."; }));
  resume.addEventListener("click", () => {
    const from = savepoints.value ? Number(savepoints.value) : null;
    const what = from ? `from savepoint ${from}` : "from its latest checkpoints";
    confirmed(`Resume job ${jobId} ${what}${fallback.value ? ", starting fresh where a checkpoint does not fit" : ""}?`,
      outcome, async () => {
        const accepted = await api("POST", `${path}/incarnations`,     // not /resume: an older coordinator serves that
          {fromSavepoint: from, fallback: fallback.value || null});
        // A resume may carry on an earlier incarnation's decision or re-plan one (store/owed_moves.py): said here.
        return "Resumed: a new incarnation starts." + warningLines(accepted.warnings);
      });
  });

  function renderInfo(report) {
    title.querySelector("#job-status").replaceChildren(badge("status", info.jobStatus), " ",
      info.checkpoint.health ? badge("health", info.checkpoint.health) : "", " ",
      info.retainedWarning ? el("span", {class: "badge health-RETAINED", id: "retained-warning", text: "RETAINED WAL/BINLOG"}) : "",
      info.release ? el("span", {class: "badge status-CANCELED", id: "released", text: `RELEASE ${info.release.state}`}) : "");
    const ended = TERMINAL.includes(info.jobStatus);
    cancel.disabled = savepoint.disabled = ended;
    release.disabled = info.jobStatus === "FINISHED" || Boolean(info.release);
    renderHeld(info);
    resume.disabled = !ended;
    const cp = info.checkpoint;
    summary.replaceChildren(
      summaryItem("Name", info.jobName), summaryItem("Mode", info.jobMode), summaryItem("Incarnation", info.incarnation, "incarnation"),
      summaryItem("Created (UTC)", info.createTime), summaryItem("Duration", fmtSeconds(info.durationSeconds)),
      summaryItem("Rows in", fmtNumber(info.rowsRead)), summaryItem("Rows out", fmtNumber(info.rowsWritten)),
      summaryItem("Rows/s", fmtNumber(info.rowsPerSecond)), summaryItem("Retries used", info.retriesUsed),
      summaryItem("Last checkpoint", cp.lastCheckpointId === null ? "none yet" : `#${cp.lastCheckpointId}, ${fmtSeconds(cp.secondsSinceLastCheckpoint)} ago`, "last-checkpoint"),
      summaryItem("Checkpoints", `${cp.completed} completed, ${cp.failed} failed, ${cp.restored} restored`),
      summaryItem("Restored from", info.restoredFrom), summaryItem("Desired", info.desiredState));
    notice.replaceChildren(info.errorMsg ? el("div", {class: "message error", text: info.errorMsg}) : "");
    const perPipeline = Object.fromEntries((report?.pipelines || []).map((p) => [p.pipelineId, p]));
    pipes.replaceChildren(...info.pipelines.map((p) => {
      const c = perPipeline[p.pipelineId] || {};
      return el("tr", {}, el("td", {text: p.pipelineId}), el("td", {}, badge("status", p.status)),
        el("td", {class: "num", text: fmtNumber(p.rowsRead)}), el("td", {class: "num", text: fmtNumber(p.rowsWritten)}),
        el("td", {class: "num", text: p.lastBatchId ?? "–"}), el("td", {class: "num", text: c.completed ?? "–"}),
        el("td", {text: c.secondsSinceLastCheckpoint == null ? "–" : `${fmtSeconds(c.secondsSinceLastCheckpoint)} ago${p.idle ? " (idle)" : ""}`}));
    }));
    attempts.replaceChildren(...info.attempts.map((a) => el("tr", {},
      el("td", {text: a.attemptId}), el("td", {text: a.number}), el("td", {text: a.worker ?? "–"}), el("td", {}, badge("status", a.state)),
      el("td", {text: a.pid ?? "–"}), el("td", {text: a.launchTime ?? "–"}), el("td", {text: a.endTime ?? "–"}),
      el("td", {text: a.error ?? ""}))));
    if (!info.attempts.length) attempts.replaceChildren(el("tr", {}, el("td", {colspan: 8, class: "empty", text: "no attempt yet"})));
    keepOptions(logAttempt, info.attempts.map((a) => [String(a.attemptId), `attempt ${a.attemptId} (#${a.number}, ${a.worker})`]));
  }

  function renderHeld(info) {
    left.render(info.leftBehind);
    heldSection.hidden = !info.retained.length;
    held.replaceChildren(...info.retained.map((r) => el("tr", {class: r.warning ? "warning" : ""},
      el("td", {text: r.leftOut ? `${r.pipelineId} (left out)` : r.pipelineId}), el("td", {text: `${r.source} ${r.connector}`}), el("td", {text: r.holds ?? "–"}),
      el("td", {class: "num", text: fmtBytes(r.retainedBytes)}), el("td", {text: r.lost ? "LOST" : (r.state ?? "–")}),
      el("td", {text: r.measuredTime ?? "–"}),
      el("td", {class: r.error ? "error" : "", text: r.error ? `last measurement failed: ${r.error}`
        : r.warning ? `over the warning threshold since ${r.warningSince}` : ""}))));
  }

  // Replace a select's options after the first (the default) without losing the choice.
  function keepOptions(select, pairs) {
    const key = JSON.stringify(pairs);
    if (select.dataset.options === key) return;
    const chosen = select.value;
    select.replaceChildren(select.options[0], ...pairs.map(([value, text]) => el("option", {value, text})));
    select.value = pairs.some(([value]) => value === chosen) ? chosen : "";
    select.dataset.options = key;
  }

  function renderCheckpoints(report) {
    const history = [...report.history].reverse();
    const ids = [...new Set(history.map((c) => c.pipelineId))].sort((a, b) => a - b);
    const series = (value) => ids.map((id) => ({name: `pipeline ${id}`, points: history.filter((c) => c.pipelineId === id)
      .map((c) => ({t: Date.parse(c.time.replace(" ", "T") + "Z"), v: value(c), failed: c.status !== "COMPLETED"}))}));
    charts.innerHTML = `<figure>${chartSvg(series((c) => c.durationMs))}<figcaption>checkpoint duration (ms)</figcaption></figure>` +
      `<figure>${chartSvg(series((c) => c.rows))}<figcaption>rows per checkpoint</figcaption></figure>`;
    // only those a resume accepts (unrestorable: why it refuses one)
    keepOptions(savepoints, report.history.filter((c) => c.kind === "SAVEPOINT" && c.status === "COMPLETED" && !c.unrestorable)
      .map((c) => [String(c.checkpointId), `savepoint ${c.checkpointId} (${c.time})`]));
  }

  async function refreshEvents() {
    for (;;) {   // page until caught up: a long history arrives in a few requests, then one per poll
      const page = await api("GET", `${path}/events?after=${lastSeq}&limit=500`);
      for (const e of page.events) {
        timeline.prepend(el("li", {"data-kind": e.kind},
          el("span", {class: "muted", text: `${e.time}`}),
          el("span", {class: `kind ${eventClass(e.kind)}`, text: e.kind}),
          el("span", {text: `${eventDetail(e.detail)}  ·  incarnation ${e.incarnation ?? "–"}, epoch ${e.epoch ?? "–"}, ${e.actor}`})));
      }
      lastSeq = page.nextAfter;
      if (!page.more) return;
    }
  }

  async function refreshLog() {
    const attempt = logAttempt.value ? `&attempt=${logAttempt.value}` : "";
    try {
      const page = await api("GET", `${path}/logs?tail=300${attempt}`);
      if (log.textContent !== page.text) {
        log.textContent = page.text || "(empty so far)";
        if (follow) log.scrollTop = log.scrollHeight;
      }
      logNote.textContent = `attempt ${page.attemptId} on ${page.worker} (${page.attemptState}), ${fmtNumber(page.size)} bytes`;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      log.textContent = "";
      logNote.textContent = error.message;
    }
  }

  async function refresh() {
    let report = null;
    try {
      [info, report] = await Promise.all([api("GET", `/job-info/${encodeURIComponent(jobId)}`), api("GET", `${path}/checkpoints?limit=200`)]);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      notice.replaceChildren(el("div", {class: "message error", text: `${error.message} (it may have expired from history; its events stay below)`}));
      await refreshEvents();
      return;
    }
    if (planFor !== info.incarnation) {
      plan = await api("GET", `${path}/plan`);
      planFor = info.incarnation;
      config.textContent = info.config;
    }
    const statusOf = (id) => (info.pipelines.find((p) => p.pipelineId === id) || {}).status;
    dag.innerHTML = plan.error ? "" : dagSvg(plan, statusOf);
    if (plan.error) dag.append(el("div", {class: "message error", text: plan.error}));
    renderInfo(report);
    renderCheckpoints(report);
    await Promise.all([refreshEvents(), refreshLog()]);
  }
  return {root, refresh};
}

// -- submit --------------------------------------------------------------------------------
// The lines around a config error, the bad one marked. Messages name the line either as
// "(line N)" or, leading with the reason, as "..., line N of <source>".
function excerpt(text, line) {
  const lines = text.split("\n");
  const first = Math.max(1, line - 3), last = Math.min(lines.length, line + 3);
  const box = el("div", {class: "excerpt"});
  for (let n = first; n <= last; n++) {
    box.append(el("div", {class: n === line ? "bad-line" : null, "data-line": n}, el("i", {text: n}), lines[n - 1]));
  }
  return box;
}

function submitView() {
  const config = el("textarea", {id: "config", spellcheck: "false", placeholder: "env { job.mode = BATCH }\nsource { … }\nsink { … }"});
  const file = el("input", {type: "file", id: "config-file", accept: ".conf,.hocon,.json,text/plain"});
  const jobId = el("input", {type: "text", id: "job-id", placeholder: "generated"});
  const jobName = el("input", {type: "text", id: "job-name", placeholder: "from env job.name"});
  const strict = el("input", {type: "checkbox", id: "strict"});
  const submit = el("button", {id: "btn-submit", class: "primary", text: "Submit"});
  const result = el("div", {id: "submit-result"});
  let source = "pasted config";
  const root = el("div", {}, el("h1", {text: "Submit a job"}),
    el("p", {class: "muted", text: "Paste a job file (HOCON or JSON) or upload one. It is checked before anything is recorded; an error names the line."}),
    el("div", {class: "form"}, el("label", {}, "Upload a file", file), el("label", {}, "Job id", jobId),
      el("label", {}, "Job name", jobName), el("label", {}, el("span", {}, strict, " strict (unknown keys are errors)"))),
    config, el("div", {class: "actions"}, submit), result);

  file.addEventListener("change", async () => {
    if (!file.files.length) return;
    config.value = await file.files[0].text();
    source = file.files[0].name;
  });
  config.addEventListener("input", () => { source = "pasted config"; });
  submit.addEventListener("click", async () => {
    const text = config.value;
    if (!window.confirm(`Submit ${jobId.value.trim() || "this job"} to the cluster?`)) return;
    result.replaceChildren();
    try {
      const body = {config: text, source, strict: strict.checked, jobId: jobId.value.trim() || null, jobName: jobName.value.trim() || null};
      const accepted = await api("POST", "/jobs", body);   // not /submit-job: an older coordinator serves that
      result.replaceChildren(el("div", {class: "message ok", text: `Submitted job ${accepted.jobId}.` +
        warningLines(accepted.warnings)}));
      setTimeout(() => { location.hash = `#/jobs/${encodeURIComponent(accepted.jobId)}`; }, accepted.warnings.length ? 2500 : 400);
    } catch (error) {
      const found = /\(line (\d+)\)|\bline (\d+) of /.exec(error.message) || [];
      const line = Number(found[1] || found[2]);
      result.replaceChildren(el("div", {class: "message error", id: "submit-error"}, error.message,
        line ? excerpt(text, line) : ""));
      if (line) {   // put the cursor on the bad line
        const start = text.split("\n").slice(0, line - 1).join("\n").length + (line > 1 ? 1 : 0);
        config.focus();
        config.setSelectionRange(start, start + (text.split("\n")[line - 1] || "").length);
      }
    }
  });
  return {root, refresh: async () => {}};
}

// -- router and live updates ---------------------------------------------------------------
let shown = null;

function route() {
  const [path, search] = location.hash.replace(/^#\/?/, "").split("?");
  const [page, ...rest] = path.split("/");
  const query = new URLSearchParams(search || "");
  const view = page === "jobs" && rest.length && rest[0] ? jobView(decodeURIComponent(rest.join("/")))
    : page === "jobs" ? jobsView(query) : page === "submit" ? submitView() : overviewView();
  for (const link of document.querySelectorAll("header nav a")) {
    link.classList.toggle("active", link.dataset.page === (page || "overview"));
  }
  shown = view;
  document.getElementById("view").replaceChildren(view.root);
  poll(view);
}

async function poll(view) {
  if (shown !== view) return;    // the operator moved to another page
  const live = document.getElementById("live");
  try {
    await view.refresh();
    live.textContent = `live · ${new Date().toISOString().slice(11, 19)} UTC`;
    live.classList.remove("down");
  } catch (error) {
    live.textContent = `API unreachable, retrying: ${error.message}`;
    live.classList.add("down");
  }
  setTimeout(() => poll(view), POLL_MS);
}

function setUpToken() {
  const input = document.getElementById("token");
  input.value = localStorage.getItem(TOKEN_KEY) || "";
  input.addEventListener("change", () => {
    if (input.value) localStorage.setItem(TOKEN_KEY, input.value);
    else localStorage.removeItem(TOKEN_KEY);
  });
}

setUpToken();
window.addEventListener("hashchange", route);
route();

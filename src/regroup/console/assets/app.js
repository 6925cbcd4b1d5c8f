// The operator's dashboard of `regroup serve --http-port`: a single page that routes on location.pathname.
//   /              every group, live
//   /groups/<id>   one group: header, rebalance timeline (canvas), members and their assignments, lag
// It reads the server's JSON API (/api/groups, /api/groups/<id>, /api/groups/<id>/timeline) and follows the
// event log through Server-Sent Events (/api/events); its "What if…" control starts a replay of the timeline's
// visible window (POST /api/groups/<id>/replays) and polls it until the comparison is there; nothing else is
// fetched, from nowhere else.

const LIST_REFRESH_MS = 5000; // fallback refresh when no event arrives
const GROUP_REFRESH_MS = 5000;
const EVENT_THROTTLE_MS = 700; // at most one re-fetch per this long while events pour in
const FOLLOW_TICK_MS = 1000; // the timeline's live edge moves this often
const FULL_TIMELINE_MS = 60000; // the whole history again this often; only what changed in between
const TIMELINE_OVERLAP_MS = 10000; // how far back an update asks (late events, clocks)
const TIMELINE_MISSING_MS = 15000; // a timeline the server did not have is asked for again after this long
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 15000;
const REPLAY_POLL_MS = 1000; // a running replay is asked about this often

const main = document.getElementById("main");
const crumb = document.getElementById("crumb");
const connBadge = document.getElementById("conn");

// ------------------------------------------------------------------------------------------------ helpers

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const esc = (value) => String(value ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);
const fmtInt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const groupHref = (id) => `/groups/${encodeURIComponent(id)}`;
const pad = (n, w = 2) => String(n).padStart(w, "0");

function fmtClock(ms, withMillis) {
  const d = new Date(ms);
  const base = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMillis ? `${base}.${pad(d.getMilliseconds(), 3)}` : base;
}

function fmtDuration(ms) {
  if (!Number.isFinite(ms)) return "open";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

/** Partitions as ranges: [0,1,2,5,7,8] → "0–2, 5, 7–8". */
function fmtPartitions(parts) {
  const sorted = [...parts].map(Number).sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    out.push(j > i ? `${sorted[i]}–${sorted[j]}` : `${sorted[i]}`);
    i = j + 1;
  }
  return out.join(", ");
}

function fmtAssignment(assignment) {
  const topics = Object.keys(assignment || {}).sort();
  if (!topics.length) return '<span class="muted">none</span>';
  return topics
    .map((t) => `<span class="mono">${esc(t)}</span>: ${esc(fmtPartitions(assignment[t]))}`)
    .join("<br>");
}

/** Replace an element's content only when it changes: re-laying out a 1,000-row table costs more than comparing. */
const shownHTML = new WeakMap();
function setHTML(element, html) {
  if (shownHTML.get(element) === html) return;
  shownHTML.set(element, html);
  element.innerHTML = html;
}

function setConn(state) {
  const text = { live: "live", connecting: "connecting…", disconnected: "disconnected — retrying" }[state];
  if (connBadge.dataset.state === state) return;
  connBadge.dataset.state = state;
  connBadge.textContent = text;
}

class Disconnected extends Error {}

/** GET a JSON document of the API: {status, body}; a network failure marks the page disconnected. */
async function getJSON(path) {
  return requestJSON(path, { headers: { Accept: "application/json" }, cache: "no-store" });
}

/** `fetch` with `init`, the answer read as JSON (`body` null when it is not); a failed fetch is `Disconnected`. */
async function requestJSON(path, init) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    setConn("disconnected");
    throw new Disconnected(String(err));
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  return { status: response.status, body };
}

/**
 * Runs `task` at most once per `gapMs` (or four times as long as the last run took, for a big group), never two
 * at a time; calls in between fold into one trailing run.
 */
function refresher(task, gapMs) {
  let running = false;
  let again = false;
  let timer = 0;
  let last = -Infinity;
  let cost = 0;
  const run = async () => {
    if (running) {
      again = true;
      return;
    }
    const wait = last + Math.max(gapMs, 4 * cost) - performance.now();
    if (wait > 0) {
      if (!timer) timer = setTimeout(() => ((timer = 0), run()), wait);
      return;
    }
    running = true;
    last = performance.now();
    try {
      await task();
      cost = performance.now() - last;
      document.getElementById("failure")?.remove();
    } catch (err) {
      if (!(err instanceof Disconnected)) showFailure(err);
    } finally {
      running = false;
      if (again) {
        again = false;
        run();
      }
    }
  };
  return run;
}

function showFailure(err) {
  let box = document.getElementById("failure");
  if (!box) {
    box = document.createElement("p");
    box.id = "failure";
    box.className = "message error";
    main.prepend(box);
  }
  box.textContent = `The dashboard could not show this data: ${err && err.message ? err.message : err}`;
}

/** The server's clock as the event log tells it (its rows carry wall-clock milliseconds). */
let clockSkewMs = 0;
const nowMs = () => Date.now() + clockSkewMs;

/**
 * Follows /api/events. `onRow(row)` for each event-log row, `onOpen()` whenever the stream (re)connects (rows
 * may have been missed meanwhile). The browser retries a dropped stream by itself; a stream the server refused
 * is reopened here with a growing delay.
 */
function follow(onRow, onOpen) {
  let source = null;
  let retryMs = RETRY_MIN_MS;
  const open = () => {
    source = new EventSource("/api/events");
    source.onopen = () => {
      retryMs = RETRY_MIN_MS;
      setConn("live");
      onOpen();
    };
    source.addEventListener("row", (event) => {
      let row;
      try {
        row = JSON.parse(event.data);
      } catch {
        return;
      }
      if (typeof row.t === "number") clockSkewMs = row.t - Date.now();
      onRow(row);
    });
    source.onerror = () => {
      setConn("disconnected");
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        setTimeout(open, retryMs);
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      }
    };
  };
  open();
  window.addEventListener("pagehide", () => source && source.close());
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) open(); // back from the browser's page cache: the old stream was closed
  });
}

/** The group a row is about: its detail starts with "group=<id>" (the id may contain spaces). */
function rowIsAbout(row, groupId) {
  const detail = row && typeof row.detail === "string" ? row.detail : "";
  const head = `group=${groupId}`;
  return detail === head || detail.startsWith(`${head} `);
}

// ------------------------------------------------------------------------------------------------ list

function listView() {
  document.title = "Groups · regroup";
  crumb.textContent = "groups";
  main.innerHTML = `
    <h1>Groups</h1>
    <div class="toolbar">
      <input type="search" id="filter" placeholder="filter by id, type or state" aria-label="filter groups">
      <span class="muted" id="count"></span>
    </div>
    <div id="groups"><p class="message">Loading…</p></div>`;
  const filter = document.getElementById("filter");
  const holder = document.getElementById("groups");
  const count = document.getElementById("count");
  let groups = null;

  const render = () => {
    if (groups === null) return;
    const needle = filter.value.trim().toLowerCase();
    const shown = groups.filter(
      (g) => !needle || [g.group_id, g.type, g.state].some((v) => String(v ?? "").toLowerCase().includes(needle)),
    );
    main.dataset.groups = String(groups.length);
    const total = `${groups.length} group${groups.length === 1 ? "" : "s"}`;
    count.textContent = needle ? `${shown.length} of ${total}` : total;
    if (!groups.length) {
      setHTML(holder, '<p class="message" id="empty">No groups on this server yet.</p>');
      return;
    }
    const rows = shown
      .map(
        (g) => `<tr data-group="${esc(g.group_id)}" data-type="${esc(g.type)}" data-state="${esc(g.state)}"
            data-members="${esc(g.members)}">
          <td><a class="mono" href="${esc(groupHref(g.group_id))}">${esc(g.group_id)}</a></td>
          <td>${esc(g.type)}</td>
          <td><span class="badge state-${esc(g.state)}">${esc(g.state)}</span></td>
          <td>${esc(g.protocol ?? g.assignor ?? "—")}</td>
          <td class="num">${fmtInt(g.members)}</td>
          <td class="num">${fmtInt(g.lag)}</td>
        </tr>`,
      )
      .join("");
    setHTML(holder, `<table id="groups-table">
        <thead><tr><th>Group</th><th>Type</th><th>State</th><th>Protocol / assignor</th>
          <th class="num">Members</th><th class="num">Lag</th></tr></thead>
        <tbody>${rows}</tbody></table>`);
  };

  const refresh = refresher(async () => {
    const { status, body } = await getJSON("/api/groups");
    if (status !== 200 || !body || !Array.isArray(body.groups)) {
      setHTML(holder, `<p class="message error">The server answered ${esc(status)} for its group list.</p>`);
      return;
    }
    groups = body.groups.slice().sort((a, b) => (a.group_id < b.group_id ? -1 : a.group_id > b.group_id ? 1 : 0));
    render();
  }, EVENT_THROTTLE_MS);

  filter.addEventListener("input", render);
  follow(() => refresh(), () => refresh());
  setInterval(refresh, LIST_REFRESH_MS);
  refresh();
}

// ------------------------------------------------------------------------------------------------ group

function groupView(groupId) {
  document.title = `${groupId} · regroup`;
  crumb.innerHTML = `<a href="/">groups</a> / <span class="mono">${esc(groupId)}</span>`;
  main.innerHTML = `
    <h1 class="mono" id="group-id"></h1>
    <div id="status"><p class="message">Loading…</p></div>
    <section id="group" hidden>
      <dl class="facts" id="facts"></dl>
      <h2>Rebalance timeline</h2>
      <div class="toolbar" id="timeline-tools">
        <button type="button" data-act="in" title="zoom in">+</button>
        <button type="button" data-act="out" title="zoom out">−</button>
        <button type="button" data-act="left" title="earlier">◀</button>
        <button type="button" data-act="right" title="later">▶</button>
        <button type="button" data-act="fit" title="show everything">Fit</button>
        <button type="button" data-act="live" title="keep the present in view" aria-pressed="true">Live</button>
        <span class="muted" id="timeline-summary"></span>
      </div>
      <div class="timeline" id="timeline"><canvas id="timeline-canvas" role="img"></canvas></div>
      <div class="legend">
        <span><i class="own"></i>partitions owned</span>
        <span><i class="unowned"></i>partitions unowned (top lane: how many)</span>
        <span><i class="rebalance"></i>rebalance (reason on top; hover for details)</span>
        <span>wheel: zoom · drag: pan · double-click: fit</span>
      </div>
      <div class="toolbar whatif">
        <button type="button" id="whatif-run"
          title="replay the churn of the visible window under other strategies and protocols">What if…</button>
        <span class="muted" id="whatif-status" role="status"></span>
      </div>
      <div id="whatif-result"></div>
      <h2 id="members-title">Members</h2>
      <div id="members"></div>
      <h2>Lag</h2>
      <div id="lag"></div>
    </section>`;
  document.getElementById("group-id").textContent = groupId;
  const status = document.getElementById("status");
  const section = document.getElementById("group");
  const timeline = new Timeline(document.getElementById("timeline"), document.getElementById("timeline-tools"));
  const enc = encodeURIComponent(groupId);
  const timelineSource = new TimelineSource(`/api/groups/${enc}/timeline`);
  whatIf(enc, timeline);
  let known = false; // the group was on the server's list (so asking for it does not answer 404)

  const showMessage = (html, kind = "") => {
    setHTML(status, `<p class="message ${kind}" id="message">${html}</p>`);
    section.hidden = true;
  };

  const refresh = refresher(async () => {
    if (!known) {
      const list = await getJSON("/api/groups");
      if (list.status !== 200 || !list.body || !Array.isArray(list.body.groups)) {
        showMessage(`The server answered ${esc(list.status)} for its group list.`, "error");
        return;
      }
      if (!list.body.groups.some((g) => g.group_id === groupId)) {
        main.dataset.unknown = "true";
        showMessage(
          `There is no group <span class="mono">${esc(groupId)}</span> on this server` +
            ` (yet: this page shows it as soon as it appears). <a href="/">All groups</a>`,
          "unknown",
        );
        return;
      }
      known = true;
    }
    const [detail, history] = await Promise.all([getJSON(`/api/groups/${enc}`), timelineSource.fetch()]);
    if (detail.status === 404) {
      known = false; // deleted meanwhile
      main.dataset.unknown = "true";
      showMessage(`The group <span class="mono">${esc(groupId)}</span> is gone. <a href="/">All groups</a>`, "unknown");
      return;
    }
    if (detail.status !== 200 || !detail.body) {
      showMessage(`The server answered ${esc(detail.status)} for this group.`, "error");
      return;
    }
    delete main.dataset.unknown;
    setHTML(status, "");
    section.hidden = false;
    renderGroup(detail.body);
    if (history.status === 200 && history.body) timeline.setData(history.body, detail.body);
    else timeline.unavailable((history.body && history.body.error) || `the server answered ${history.status}`);
  }, EVENT_THROTTLE_MS);

  follow(
    (row) => {
      if (rowIsAbout(row, groupId)) refresh();
    },
    () => refresh(),
  );
  setInterval(refresh, GROUP_REFRESH_MS);
  refresh();
}

// ------------------------------------------------------------------------------------------------ what if

/** POST a JSON document to the API: {status, body}, as getJSON. */
async function postJSON(path, doc) {
  return requestJSON(path, {
    method: "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: JSON.stringify(doc),
    cache: "no-store",
  });
}

/**
 * The "What if…" control: replays the timeline's visible window (the server runs `regroup lab replay` on the
 * group's history), says "running…" while it runs, polls it, and shows the comparison: the recorded run, then
 * each alternative with its differences from the recorded run, and a link to the full report.
 */
function whatIf(enc, timeline) {
  const button = document.getElementById("whatif-run");
  const status = document.getElementById("whatif-status");
  const result = document.getElementById("whatif-result");
  const say = (text, kind = "") => {
    status.textContent = text;
    status.className = kind === "error" ? "error-line" : "muted";
    status.dataset.state = kind;
  };
  const done = () => {
    button.disabled = false;
  };

  const poll = async (replayId) => {
    let answer;
    try {
      answer = await getJSON(`/api/groups/${enc}/replays/${encodeURIComponent(replayId)}`);
    } catch (err) {
      if (err instanceof Disconnected) {
        setTimeout(() => poll(replayId), REPLAY_POLL_MS * 2);
        return;
      }
      say(`The replay failed: ${err}`, "error");
      done();
      return;
    }
    const doc = answer.body;
    if (answer.status !== 200 || !doc) {
      say(`The replay failed: ${(doc && doc.error) || `the server answered ${answer.status}`}`, "error");
      done();
      return;
    }
    if (doc.status === "running") {
      setTimeout(() => poll(replayId), REPLAY_POLL_MS);
      return;
    }
    if (doc.status === "failed" || !doc.result) {
      say(`The replay failed: ${doc.error || "no result"}`, "error");
      done();
      return;
    }
    say(`Replayed ${fmtClock(doc.since_ms, true)} – ${fmtClock(doc.until_ms, true)}`, "done");
    setHTML(result, comparisonHTML(doc.result, `/api/groups/${enc}/replays/${encodeURIComponent(replayId)}/report`));
    done();
  };

  button.addEventListener("click", async () => {
    if (!timeline.view) {
      say("No timeline window to replay.", "error");
      return;
    }
    const since = Math.max(0, Math.floor(timeline.view.t0));
    const until = Math.min(Math.ceil(timeline.view.t1), Math.floor(nowMs()));
    if (!(until > since)) {
      say("The visible window is in the future: nothing to replay.", "error");
      return;
    }
    button.disabled = true;
    setHTML(result, "");
    say("running…", "running");
    let answer;
    try {
      answer = await postJSON(`/api/groups/${enc}/replays`, { since_ms: since, until_ms: until });
    } catch (err) {
      say(`The replay did not start: ${err instanceof Disconnected ? "the server cannot be reached" : err}`, "error");
      done();
      return;
    }
    if (answer.status !== 202 || !answer.body || !answer.body.replay_id) {
      const why = (answer.body && answer.body.error) || `the server answered ${answer.status}`;
      say(`The replay did not start: ${why}`, "error");
      done();
      return;
    }
    poll(answer.body.replay_id).catch((err) => {
      say(`The replay failed: ${err}`, "error");
      done();
    });
  });
}

const fmtSeconds = (ms) => (ms === null || ms === undefined ? "—" : (ms / 1000).toFixed(2));
const fmtDelta = (value, format) => {
  if (value === null || value === undefined) return "—";
  const shown = format(Math.abs(value));
  return value > 0 ? `+${shown}` : value < 0 ? `−${shown}` : "0";
};

/** The comparison table of a replay's `replay.json`: the recorded run first, then each alternative. */
function comparisonHTML(doc, reportHref) {
  const recorded = doc.recorded || {};
  const alternatives = Array.isArray(doc.alternatives) ? doc.alternatives : [];
  const cells = (run, versus) => {
    const v = versus || {};
    return `<td class="mono">${esc(run.strategy)}</td><td>${esc(run.protocol ?? "—")}</td>
      <td class="num">${fmtInt(run.rebalances)}</td><td class="num">${fmtInt(run.moved)}</td>
      <td class="num">${fmtSeconds(run.unowned_partition_ms)}</td><td class="num">${fmtSeconds(run.duration_ms)}</td>
      <td class="num">${versus ? fmtDelta(v.rebalances, fmtInt) : ""}</td>
      <td class="num">${versus ? fmtDelta(v.moved, fmtInt) : ""}</td>
      <td class="num">${versus ? fmtDelta(v.unowned_partition_ms, fmtSeconds) : ""}</td>
      <td class="num">${versus ? fmtDelta(v.duration_ms, fmtSeconds) : ""}</td>`;
  };
  const rows = [`<tr class="recorded">${cells(recorded, null)}</tr>`]
    .concat(alternatives.map((a) => `<tr>${cells(a, a.versus_recorded)}</tr>`))
    .join("");
  const plan = doc.plan || {};
  const changes = Array.isArray(plan.events) ? plan.events.length : 0;
  const initial = Array.isArray(plan.initial) ? plan.initial.length : 0;
  const skipped = Array.isArray(doc.skipped) && doc.skipped.length ? ` Skipped: ${esc(doc.skipped.join(", "))}.` : "";
  return `<p class="muted">${fmtInt(initial)} members at the window's start, ${fmtInt(changes)} changes in it;
    replayed under each strategy and protocol (the recorded run first; Δ: difference from it).${skipped}
    <a id="whatif-report" href="${esc(reportHref)}" target="_blank" rel="noopener">Full report</a></p>
    <div class="scroll"><table id="whatif-table"><thead><tr><th>Strategy</th><th>Protocol</th>
    <th class="num">Rebalances</th><th class="num">Moved</th><th class="num">Unowned partition-s</th>
    <th class="num">In rebalances s</th><th class="num">Δ rebalances</th><th class="num">Δ moved</th>
    <th class="num">Δ unowned s</th><th class="num">Δ in rebalances s</th></tr></thead>
    <tbody>${rows}</tbody></table></div>`;
}

/**
 * A group's timeline kept up to date with small requests: the whole history once (and again every
 * FULL_TIMELINE_MS, to let go of what the server pruned), then only what overlaps the time from
 * TIMELINE_OVERLAP_MS before the latest moment the answers so far carried (`since_ms`: every rebalance and
 * interval still open or ended since then), which replaces the copies of everything open or ended after it.
 * Times are the server's own, so the browser's clock does not matter.
 */
class TimelineSource {
  constructor(path) {
    this.path = path;
    this.doc = null;
    this.latest = null; // the latest time any answer carried (the server's clock, whatever the browser's)
    this.fullAt = -Infinity;
    this.missing = null; // the last 404, kept instead of asking again at every event
    this.missingUntil = 0;
  }

  async fetch() {
    // A 404 is asked again only every so often (the history may learn of the group later), never when the
    // server keeps no history at all: each failed request is also a line in the browser's console.
    if (this.missing && (this.missing.never || performance.now() < this.missingUntil)) return this.missing;
    const full = this.doc === null || this.latest === null || performance.now() - this.fullAt > FULL_TIMELINE_MS;
    const since = full ? null : Math.floor(this.latest - TIMELINE_OVERLAP_MS);
    const answer = await getJSON(since === null ? this.path : `${this.path}?since_ms=${since}`);
    const body = answer.body;
    if (answer.status !== 200 || !body || !Array.isArray(body.ownership) || !Array.isArray(body.rebalances)) {
      this.doc = null;
      if (answer.status === 404) {
        const never = Boolean(body && typeof body.error === "string" && body.error.includes("no rebalance history"));
        this.missing = { ...answer, never };
        this.missingUntil = performance.now() + TIMELINE_MISSING_MS;
      }
      return answer;
    }
    this.missing = null;
    if (full) {
      this.doc = body;
      this.latest = null;
      this.fullAt = performance.now();
    } else {
      // (what ended before `since` comes from the copy only, even from a server that ignored the bound)
      const endedBefore = (end) => end !== null && end !== undefined && end < since;
      const split = (old, fresh, end) =>
        old.filter((x) => endedBefore(x[end])).concat(fresh.filter((x) => !endedBefore(x[end])));
      this.doc = {
        rebalances: split(this.doc.rebalances, body.rebalances, "end_ms"),
        ownership: split(this.doc.ownership, body.ownership, "to_ms"),
      };
    }
    // Anything that ends after this answer was made ends after the latest time it carries.
    let latest = this.latest ?? -Infinity;
    for (const r of body.rebalances) latest = Math.max(latest, r.start_ms, r.end_ms ?? -Infinity);
    for (const o of body.ownership) latest = Math.max(latest, o.from_ms, o.to_ms ?? -Infinity);
    this.latest = Number.isFinite(latest) ? latest : null;
    return { status: 200, body: this.doc };
  }
}

function renderGroup(g) {
  const consumerLike = g.type !== "classic";
  const members = Array.isArray(g.members) ? g.members : [];
  const lag = g.lag && typeof g.lag === "object" ? g.lag : {};
  let totalLag = null;
  for (const parts of Object.values(lag)) {
    for (const v of Object.values(parts || {})) if (typeof v === "number") totalLag = (totalLag ?? 0) + v;
  }
  const facts = [
    ["Type", g.type],
    ["State", `<span class="badge state-${esc(g.state)}">${esc(g.state)}</span>`, true],
    [consumerLike ? "Epoch" : "Generation", consumerLike ? g.epoch : g.generation],
    [consumerLike ? "Assignor" : "Protocol", (consumerLike ? g.assignor : g.protocol) ?? "—"],
    ["Members", fmtInt(members.length)],
    ["Lag", fmtInt(totalLag)],
  ];
  const dl = document.getElementById("facts");
  const fact = ([k, v, html]) =>
    `<div><dt>${esc(k)}</dt><dd data-fact="${esc(k.toLowerCase())}">${html ? v : esc(v ?? "—")}</dd></div>`;
  setHTML(dl, facts.map(fact).join(""));
  Object.assign(main.dataset, { type: g.type, state: g.state, members: String(members.length) });

  document.getElementById("members-title").textContent = `Members (${members.length})`;
  const holder = document.getElementById("members");
  if (!members.length) {
    setHTML(holder, '<p class="message" id="no-members">No members: the group is empty.</p>');
  } else {
    const sorted = members.slice().sort((a, b) => {
      const ka = `${a.client_id ?? ""}\u0000${a.member_id}`;
      const kb = `${b.client_id ?? ""}\u0000${b.member_id}`;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    const rows = sorted
      .map(
        (m) => `<tr data-member="${esc(m.member_id)}">
          <td class="mono">${esc(m.member_id)}</td><td>${esc(m.client_id ?? "—")}</td><td>${esc(m.host ?? "—")}</td>
          <td>${esc(m.instance_id ?? "—")}</td><td>${esc(m.rack ?? "—")}</td><td>${fmtAssignment(m.assignment)}</td>
        </tr>`,
      )
      .join("");
    const head = ["Member id", "Client id", "Host", "Instance id", "Rack", "Assignment"].map((h) => `<th>${h}</th>`);
    const table = `<table id="members-table"><thead><tr>${head.join("")}</tr></thead><tbody>${rows}</tbody></table>`;
    setHTML(holder, `<div class="scroll">${table}</div>`);
  }

  const lagHolder = document.getElementById("lag");
  const lagRows = [];
  for (const topic of Object.keys(lag).sort()) {
    const parts = Object.keys(lag[topic] || {}).sort((a, b) => Number(a) - Number(b));
    for (const p of parts) {
      lagRows.push(`<tr data-topic="${esc(topic)}" data-partition="${esc(p)}"><td class="mono">${esc(topic)}</td>
        <td class="num">${esc(p)}</td><td class="num">${fmtInt(lag[topic][p])}</td></tr>`);
    }
  }
  setHTML(
    lagHolder,
    lagRows.length
      ? `<div class="scroll"><table id="lag-table"><thead><tr><th>Topic</th><th class="num">Partition</th>
          <th class="num">Lag</th></tr></thead><tbody>${lagRows.join("")}</tbody></table></div>`
      : '<p class="message muted">No committed offsets, so no lag to show.</p>',
  );
}

// ------------------------------------------------------------------------------------------------ timeline

const AXIS_H = 20; // time labels
const REASON_H = 16; // rebalance markers and their reasons
const UNOWNED_H = 12; // how many partitions are unowned, per pixel column
const BOTTOM_PAD = 6;
const MAX_ROWS_H = 560;
const ROW_H = 18;
const MIN_SPAN_MS = 20;
const COLORS = {
  grid: "rgba(128,128,128,0.18)",
  text: "#6b7480",
  own: "#3b82c4",
  ownGone: "#8fa9c4",
  unownedLane: "214,69,65",
  unownedShade: "rgba(214,69,65,0.10)",
  band: "rgba(230,160,30,0.20)",
  bandEdge: "rgba(200,130,10,0.85)",
  now: "rgba(31,138,76,0.8)",
  stripe: "rgba(128,128,128,0.06)",
};

/**
 * The rebalance timeline: one row per member (y) over time (x); each member's ownership intervals drawn as bars
 * (merged per pixel, so a member costs at most one rectangle per run of covered pixels whatever its number of
 * intervals), the windows where partitions had no owner shaded (a lane on top counts them per pixel column),
 * rebalances as bands with their reason. Wheel zooms around the pointer, drag pans.
 */
class Timeline {
  constructor(holder, tools) {
    this.holder = holder;
    this.canvas = holder.querySelector("canvas");
    this.ctx = this.canvas.getContext("2d");
    this.tip = document.createElement("div");
    this.tip.className = "tip";
    this.tip.hidden = true;
    holder.append(this.tip);
    this.summary = tools.querySelector("#timeline-summary");
    this.liveButton = tools.querySelector('[data-act="live"]');
    this.data = null;
    this.view = null; // {t0, t1}
    this.following = true;
    this.anchored = true; // while following: keep the start and widen (after Fit), or slide (after a zoom)
    this.clients = new Map(); // member id -> client id, as long as the page has seen them
    this.frame = 0;
    this.draws = 0;
    this.layout = null;

    tools.addEventListener("click", (e) => {
      const act = e.target.closest("button")?.dataset.act;
      if (act) this.act(act);
    });
    this.canvas.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.canvas.addEventListener("pointerdown", (e) => this.onDown(e));
    this.canvas.addEventListener("pointermove", (e) => this.onMove(e));
    this.canvas.addEventListener("pointerup", (e) => this.onUp(e));
    this.canvas.addEventListener("pointercancel", (e) => this.onUp(e));
    this.canvas.addEventListener("pointerleave", () => (this.tip.hidden = true));
    this.canvas.addEventListener("dblclick", () => this.act("fit"));
    this.cssWidth = 0; // the holder's width, from the observer: reading it in draw() would force a layout
    new ResizeObserver((entries) => {
      this.cssWidth = entries[entries.length - 1].contentRect.width;
      this.schedule();
    }).observe(holder);
    setInterval(() => {
      if (this.following && this.data && this.data.open && !document.hidden) this.schedule();
    }, FOLLOW_TICK_MS);
  }

  /** No history to draw: say why instead of an empty canvas. */
  unavailable(reason) {
    this.canvas.hidden = true;
    let note = this.holder.querySelector(".message");
    if (!note) {
      note = document.createElement("p");
      note.className = "message muted";
      note.id = "timeline-unavailable";
      this.holder.append(note);
    }
    note.textContent = `No timeline: ${reason}.`;
  }

  /** Index the API's timeline once per fetch; drawing then only walks arrays. */
  setData(timeline, detail) {
    const started = performance.now();
    this.canvas.hidden = false;
    this.holder.querySelector("#timeline-unavailable")?.remove();
    const ownership = Array.isArray(timeline.ownership) ? timeline.ownership : [];
    const rebalances = Array.isArray(timeline.rebalances) ? timeline.rebalances : [];
    const current = new Map((detail.members || []).map((m) => [m.member_id, m]));
    const byMember = new Map();
    const byPartition = new Map();
    let tMin = Infinity;
    let tMax = -Infinity;
    let open = false;
    const F = new Float64Array(ownership.length); // each interval's start and end (Infinity: open)
    const T = new Float64Array(ownership.length);
    for (let i = 0; i < ownership.length; i++) {
      const o = ownership[i];
      const from = Number(o.from_ms);
      const to = o.to_ms === null || o.to_ms === undefined ? Infinity : Number(o.to_ms);
      F[i] = from;
      T[i] = to;
      if (to === Infinity) open = true;
      tMin = Math.min(tMin, from);
      tMax = Math.max(tMax, to === Infinity ? from : to);
      let list = byMember.get(o.member_id);
      if (!list) byMember.set(o.member_id, (list = []));
      list.push(i);
      const key = `${o.topic}\u0000${o.partition}`;
      let plist = byPartition.get(key);
      if (!plist) byPartition.set(key, (plist = []));
      plist.push(i);
    }
    const byStart = (a, b) => F[a] - F[b];

    // Rows: members by first ownership, then current members that never owned anything.
    const rows = [];
    for (const [memberId, list] of byMember) {
      list.sort(byStart);
      const from = new Float64Array(list.length);
      const to = new Float64Array(list.length);
      list.forEach((idx, k) => ((from[k] = F[idx]), (to[k] = T[idx])));
      rows.push({ memberId, from, to, index: Int32Array.from(list), first: from[0], current: current.has(memberId) });
    }
    rows.sort((a, b) => a.first - b.first || (a.memberId < b.memberId ? -1 : 1));
    for (const memberId of [...current.keys()].sort()) {
      if (byMember.has(memberId)) continue;
      const none = new Float64Array(0);
      rows.push({ memberId, from: none, to: none, index: new Int32Array(0), first: Infinity, current: true });
    }
    for (const m of current.values()) if (m.client_id) this.clients.set(m.member_id, m.client_id);
    for (const row of rows) {
      const client = this.clients.get(row.memberId);
      // (a classic member's id starts with its client id already)
      row.label = client && !row.memberId.startsWith(client) ? `${client} · ${row.memberId}` : row.memberId;
    }

    // Unowned windows: the gaps between one partition's consecutive owners; a partition whose last owner let it
    // go stays unowned up to now while the group has members.
    const active = current.size > 0;
    const gapFrom = [];
    const gapTo = [];
    for (const list of byPartition.values()) {
      list.sort(byStart);
      let reach = T[list[0]];
      for (let k = 1; k < list.length; k++) {
        const f = F[list[k]];
        if (f > reach) {
          gapFrom.push(reach);
          gapTo.push(f);
        }
        reach = Math.max(reach, T[list[k]]);
      }
      if (active && reach !== Infinity) {
        gapFrom.push(reach);
        gapTo.push(Infinity);
        open = true;
      }
    }

    const rb = rebalances
      .map((r) => ({
        start: Number(r.start_ms),
        end: r.end_ms === null || r.end_ms === undefined ? Infinity : Number(r.end_ms),
        number: r.generation ?? r.epoch ?? null,
        numberName: r.generation !== undefined && r.generation !== null ? "generation" : "epoch",
        reason: r.reason ?? "",
        member: r.member ?? null,
        moved: r.moved,
        unowned: r.unowned_partition_ms,
      }))
      .sort((a, b) => a.start - b.start);
    for (const r of rb) {
      tMin = Math.min(tMin, r.start);
      tMax = Math.max(tMax, r.end === Infinity ? r.start : r.end);
      if (r.end === Infinity) open = true;
    }

    const first = this.data === null;
    this.data = {
      ownership,
      rows,
      gapFrom: Float64Array.from(gapFrom),
      gapTo: Float64Array.from(gapTo),
      rebalances: rb,
      tMin,
      tMax,
      open,
    };
    this.prepMs = performance.now() - started;
    window.__regroupPrepMs = this.prepMs;
    Object.assign(this.canvas.dataset, {
      intervals: String(ownership.length),
      rebalances: String(rb.length),
      members: String(rows.length),
      gaps: String(gapFrom.length),
    });
    this.summary.textContent =
      `${rows.length} member${rows.length === 1 ? "" : "s"} · ${ownership.length} ownership interval` +
      `${ownership.length === 1 ? "" : "s"} · ${rb.length} rebalance${rb.length === 1 ? "" : "s"}`;
    this.canvas.setAttribute(
      "aria-label",
      `Rebalance timeline: ${rows.length} members, ${ownership.length} ownership intervals, ${rb.length} rebalances`,
    );
    if (first) this.fit();
    this.schedule();
  }

  fit() {
    const d = this.data;
    const now = nowMs();
    if (!d || !Number.isFinite(d.tMin)) {
      this.view = { t0: now - 60000, t1: now };
      this.following = true;
      this.anchored = true;
    } else {
      this.following = d.open;
      this.anchored = true;
      if (this.following) {
        // the same frame draw() keeps while following: the present 5% from the right edge
        const span = Math.max(Math.max(d.tMax, now) - d.tMin, 1000) * 1.08;
        this.view = { t0: now - span * 0.95, t1: now + span * 0.05 };
      } else {
        const span = Math.max(d.tMax - d.tMin, 1000);
        this.view = { t0: d.tMin - span * 0.02, t1: d.tMax + span * 0.02 };
      }
    }
    this.liveButton.setAttribute("aria-pressed", String(this.following));
  }

  act(what) {
    if (!this.view) return;
    const { t0, t1 } = this.view;
    const span = t1 - t0;
    if (what === "in") this.zoom(0.5, t0 + span / 2);
    else if (what === "out") this.zoom(2, t0 + span / 2);
    else if (what === "left") this.pan(-span * 0.25);
    else if (what === "right") this.pan(span * 0.25);
    else if (what === "fit") this.fit();
    else if (what === "live") {
      this.following = !this.following;
      this.anchored = false;
      if (this.following) {
        const now = nowMs();
        this.view = { t0: now - span * 0.95, t1: now + span * 0.05 };
      }
    }
    this.liveButton.setAttribute("aria-pressed", String(this.following));
    this.schedule();
  }

  zoom(factor, around) {
    const { t0, t1 } = this.view;
    let span = (t1 - t0) * factor;
    span = Math.min(Math.max(span, MIN_SPAN_MS), 3650 * 86400000);
    const k = (around - t0) / (t1 - t0);
    this.view = { t0: around - span * k, t1: around + span * (1 - k) };
    this.following = this.following && this.view.t1 >= nowMs();
    this.anchored = false;
    this.liveButton.setAttribute("aria-pressed", String(this.following));
  }

  pan(dt) {
    this.view = { t0: this.view.t0 + dt, t1: this.view.t1 + dt };
    this.following = false;
    this.liveButton.setAttribute("aria-pressed", "false");
  }

  timeAt(x) {
    const L = this.layout;
    return this.view.t0 + ((x - L.left) / L.width) * (this.view.t1 - this.view.t0);
  }

  onWheel(e) {
    if (!this.layout || !this.view) return;
    e.preventDefault();
    const scale = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    const x = Math.min(Math.max(e.offsetX, this.layout.left), this.layout.left + this.layout.width);
    this.zoom(Math.exp(e.deltaY * scale * 0.0015), this.timeAt(x));
    this.schedule();
  }

  onDown(e) {
    if (e.button !== 0 || !this.view) return;
    this.drag = { x: e.clientX, view: { ...this.view }, moved: false };
    this.canvas.setPointerCapture(e.pointerId);
    this.canvas.classList.add("dragging");
    this.tip.hidden = true;
  }

  onMove(e) {
    if (this.drag && this.layout) {
      const dx = e.clientX - this.drag.x;
      if (Math.abs(dx) > 2) this.drag.moved = true;
      if (!this.drag.moved) return;
      const { t0, t1 } = this.drag.view;
      const dt = (-dx / this.layout.width) * (t1 - t0);
      this.view = { t0: t0 + dt, t1: t1 + dt };
      this.following = false;
      this.liveButton.setAttribute("aria-pressed", "false");
      this.schedule();
      return;
    }
    this.hover(e.offsetX, e.offsetY);
  }

  onUp(e) {
    if (!this.drag) return;
    this.drag = null;
    this.canvas.classList.remove("dragging");
    if (this.canvas.hasPointerCapture(e.pointerId)) this.canvas.releasePointerCapture(e.pointerId);
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => ((this.frame = 0), this.draw()));
  }

  draw() {
    if (!this.data || !this.view) return;
    const started = performance.now();
    const d = this.data;
    const now = nowMs();
    if (this.following && this.anchored) {
      // fitted and live: the start stays, the window grows so that the present stays 5% from the right edge
      this.view = { t0: this.view.t0, t1: Math.max(this.view.t1, this.view.t0 + (now - this.view.t0) / 0.95) };
    } else if (this.following) {
      const span = this.view.t1 - this.view.t0;
      this.view = { t0: now - span * 0.95, t1: now + span * 0.05 };
    }
    const cssWidth = Math.max(this.cssWidth || this.holder.clientWidth, 200);
    const n = d.rows.length;
    const rowsH = n ? Math.min(Math.max(n * ROW_H, 36), MAX_ROWS_H) : 36;
    const cssHeight = AXIS_H + REASON_H + UNOWNED_H + rowsH + BOTTOM_PAD;
    const dpr = window.devicePixelRatio || 1;
    const W = Math.round(cssWidth * dpr);
    const H = Math.round(cssHeight * dpr);
    if (this.canvas.width !== W || this.canvas.height !== H) {
      this.canvas.width = W;
      this.canvas.height = H;
      this.canvas.style.height = `${cssHeight}px`;
    }
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssWidth, cssHeight);
    const gutter = Math.round(Math.min(190, cssWidth * 0.25));
    const left = gutter + 6;
    const width = cssWidth - left - 8;
    const reasonTop = AXIS_H;
    const unownedTop = reasonTop + REASON_H;
    const rowsTop = unownedTop + UNOWNED_H;
    const rowH = n ? rowsH / n : rowsH;
    this.layout = { left, width, reasonTop, unownedTop, rowsTop, rowsH, rowH, cssHeight };
    const { t0, t1 } = this.view;
    const pxPerMs = width / (t1 - t0);
    const X = (t) => left + (t - t0) * pxPerMs;
    const right = left + width;
    const clipTo = (t) => (t === Infinity ? now : t);

    // stripes
    if (rowH >= 6) {
      ctx.fillStyle = COLORS.stripe;
      for (let i = 1; i < n; i += 2) ctx.fillRect(left, rowsTop + i * rowH, width, rowH);
    }

    // time axis and grid
    const step = niceStep((t1 - t0) / Math.max(2, Math.floor(width / 110)));
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.text;
    ctx.strokeStyle = COLORS.grid;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = Math.round(X(t)) + 0.5;
      ctx.moveTo(x, AXIS_H - 4);
      ctx.lineTo(x, rowsTop + rowsH);
      const label = fmtClock(t, step < 1000);
      ctx.fillText(label, Math.min(x + 3, right - ctx.measureText(label).width), AXIS_H / 2);
    }
    ctx.stroke();

    // ownership bars, merged per pixel for each member
    let rects = 0;
    const barH = rowH >= 6 ? rowH - 2 : Math.max(rowH, 1);
    const barOff = rowH >= 6 ? 1 : 0;
    for (let pass = 0; pass < 2; pass++) {
      ctx.fillStyle = pass === 0 ? COLORS.ownGone : COLORS.own;
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const row = d.rows[i];
        if (row.current !== (pass === 1)) continue;
        const y = rowsTop + i * rowH + barOff;
        const { from, to } = row;
        let a = -1;
        let b = -1;
        for (let k = 0; k < from.length; k++) {
          let x0 = X(from[k]);
          if (x0 > right) break; // sorted by start
          let x1 = X(to[k] === Infinity ? now : to[k]);
          if (x1 < left) continue;
          if (x0 < left) x0 = left;
          if (x1 > right) x1 = right;
          if (a >= 0 && x0 <= b + 0.5) {
            if (x1 > b) b = x1;
          } else {
            if (a >= 0) {
              ctx.rect(a, y, Math.max(b - a, 1), barH);
              rects++;
            }
            a = x0;
            b = x1;
          }
        }
        if (a >= 0) {
          ctx.rect(a, y, Math.max(b - a, 1), barH);
          rects++;
        }
      }
      ctx.fill();
    }

    // unowned partitions: a count per pixel column (difference array), shaded over the rows
    const cols = Math.max(1, Math.ceil(width));
    const diff = new Int32Array(cols + 1);
    let gapsDrawn = 0;
    for (let g = 0; g < d.gapFrom.length; g++) {
      const x0 = X(d.gapFrom[g]);
      const x1 = X(clipTo(d.gapTo[g]));
      if (x1 < left || x0 > right) continue;
      gapsDrawn++;
      const c0 = Math.max(0, Math.floor(x0 - left));
      const c1 = Math.min(cols, Math.max(c0 + 1, Math.ceil(x1 - left)));
      diff[c0]++;
      diff[c1]--;
    }
    if (gapsDrawn) {
      let peak = 0;
      const count = new Int32Array(cols);
      for (let c = 0, run = 0; c < cols; c++) {
        run += diff[c];
        count[c] = run;
        if (run > peak) peak = run;
      }
      for (let c = 0; c < cols; ) {
        const v = count[c];
        let e = c + 1;
        while (e < cols && count[e] === v) e++;
        if (v > 0) {
          const alpha = 0.3 + 0.7 * (v / peak);
          ctx.fillStyle = `rgba(${COLORS.unownedLane},${alpha.toFixed(3)})`;
          ctx.fillRect(left + c, unownedTop + 1, e - c, UNOWNED_H - 2);
          ctx.fillStyle = COLORS.unownedShade;
          ctx.fillRect(left + c, rowsTop, e - c, rowsH);
        }
        c = e;
      }
    }

    // rebalance bands over the bars (translucent), markers and reasons
    let bandsDrawn = 0;
    const labelled = [];
    for (const r of d.rebalances) {
      const x0 = X(r.start);
      const x1 = X(clipTo(r.end));
      if (x1 < left || x0 > right) continue;
      bandsDrawn++;
      const a = Math.max(x0, left);
      const b = Math.min(Math.max(x1, x0 + 1), right);
      ctx.fillStyle = COLORS.band;
      ctx.fillRect(a, reasonTop, b - a, rowsTop + rowsH - reasonTop);
      if (x0 >= left) {
        ctx.fillStyle = COLORS.bandEdge;
        ctx.fillRect(Math.round(x0), reasonTop, 1, rowsTop + rowsH - reasonTop);
        ctx.beginPath();
        ctx.moveTo(x0 - 4, reasonTop + 1);
        ctx.lineTo(x0 + 4, reasonTop + 1);
        ctx.lineTo(x0, reasonTop + 7);
        ctx.fill();
        labelled.push([x0, r]);
      }
    }
    ctx.fillStyle = COLORS.text;
    for (let k = 0; k < labelled.length; k++) {
      const [x0, r] = labelled[k];
      const room = (k + 1 < labelled.length ? labelled[k + 1][0] : right) - x0 - 10;
      if (room < 30) continue;
      const text = fitText(ctx, r.reason || `${r.numberName} ${r.number}`, room);
      if (text) ctx.fillText(text, x0 + 6, reasonTop + REASON_H / 2);
    }

    // now
    if (now >= t0 && now <= t1) {
      const x = Math.round(X(now)) + 0.5;
      ctx.strokeStyle = COLORS.now;
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      ctx.moveTo(x, reasonTop);
      ctx.lineTo(x, rowsTop + rowsH);
      ctx.stroke();
      ctx.setLineDash([]);
    }

    // gutter: member labels (every k-th when rows are thin), lane names
    ctx.clearRect(0, AXIS_H, left - 1, cssHeight - AXIS_H);
    ctx.fillStyle = COLORS.text;
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillText("rebalances", 4, reasonTop + REASON_H / 2);
    ctx.fillText("unowned", 4, unownedTop + UNOWNED_H / 2);
    ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
    ctx.textBaseline = "top";
    const every = Math.max(1, Math.ceil(13 / Math.max(rowH, 0.01)));
    for (let i = 0; i < n; i += every) {
      const text = fitText(ctx, d.rows[i].label, gutter - 4);
      if (text) ctx.fillText(text, 4, rowsTop + i * rowH + Math.max(0, (rowH - 11) / 2));
    }
    ctx.textBaseline = "middle";
    if (!n) ctx.fillText("no ownership recorded in this window", left + 8, rowsTop + rowsH / 2);

    this.draws++;
    const ms = performance.now() - started;
    window.__regroupDrawMs = ms;
    if (this.draws === 1) window.__regroupFirstDrawAt = performance.now(); // since the navigation started
    Object.assign(this.canvas.dataset, {
      drawn: String(this.draws),
      drawMs: ms.toFixed(2),
      rects: String(rects),
      bands: String(bandsDrawn),
      view: `${Math.round(t0)}-${Math.round(t1)}`,
      plot: `${left},${width},${rowsTop},${rowH.toFixed(3)}`, // where the rows are, in CSS pixels
    });
  }

  hover(x, y) {
    const L = this.layout;
    const d = this.data;
    if (!L || !d || x < L.left || x > L.left + L.width || y < L.reasonTop) {
      this.tip.hidden = true;
      return;
    }
    const t = this.timeAt(x);
    const now = nowMs();
    const slack = 4 * ((this.view.t1 - this.view.t0) / L.width);
    const lines = [];
    const r = d.rebalances.findLast((rb) => rb.start - slack <= t && t <= (rb.end === Infinity ? now : rb.end) + slack);
    if (r) {
      const moved = Array.isArray(r.moved) ? r.moved.length : r.moved;
      lines.push(
        `Rebalance → ${r.numberName} ${r.number ?? "?"}`,
        `reason: ${r.reason || "—"}${r.member ? ` (member ${r.member})` : ""}`,
        `${fmtClock(r.start, true)}, ${r.end === Infinity ? "still open" : `lasted ${fmtDuration(r.end - r.start)}`}`,
        `moved: ${moved ?? "—"} · unowned: ${r.unowned ?? "—"} partition-ms`,
      );
    }
    if (y >= L.rowsTop && y < L.rowsTop + L.rowsH && d.rows.length) {
      const row = d.rows[Math.min(d.rows.length - 1, Math.floor((y - L.rowsTop) / L.rowH))];
      const held = [];
      for (let k = 0; k < row.from.length && row.from[k] <= t; k++) {
        if (t < (row.to[k] === Infinity ? now : row.to[k])) held.push(d.ownership[row.index[k]]);
      }
      if (lines.length) lines.push("");
      lines.push(`${row.label}${row.current ? "" : " (left)"}`);
      const byTopic = {};
      for (const o of held) (byTopic[o.topic] ||= []).push(o.partition);
      const owned = Object.keys(byTopic).sort().map((tp) => `${tp}: ${fmtPartitions(byTopic[tp])}`);
      const at = fmtClock(t, true);
      lines.push(owned.length ? `owns at ${at}: ${owned.join("; ")}` : `owns nothing at ${at}`);
    } else if (y >= L.unownedTop && y < L.rowsTop) {
      let unowned = 0;
      for (let g = 0; g < d.gapFrom.length; g++) {
        if (d.gapFrom[g] <= t && t < (d.gapTo[g] === Infinity ? now : d.gapTo[g])) unowned++;
      }
      lines.push(`${unowned} partition${unowned === 1 ? "" : "s"} unowned at ${fmtClock(t, true)}`);
    }
    if (!lines.length) {
      this.tip.hidden = true;
      return;
    }
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
    const maxX = this.holder.clientWidth - this.tip.offsetWidth - 4;
    this.tip.style.left = `${Math.max(4, Math.min(x + 14, maxX))}px`;
    this.tip.style.top = `${y + 14}px`;
  }
}

/** A round step (1, 2, 5 × 10^k ms, or a whole second, minute or hour multiple) near `raw`. */
function niceStep(raw) {
  const human = [1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000,
    7200000, 10800000, 21600000, 43200000, 86400000];
  if (raw >= 1000) return human.find((s) => s >= raw) ?? Math.ceil(raw / 86400000) * 86400000;
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 1000;
}

function fitText(ctx, text, room) {
  if (room <= 8) return "";
  if (ctx.measureText(text).width <= room) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(`${text.slice(0, mid)}…`).width <= room) lo = mid;
    else hi = mid - 1;
  }
  return lo ? `${text.slice(0, lo)}…` : "";
}

// ------------------------------------------------------------------------------------------------ routes

function notFound() {
  document.title = "Not found · regroup";
  crumb.textContent = "";
  main.innerHTML = '<p class="message" id="message">Nothing here. <a href="/">All groups</a></p>';
  follow(() => {}, () => {});
}

function route() {
  const path = location.pathname;
  if (path === "/" || path === "/index.html") return listView();
  const match = /^\/groups\/(.+?)\/?$/.exec(path);
  if (match) {
    let id;
    try {
      id = decodeURIComponent(match[1]);
    } catch {
      return notFound();
    }
    return groupView(id);
  }
  return notFound();
}

route();

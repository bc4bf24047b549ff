// bellwether dashboard.
//
// Why it works this way: every node serves this page, but no single node
// knows the whole cluster's truth (a follower's idea of the leader lags, a
// dead node says nothing). So the browser asks everyone: it polls this
// node's /status, learns the other members' HTTP addresses from it, and
// polls their /status too (cross-origin; nodes answer with
// Access-Control-Allow-Origin: *). The leader shown is the one a reachable
// member says it is, in the highest term; the timeline merges every
// member's leadership history with what this page saw while open.
//
// No dependencies and no build step; the DOM is built with textContent only,
// so nothing a member reports is ever parsed as markup.
"use strict";

/** Polling period: fast enough to watch an election happen. */
const POLL_INTERVAL_MS = 500;
/** A member slower than this to answer counts as down for this round. */
const FETCH_TIMEOUT_MS = 1000;
/** Width of the leadership timeline. */
const TIMELINE_WINDOW_MS = 5 * 60 * 1000;
/** Most members the page tracks; more would not fit on screen anyway. */
const MEMBERS_MAX = 64;
/** Most history entries taken from one member (the server's own bound). */
const HISTORY_MAX = 256;
/** Most changes of one member's view this page remembers. */
const OBSERVATIONS_MAX = 512;
/** Most recent terms listed in words under the timeline. */
const TERMS_LISTED_MAX = 10;
/** One colour per leader id, chosen by id so it is stable across reloads. */
const PALETTE = ["#2e90fa", "#f79009", "#12b76a", "#ee46bc", "#7a5af8", "#f04438", "#06aed4", "#854a0e"];

/**
 * Everything known about each member, by id:
 *   httpAddress  where its /status lives (null: none configured)
 *   status       its last NodeStatus (kept when it goes down, for the term)
 *   reachable    true, false (its last poll failed) or null (not polled yet)
 *   history      its own leadership history, as {at, term, leader}
 *   observed     changes of its view this page saw, as {at, term, leader};
 *                "down" is observed as leader null
 */
const members = new Map();
/** Id of the node serving this page, once its /status has answered. */
let selfId = null;
/** Whether this node's own /status answered in the last round. */
let selfReachable = false;

function memberFor(id) {
  if (!members.has(id)) {
    if (members.size >= MEMBERS_MAX) return null;
    members.set(id, { id, httpAddress: null, status: null, reachable: null, history: [], observed: [] });
  }
  return members.get(id);
}

// ---------------------------------------------------------------- polling

async function poll() {
  const started = Date.now();
  try {
    const own = await fetchStatus("status");
    selfReachable = own !== null;
    if (own) {
      selfId = own.id;
      record(own, Date.now());
    } else if (selfId !== null) {
      markDown(selfId, Date.now());
    }
    const others = [...members.values()].filter((m) => m.id !== selfId && m.httpAddress);
    const answers = await Promise.all(others.map((m) => fetchStatus(statusUrl(m.httpAddress))));
    const now = Date.now();
    others.forEach((m, i) => {
      // An answer from a different id means the address is stale: not this member.
      if (answers[i] && answers[i].id === m.id) record(answers[i], now);
      else markDown(m.id, now);
    });
    render(Date.now());
    renderElections(await fetchJson("elections"));
    renderQueues(await fetchJson("tasks"));
    renderZookeeper(await fetchJson("zookeeper"));
    await pollElectorGroups();
  } catch (error) {
    console.error("dashboard: poll failed", error);
  } finally {
    setTimeout(poll, Math.max(0, POLL_INTERVAL_MS - (Date.now() - started)));
  }
}

/** A member's /status, or null if it fails, times out, or is not a status. */
async function fetchStatus(url) {
  if (url === null) return null;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), FETCH_TIMEOUT_MS);
  try {
    const response = await fetch(url, { cache: "no-store", signal: controller.signal });
    if (!response.ok) return null;
    const status = await response.json();
    return isStatus(status) ? status : null;
  } catch (_) {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

function isStatus(s) {
  return s !== null && typeof s === "object" && Number.isInteger(s.id) && typeof s.role === "string" &&
    Number.isInteger(s.term) && Array.isArray(s.members) && Array.isArray(s.leadership);
}

/** The /status URL of a member's HTTP address ("host:port" or a URL). */
function statusUrl(address) {
  return pathUrl(address, "/status");
}

/** URL of `path` at an HTTP address ("host:port" or a URL), or null. */
function pathUrl(address, path) {
  try {
    const url = new URL(/^https?:\/\//i.test(address) ? address : `http://${address}`);
    // A node bound to every interface reports no host a browser can use;
    // it is reachable at least where this page came from.
    if (url.hostname === "0.0.0.0" || url.hostname === "[::]") url.hostname = location.hostname;
    url.pathname = path;
    url.search = "";
    return url.href;
  } catch (_) {
    return null;
  }
}

function record(status, now) {
  const member = memberFor(status.id);
  if (member === null) return;
  member.status = status;
  member.reachable = true;
  member.history = status.leadership.slice(-HISTORY_MAX)
    .filter((c) => c && Number.isFinite(c.at_unix_ms) && Number.isInteger(c.term))
    .map((c) => ({ at: c.at_unix_ms, term: c.term, leader: Number.isInteger(c.leader) ? c.leader : null }));
  observe(member, now, status.term, Number.isInteger(status.leader) ? status.leader : null);
  for (const other of status.members.slice(0, MEMBERS_MAX)) {
    if (!other || !Number.isInteger(other.id)) continue;
    const known = memberFor(other.id);
    if (known !== null && typeof other.http_address === "string" && other.http_address !== "") {
      known.httpAddress = other.http_address;
    }
  }
}

function markDown(id, now) {
  const member = members.get(id);
  if (!member) return;
  member.reachable = false;
  // A member that does not answer follows no leader, as far as we can tell.
  observe(member, now, member.status ? member.status.term : 0, null);
}

/** Appends a change of the member's view, keeping the list bounded. */
function observe(member, at, term, leader) {
  const list = member.observed;
  const last = list[list.length - 1];
  if (last && last.term === term && last.leader === leader) return;
  list.push({ at, term, leader });
  // Keep one entry from before the window: it is the view at its start.
  const windowStart = at - TIMELINE_WINDOW_MS;
  while (list.length > 1 && (list[1].at <= windowStart || list.length > OBSERVATIONS_MAX)) list.shift();
}

// ---------------------------------------------------------------- leader

/**
 * The current leader, {id, term, source}, or null. A member saying it leads
 * is believed over followers naming a leader, and a higher term beats a
 * lower one (an old leader cut off from the cluster may still think it
 * leads). A leader named only by followers counts only when this page
 * cannot poll it itself (no HTTP address, or not polled yet).
 */
function currentLeader() {
  let best = null;
  const consider = (candidate) => {
    if (best === null || candidate.term > best.term ||
        (candidate.term === best.term && candidate.self && !best.self)) best = candidate;
  };
  for (const m of members.values()) {
    if (m.reachable !== true || m.status === null) continue;
    const s = m.status;
    if (s.role === "leader") {
      consider({ id: m.id, term: s.term, self: true, source: `n${m.id} reports it leads` });
    } else if (Number.isInteger(s.leader)) {
      // Take a follower's word only about a leader this page cannot check:
      // one it polled either is down or answered that it does not lead
      // (say, restarted), and followers just have not noticed yet.
      const named = members.get(s.leader);
      if (named && named.reachable !== null) continue;
      consider({ id: s.leader, term: s.term, self: false, source: `n${m.id} follows it; the page cannot reach it` });
    }
  }
  return best;
}

// ---------------------------------------------------------------- timeline

/** A member's view over time: its own history merged with our observations. */
function viewOf(member) {
  return member.history.concat(member.observed).sort((a, b) => a.at - b.at);
}

/** Adds a segment, extending the previous one when it continues it. */
function pushSegment(segments, segment) {
  const last = segments[segments.length - 1];
  if (last && last.leader === segment.leader && last.term === segment.term && last.end >= segment.start) {
    last.end = Math.max(last.end, segment.end);
  } else {
    segments.push(segment);
  }
}

/** Who one member followed, as segments within [from, to]. */
function memberSegments(events, from, to) {
  const segments = [];
  events.forEach((e, i) => {
    if (e.leader === null) return;
    const start = Math.max(e.at, from);
    const end = Math.min(i + 1 < events.length ? events[i + 1].at : to, to);
    if (end > start) pushSegment(segments, { start, end, leader: e.leader, term: e.term });
  });
  return segments;
}

/**
 * The cluster's leader over time, as segments within [from, to]: at each
 * moment, the leader of the highest term any member then followed. Raft
 * elects at most one leader per term, and only with a majority's votes
 * (§5.2), so one member following L in term T is proof enough that L won T,
 * even when the other members' histories are lost (a killed process forgets
 * its own). A higher term overrides an old leader that has not yet noticed
 * it was replaced; a gap means no member this page knows followed anyone.
 */
function clusterSegments(views, from, to) {
  const times = new Set([from]);
  for (const events of views) for (const e of events) if (e.at > from && e.at < to) times.add(e.at);
  const sorted = [...times].sort((a, b) => a - b);
  const cursors = views.map(() => -1);
  const segments = [];
  sorted.forEach((t, i) => {
    let best = null;
    views.forEach((events, v) => {
      while (cursors[v] + 1 < events.length && events[cursors[v] + 1].at <= t) cursors[v] += 1;
      const e = cursors[v] >= 0 ? events[cursors[v]] : null;
      if (e && e.leader !== null && (best === null || e.term > best.term)) best = e;
    });
    if (best !== null) {
      const end = i + 1 < sorted.length ? sorted[i + 1] : to;
      pushSegment(segments, { start: t, end, leader: best.leader, term: best.term });
    }
  });
  return segments;
}

// ---------------------------------------------------------------- rendering

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function colour(id) {
  return PALETTE[((id % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

function duration(ms) {
  const seconds = Math.floor(ms / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${(ms / 1000).toFixed(1)}s`;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

function sortedMembers() {
  return [...members.values()].sort((a, b) => a.id - b.id);
}

function render(now) {
  const leader = currentLeader();
  renderHeader(now);
  renderLeader(leader);
  renderMembers(leader);
  renderTimeline(now);
}

function renderHeader(now) {
  const any = sortedMembers().find((m) => m.status !== null);
  document.getElementById("cluster").textContent = any ? `· ${any.status.cluster}` : "";
  document.getElementById("self").textContent = selfId === null ? "this node" : `n${selfId}`;
  document.getElementById("updated").textContent = selfReachable
    ? `updated ${clock(now)}`
    : `this node is not answering (${clock(now)}); showing the members it listed`;
}

function renderLeader(leader) {
  // Exact text contract, read by scripts/dashboard_test.sh: "n2 (term 5)" or "none".
  document.getElementById("leader").textContent = leader ? `n${leader.id} (term ${leader.term})` : "none";
  const member = leader ? members.get(leader.id) : null;
  let note = "no member this page reaches knows a leader";
  if (leader && member && member.reachable && member.status && member.status.role === "leader") {
    note = `leading for ${duration(member.status.leader_uptime_ms)} · ${leader.source}`;
  } else if (leader) {
    note = leader.source;
  }
  document.getElementById("leader-note").textContent = note;
}

function renderMembers(leader) {
  const leaderMember = leader ? members.get(leader.id) : null;
  const leaderStatus = leaderMember && leaderMember.reachable && leaderMember.status &&
    leaderMember.status.role === "leader" ? leaderMember.status : null;
  const rows = sortedMembers().map((m) => {
    const up = m.reachable === true && m.status !== null;
    const s = up ? m.status : null;
    const row = el("tr", [leader && leader.id === m.id ? "is-leader" : "", m.reachable === false ? "is-down" : ""].join(" ").trim());
    const idCell = el("td", null, `n${m.id}`);
    if (m.id === selfId) idCell.append(el("span", "muted", " (this page)"));
    const reach = m.reachable === true ? ["up", "up"] : m.reachable === false ? ["down", "down"]
      : m.httpAddress || m.id === selfId ? ["muted", "…"] : ["muted", "no address"];
    row.append(idCell, el("td", reach[0], reach[1]));
    const cells = s ? [s.role, s.term, Number.isInteger(s.leader) ? `n${s.leader}` : "—", s.commit, s.applied,
      lagOf(m.id, leaderStatus), duration(s.uptime_ms)] : ["—", "—", "—", "—", "—", "—", "—"];
    cells.forEach((value, i) => row.append(el("td", i === 0 || i === 2 ? null : "num", value)));
    row.append(el("td", "muted", m.id === selfId ? location.host : (m.httpAddress || "—")));
    return row;
  });
  document.getElementById("member-rows").replaceChildren(...rows);
}

/** How far behind `id` is, as the leader sees it; the leader is 0 behind. */
function lagOf(id, leaderStatus) {
  if (leaderStatus === null) return "—";
  if (leaderStatus.id === id) return 0;
  const entry = leaderStatus.members.find((x) => x && x.id === id);
  return entry && Number.isInteger(entry.lag) ? entry.lag : "—";
}

function renderTimeline(now) {
  const from = now - TIMELINE_WINDOW_MS;
  const ordered = sortedMembers();
  const views = ordered.map(viewOf);
  const rows = [{ label: "cluster", cluster: true, segments: clusterSegments(views, from, now) }]
    .concat(ordered.map((m, i) => ({ label: `n${m.id} sees`, cluster: false, segments: memberSegments(views[i], from, now) })));
  const leadersSeen = new Set();
  const nodes = [];
  for (const row of rows) {
    nodes.push(el("div", row.cluster ? "label cluster" : "label", row.label));
    const track = el("div", row.cluster ? "track cluster" : "track");
    for (const seg of row.segments) {
      leadersSeen.add(seg.leader);
      const bar = el("div", "segment", `n${seg.leader} · t${seg.term}`);
      bar.style.left = `${(100 * (seg.start - from)) / TIMELINE_WINDOW_MS}%`;
      bar.style.width = `${(100 * (seg.end - seg.start)) / TIMELINE_WINDOW_MS}%`;
      bar.style.background = colour(seg.leader);
      bar.title = `n${seg.leader}, term ${seg.term}: ${clock(seg.start)} – ${clock(seg.end)} (${duration(seg.end - seg.start)})`;
      track.append(bar);
    }
    nodes.push(track);
  }
  nodes.push(el("div"), axis());
  document.getElementById("timeline").replaceChildren(...nodes);
  renderLegend([...leadersSeen].sort((a, b) => a - b));
  renderTerms(rows[0].segments, now);
}

/** The cluster row in words, newest first: short terms clip their bar labels. */
function renderTerms(segments, now) {
  const items = segments.slice(-TERMS_LISTED_MAX).reverse().map((seg) => {
    const item = el("li");
    const swatch = el("span", "swatch");
    swatch.style.background = colour(seg.leader);
    const until = seg.end >= now ? "now" : clock(seg.end);
    item.append(swatch, el("span", null,
      `term ${seg.term}: n${seg.leader}, ${clock(seg.start)} – ${until} (${duration(seg.end - seg.start)})`));
    return item;
  });
  if (items.length === 0) items.push(el("li", "muted", "no member this page knows followed a leader in this window"));
  document.getElementById("terms").replaceChildren(...items);
}

function axis() {
  const node = el("div", "axis");
  const minutes = TIMELINE_WINDOW_MS / 60000;
  for (let k = 0; k <= minutes; k += 1) {
    const tick = el("span", null, k === minutes ? "now" : `−${minutes - k}m`);
    tick.style.left = `${(100 * k) / minutes}%`;
    node.append(tick);
  }
  return node;
}

function renderLegend(leaders) {
  const nodes = [el("span", "muted", "leader:")];
  for (const id of leaders) {
    const swatch = el("span", "swatch");
    swatch.style.background = colour(id);
    nodes.push(swatch, el("span", null, `n${id}`));
  }
  nodes.push(el("span", "swatch none"), el("span", null, "no leader / unknown"));
  document.getElementById("legend").replaceChildren(...nodes);
}

// ------------------------------------------------------ applications

/** JSON from this node's `path`, or null if it fails. */
async function fetchJson(path) {
  try {
    const response = await fetch(path, { cache: "no-store" });
    return response.ok ? await response.json() : null;
  } catch (error) {
    return null;
  }
}

/** The applications' elections and locks this member serves. */
function renderElections(list) {
  if (!Array.isArray(list)) return;
  const rows = list.map((e) => {
    const row = el("tr");
    const since = e.since_unix_ms ? `${duration(Date.now() - e.since_unix_ms)} ago` : "";
    for (const text of [
      e.name,
      e.kind,
      e.leader_value === null ? "none" : e.leader_value,
      e.token === null ? "" : String(e.token),
      since,
      String(e.campaigns),
      String(e.leaderships),
    ]) {
      row.append(el("td", null, text));
    }
    return row;
  });
  document.getElementById("election-rows").replaceChildren(...rows);
}

/** The task queues in this member's store. */
function renderQueues(list) {
  if (!Array.isArray(list)) return;
  const rows = list.map((q) => {
    const row = el("tr");
    const workers = q.workers.map((w) => `${w.name} ${w.in_flight}/${w.concurrency}`).join(", ");
    for (const text of [
      q.truncated ? `${q.queue} (partly read)` : q.queue,
      String(q.depth.pending),
      String(q.depth.assigned),
      String(q.depth.failed),
      String(q.depth.done),
      String(q.depth.dead),
      q.done_per_second === null ? "" : q.done_per_second.toFixed(1),
      q.leader === null ? "none" : `${q.leader} (token ${q.leader_token})`,
      workers || "none",
      q.dead_letters.join(" "),
    ]) {
      row.append(el("td", null, text));
    }
    return row;
  });
  document.getElementById("queue-rows").replaceChildren(...rows);
}

/** ZooKeeper's sessions and ephemeral-sequential elections in this member's store. */
function renderZookeeper(view) {
  if (view === null || typeof view !== "object" || !Array.isArray(view.sessions)) return;
  const shown = view.sessions.length;
  const more = view.truncated ? " (some left out: the store holds more than the page reads)" : "";
  document.getElementById("zookeeper-summary").textContent =
    `${view.sessions_total} ZooKeeper session(s) open, ${shown} shown; ` +
    `${view.elections.length} election(s) on ephemeral-sequential nodes${more}.`;
  const electionRows = view.elections.map((e) => {
    const row = el("tr");
    for (const text of [
      e.parent,
      e.holder,
      e.holder_session,
      `${duration(Date.now() - e.holder_since_ms)} ago`,
      String(e.contenders),
    ]) {
      row.append(el("td", null, text));
    }
    return row;
  });
  document.getElementById("zookeeper-election-rows").replaceChildren(...electionRows);
  const sessionRows = view.sessions.map((session) => {
    const row = el("tr");
    for (const text of [session.id, String(session.timeout_ms), String(session.ephemerals)]) {
      row.append(el("td", null, text));
    }
    return row;
  });
  document.getElementById("zookeeper-session-rows").replaceChildren(...sessionRows);
}

poll();

// ---------------------------------------------------------- elector groups

/** Most elector groups one page shows (each is one more poll per round). */
const ELECTOR_GROUPS_MAX = 8;

/**
 * Elector groups to show: the page's `?elector=HOST:PORT` parameters, each
 * the HTTP address of one `bellwether peer` (its `/group` lists the whole
 * group). An embedded elector has no member to report to, so the page asks
 * the group itself.
 */
function electorGroups() {
  return new URLSearchParams(location.search).getAll("elector").slice(0, ELECTOR_GROUPS_MAX);
}

async function pollElectorGroups() {
  const groups = electorGroups();
  document.getElementById("electors").hidden = groups.length === 0;
  const answers = await Promise.all(groups.map((address) => fetchGroup(pathUrl(address, "/group"))));
  const rows = [];
  groups.forEach((address, i) => rows.push(...electorRows(address, answers[i])));
  document.getElementById("elector-rows").replaceChildren(...rows);
}

/** A peer's `/group` (an array of views), or null. */
async function fetchGroup(url) {
  if (url === null) return null;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), FETCH_TIMEOUT_MS);
  try {
    const response = await fetch(url, { cache: "no-store", signal: controller.signal });
    const views = response.ok ? await response.json() : null;
    return Array.isArray(views) ? views.slice(0, MEMBERS_MAX) : null;
  } catch (_) {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** One row per peer of the group asked at `address`; one row if it is down. */
function electorRows(address, views) {
  if (views === null) {
    const row = el("tr", "is-down");
    for (const text of [address, "", "unreachable", "", "", "", ""]) row.append(el("td", null, text));
    return [row];
  }
  const leaders = views.filter((v) => v && v.is_leader === true).length;
  return views.map((v) => {
    const row = el("tr", v.is_leader === true ? "is-leader" : v.error ? "is-down" : null);
    const lease = typeof v.valid_for_ms === "number" ? v.valid_for_ms.toFixed(0) : "";
    for (const text of [
      address,
      `n${v.id}`,
      v.error ? String(v.error) : String(v.role),
      v.error ? "" : String(v.algorithm),
      v.leader === null || v.leader === undefined ? "nobody" : `n${v.leader}`,
      v.token === undefined ? "" : String(v.token),
      leaders > 1 && v.is_leader ? `${lease} (more than one claims to lead)` : lease,
    ]) {
      row.append(el("td", null, text));
    }
    return row;
  });
}

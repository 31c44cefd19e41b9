/*
 * The status page: polls steerd's JSON API (/api/v1/<command>, the control commands) once a
 * second and redraws each section from the replies; never reloads. Query rates are the
 * deltas of the stats counters between two polls. Everything is built with DOM calls and
 * textContent (no HTML from the daemon is ever parsed) and the page loads nothing but its own
 * assets, so a strict Content-Security-Policy (self only) holds.
 */
"use strict";

const POLL_MS = 1000;
/* A reply slower than this counts as no reply: the banner must appear while the daemon
 * hangs, not only once it is gone. */
const TIMEOUT_MS = 2500;
/* Five minutes of one-second samples for the charts. */
const HISTORY = 300;
const EVENTS_SHOWN = 50;
/* How long to wait before asking again for a command this daemon does not have. */
const UNSUPPORTED_RETRY_MS = 60000;
const TOKEN_KEY = "steer.api-token";

const page = {
	token: sessionStorage.getItem(TOKEN_KEY),
	status: null,
	lastOk: 0, /* Date.now() of the last answered poll */
	failingSince: 0,
	skewMs: 0, /* daemon clock minus ours, from the Date header */
	unsupported: new Map(), /* command -> Date.now() when it was refused as unknown */
	prevStats: null, /* {at, stats} */
	qps: [],
	ecs: [],
	prevStates: new Map(), /* "kind:subject" -> state, for the changes seen by this page */
	seenChanges: [],
	events: null, /* the daemon's events, newest first; null = it has no event list */
	eventSeq: 0,  /* the newest one's seq: later polls ask only for what follows */
};

/* ---- small helpers ---------------------------------------------------------------------- */

function $(id) {
	return document.getElementById(id);
}

/* An element with attributes (class, data-*, title, ...) and children (nodes or text). */
function el(tag, attrs, ...children) {
	const node = document.createElement(tag);
	for (const [key, value] of Object.entries(attrs || {})) {
		if (value === undefined || value === null || value === false)
			continue;
		if (key === "class")
			node.className = value;
		else
			node.setAttribute(key, value === true ? "" : String(value));
	}
	for (const child of children) {
		if (child === undefined || child === null)
			continue;
		node.append(child instanceof Node ? child : String(child));
	}
	return node;
}

function setText(id, text) {
	const node = $(id);
	if (node.textContent !== text)
		node.textContent = text;
}

function replaceRows(tbody, rows) {
	tbody.replaceChildren(...rows);
}

function num(value) {
	return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function formatCount(n) {
	if (n >= 1e9)
		return (n / 1e9).toFixed(1) + " G";
	if (n >= 1e6)
		return (n / 1e6).toFixed(1) + " M";
	if (n >= 1e4)
		return (n / 1e3).toFixed(1) + " k";
	return String(Math.round(n));
}

function formatRate(n) {
	if (n >= 1e4)
		return formatCount(n);
	return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

function formatDuration(seconds) {
	seconds = Math.max(0, Math.floor(seconds));
	const d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
	const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
	if (d > 0)
		return `${d} d ${h} h`;
	if (h > 0)
		return `${h} h ${m} min`;
	if (m > 0)
		return s ? `${m} min ${s} s` : `${m} min`;
	return `${s} s`;
}

function daemonNow() {
	return Date.now() + page.skewMs;
}

function clockText(ms) {
	return new Date(ms).toLocaleTimeString([], {hour12: false});
}

/* A <time> for a daemon timestamp in seconds: "3 min ago", the date in its title. */
function sinceNode(epochSeconds) {
	if (!epochSeconds)
		return el("span", {class: "muted"}, "–");
	const ms = epochSeconds * 1000;
	const iso = new Date(ms).toISOString();
	const ago = formatDuration((daemonNow() - ms) / 1000) + " ago";
	return el("time", {datetime: iso, title: new Date(ms).toLocaleString()}, ago);
}

/* The state class of any state word the daemon uses, and the word shown with it. */
function stateKind(state) {
	const s = String(state || "unknown").toLowerCase();
	if (s === "up" || s.startsWith("up ") || s === "announced" || s === "ok" || s === "master")
		return "up";
	if (s === "down" || s.startsWith("down") || s.endsWith("-down") || s === "withdrawn" ||
	    s === "fault" || s === "failed" || s === "all-down")
		return "down";
	if (s === "degraded" || s === "draining" || s === "drained" || s === "starting" ||
	    s === "flapping" || s === "backup" || s === "suspect")
		return "warn";
	return "unknown";
}

function stateBadge(state, extra) {
	const text = extra ? `${state} (${extra})` : String(state || "unknown");
	return el("span", {class: `state state-${stateKind(state)}`, "data-state": state}, text);
}

/* ---- the API ---------------------------------------------------------------------------- */

class ApiError extends Error {
	constructor(message, httpStatus, kind) {
		super(message);
		this.httpStatus = httpStatus;
		this.kind = kind; /* "network", "auth", "unsupported", "command" */
	}
}

/* GET /api/v1/<command>: the reply's data, or an ApiError. */
async function call(command) {
	const headers = {Accept: "application/json"};
	if (page.token)
		headers.Authorization = `Bearer ${page.token}`;
	const abort = new AbortController();
	const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
	let response, body;
	try {
		response = await fetch(`/api/v1/${command}`,
		                       {headers, cache: "no-store", signal: abort.signal});
		body = await response.json().catch(() => null);
	} catch (e) {
		const why = e.name === "AbortError" ? `no reply within ${TIMEOUT_MS / 1000} s`
		                                    : "connection failed";
		throw new ApiError(why, 0, "network");
	} finally {
		clearTimeout(timer);
	}
	const date = Date.parse(response.headers.get("Date") || "");
	if (Number.isFinite(date))
		page.skewMs = date - Date.now();
	const message = body && typeof body.error === "string" ? body.error
	                                                      : `HTTP ${response.status}`;
	if (response.status === 401 || response.status === 403)
		throw new ApiError(message, response.status, "auth");
	if (response.status === 404 || /unknown command/i.test(message) && !response.ok)
		throw new ApiError(message, response.status, "unsupported");
	if (!response.ok || body === null || body.ok === false)
		throw new ApiError(message, response.status, response.status >= 500 ? "server"
		                                                                    : "command");
	return body && typeof body === "object" && "ok" in body && "data" in body ? body.data
	                                                                          : body;
}

/*
 * call(), but a command this daemon lacks or has nothing for yields {error} instead.
 * @p path: the command with its arguments ("events/since=41"), default the command alone.
 */
async function optional(command, path = command) {
	const refused = page.unsupported.get(command);
	if (refused && Date.now() - refused < UNSUPPORTED_RETRY_MS)
		return {unsupported: true};
	try {
		const data = await call(path);
		page.unsupported.delete(command);
		return {data};
	} catch (e) {
		if (e.kind === "network" || e.kind === "auth")
			throw e;
		if (e.kind === "unsupported")
			page.unsupported.set(command, Date.now());
		return {error: e.message, unsupported: e.kind === "unsupported"};
	}
}

/* ---- one poll --------------------------------------------------------------------------- */

async function poll() {
	const started = Date.now();
	try {
		const status = await call("status");
		/* Older daemons do not say which sections run: ask, and live with the refusal. */
		const skip = {unsupported: false, absent: true};
		const [health, monitors, stats, events, upstreams, cluster] = await Promise.all([
			optional("health"), optional("monitors"), optional("stats"),
			optional("events", page.eventSeq ? `events/since=${page.eventSeq}`
			                                 : `events/${EVENTS_SHOWN}`),
			status.forwarding === false ? skip : optional("upstreams"),
			status.cluster === false ? skip : optional("cluster"),
		]);
		answered(status);
		const when = Date.now();
		renderHeader(status);
		renderTraffic(stats, when);
		renderServices(health, monitors);
		renderMonitors(monitors);
		renderUpstreams(upstreams);
		renderCluster(cluster);
		trackChanges(health, monitors, upstreams, cluster, when);
		renderEvents(events);
		document.body.dataset.updated = String(when);
	} catch (e) {
		/* A bug of the page's own must surface as one (an uncaught error in the console),
		 * not pass for a silent daemon. */
		if (!(e instanceof ApiError))
			throw e;
		failed(e);
	} finally {
		setTimeout(poll, Math.max(0, POLL_MS - (Date.now() - started)));
	}
}

function answered(status) {
	page.status = status;
	page.lastOk = Date.now();
	page.failingSince = 0;
	$("banner").hidden = true;
	$("token-form").hidden = true;
	$("main").hidden = false;
	document.body.classList.remove("stale");
	document.body.dataset.daemon = "up";
}

function failed(e) {
	if (e.kind === "auth") {
		/* 403: no token would do (none is configured); say what the daemon says. */
		if (e.httpStatus === 403)
			askForToken(`The daemon refuses to show its status: ${e.message}.`);
		else if (page.token)
			askForToken("The token was refused. Enter the API token.");
		else
			askForToken("This server needs the API token to show its status.");
		return;
	}
	if (!page.failingSince)
		page.failingSince = Date.now();
	const last = page.lastOk ? ` Last answer at ${clockText(page.lastOk)}; ` +
	                           "the data below is from then."
	                         : "";
	const banner = $("banner");
	banner.textContent = `Steer is not answering since ${clockText(page.failingSince)}: ` +
	                     `${e.message}.${last}`;
	banner.hidden = false;
	document.body.classList.add("stale");
	document.body.dataset.daemon = "down";
}

function askForToken(why) {
	setText("token-why", why);
	$("token-form").hidden = false;
	$("main").hidden = true;
	$("banner").hidden = true;
	document.body.dataset.daemon = "auth";
}

/* ---- header ----------------------------------------------------------------------------- */

function renderHeader(st) {
	const name = st.hostname || st.node || location.hostname;
	setText("node-name", name);
	document.title = `Steer status: ${name}`;
	setText("node-version", st.version || "?");
	setText("node-uptime", formatDuration(num(st.uptime_s)));
	const r = st.last_reload;
	const ago = r ? `${formatDuration((daemonNow() - r.at * 1000) / 1000)} ago` : "";
	setText("node-reload", !r ? "never" : r.ok ? `${ago}, ok` : `${ago}, FAILED: ${r.error}`);
	$("node-reload").title = r ? new Date(r.at * 1000).toLocaleString() : "";
	$("node-reload").classList.toggle("failed", Boolean(r && !r.ok));
	setText("node-updated", clockText(Date.now()));
}

/* ---- traffic: query rate, ECS share, answers per datacenter ------------------------------ */

function totalQueries(stats) {
	const q = stats.queries || {};
	return num(q.udp) + num(q.tcp);
}

function ecsQueries(stats) {
	const e = stats.ecs || {};
	return num(e.ipv4) + num(e.ipv6);
}

/*
 * GSLB answers per datacenter, summed over the services: stats' "answers" is
 * {"<service>": {"<datacenter>": n}}. null when the daemon does not count them.
 */
function datacenterAnswers(stats) {
	const answers = stats.answers;
	if (!answers || typeof answers !== "object")
		return null;
	const out = new Map();
	for (const perDc of Object.values(answers)) {
		for (const [dc, n] of Object.entries(perDc || {}))
			out.set(dc, (out.get(dc) || 0) + num(n));
	}
	/* The buckets of answers no datacenter gave (all-down, fallback) only once they count. */
	for (const [dc, n] of out) {
		if (n === 0)
			out.delete(dc);
	}
	return out;
}

function renderTraffic(result, when) {
	if (!result.data) {
		setText("qps", "–");
		setText("ecs-detail", result.error || "");
		return;
	}
	const stats = result.data;
	const prev = page.prevStats;
	page.prevStats = {at: when, stats};
	const dcNow = datacenterAnswers(stats);
	let dcRates = null;
	if (prev && when > prev.at && totalQueries(stats) >= totalQueries(prev.stats)) {
		const dt = (when - prev.at) / 1000;
		const dq = totalQueries(stats) - totalQueries(prev.stats);
		const de = ecsQueries(stats) - ecsQueries(prev.stats);
		push(page.qps, {at: when, v: dq / dt});
		push(page.ecs, {at: when, v: dq > 0 ? (100 * de) / dq : null});
		const dcPrev = datacenterAnswers(prev.stats);
		if (dcNow && dcPrev) {
			dcRates = new Map();
			for (const [dc, n] of dcNow)
				dcRates.set(dc, Math.max(0, (n - (dcPrev.get(dc) || 0)) / dt));
		}
	}
	const last = page.qps[page.qps.length - 1];
	setText("qps", last ? formatRate(last.v) : "…");
	const total = totalQueries(stats), ecs = ecsQueries(stats);
	const recent = page.ecs[page.ecs.length - 1];
	setText("ecs-share", total ? `${(recent && recent.v !== null ? recent.v
	                                                             : (100 * ecs) / total)
	                                     .toFixed(1)} %`
	                           : "no queries yet");
	const e = stats.ecs || {};
	const resolvers = (e.resolvers || []).slice(0, 3).map((r) => `${r.address} (${r.queries})`);
	setText("ecs-detail", `Since start: ${formatCount(ecs)} of ${formatCount(total)} queries ` +
	                      `with ECS (IPv4 ${formatCount(num(e.ipv4))}, ` +
	                      `IPv6 ${formatCount(num(e.ipv6))}), ${formatCount(num(e.ignored))} ` +
	                      "ignored." +
	                      (resolvers.length ? ` Top resolvers: ${resolvers.join(", ")}.` : ""));
	drawLine($("qps-chart"), page.qps, {unit: "q/s"});
	drawLine($("ecs-chart"), page.ecs, {unit: "%", max: 100});
	renderDatacenters(dcNow, dcRates);
}

function push(series, point) {
	series.push(point);
	if (series.length > HISTORY)
		series.shift();
}

function renderDatacenters(totals, rates) {
	const tbody = $("dc-table").tBodies[0];
	const empty = !totals || totals.size === 0;
	$("dc-chart").hidden = empty;
	$("dc-table").hidden = empty;
	if (!totals) {
		setText("dc-note", "This daemon does not report answers per datacenter.");
		return;
	}
	setText("dc-note", empty ? "No GSLB answers yet." : "");
	const names = [...totals.keys()].sort();
	const rate = (dc) => (rates ? formatRate(rates.get(dc) || 0) : "…");
	replaceRows(tbody, names.map((dc) => el("tr", {"data-datacenter": dc},
	                                        el("th", {scope: "row"}, dc),
	                                        el("td", {class: "num"}, rate(dc)),
	                                        el("td", {class: "num"}, formatCount(totals.get(dc))))));
	const useRates = rates && [...rates.values()].some((v) => v > 0);
	drawBars($("dc-chart"), names.map((dc) => ({label: dc,
	                                            v: useRates ? rates.get(dc) || 0
	                                                        : totals.get(dc)})),
	         useRates ? "answers/s" : "answers");
}

/* ---- charts (canvas, drawn here: no chart library) -------------------------------------- */

function themeColours() {
	const css = getComputedStyle(document.documentElement);
	const get = (name) => css.getPropertyValue(name).trim();
	return {fg: get("--fg"), muted: get("--muted"), line: get("--line"), accent: get("--accent")};
}

/*
 * A canvas sized for the device's pixels at its CSS width; returns its context and size, or
 * null while it is not displayed (it has no width to draw at).
 */
function prepare(canvas) {
	const ratio = window.devicePixelRatio || 1;
	const width = canvas.clientWidth;
	if (!width)
		return null;
	const height = Math.round(width * (canvas.getAttribute("height") /
	                                   canvas.getAttribute("width")));
	if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
		canvas.width = Math.round(width * ratio);
		canvas.height = Math.round(height * ratio);
	}
	const ctx = canvas.getContext("2d");
	ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
	ctx.clearRect(0, 0, width, height);
	ctx.font = "11px system-ui, sans-serif";
	return {ctx, width, height};
}

function drawLine(canvas, series, opts) {
	const area = prepare(canvas);
	if (!area)
		return;
	const {ctx, width, height} = area;
	const c = themeColours();
	const left = 44, bottom = height - 16, top = 8, right = width - 6;
	const values = series.map((p) => p.v).filter((v) => v !== null);
	const max = opts.max ?? Math.max(1, ...values) * 1.15;
	ctx.strokeStyle = c.line;
	ctx.fillStyle = c.muted;
	ctx.lineWidth = 1;
	for (const frac of [0, 0.5, 1]) {
		const y = bottom - frac * (bottom - top);
		ctx.beginPath();
		ctx.moveTo(left, y);
		ctx.lineTo(right, y);
		ctx.stroke();
		ctx.fillText(`${formatRate(frac * max)}`, 2, y + 4);
	}
	if (series.length < 2) {
		ctx.fillText(opts.unit, left, height - 3);
		return;
	}
	/* The series holds at most HISTORY points: the chart spans what it has. */
	const t1 = series[series.length - 1].at, t0 = series[0].at;
	ctx.fillText(`${opts.unit}, last ${formatDuration(Math.round((t1 - t0) / 1000))}`, left,
	             height - 3);
	const x = (t) => left + ((t - t0) / (t1 - t0)) * (right - left);
	const y = (v) => bottom - (Math.min(v, max) / max) * (bottom - top);
	ctx.strokeStyle = c.accent;
	ctx.lineWidth = 2;
	ctx.beginPath();
	let drawing = false;
	for (const p of series) {
		if (p.v === null) {
			drawing = false;
			continue;
		}
		if (drawing)
			ctx.lineTo(x(p.at), y(p.v));
		else
			ctx.moveTo(x(p.at), y(p.v));
		drawing = true;
	}
	ctx.stroke();
}

function drawBars(canvas, bars, unit) {
	const area = prepare(canvas);
	if (!area || !bars.length)
		return;
	const {ctx, width, height} = area;
	const c = themeColours();
	const max = Math.max(1, ...bars.map((b) => b.v));
	const labelWidth = Math.min(120, width * 0.35), gap = 6;
	const barHeight = Math.max(8, Math.min(24, (height - 14) / bars.length - gap));
	bars.forEach((b, i) => {
		const y = i * (barHeight + gap);
		if (y + barHeight > height - 14)
			return;
		ctx.fillStyle = c.fg;
		ctx.fillText(b.label.slice(0, 18), 2, y + barHeight / 2 + 4);
		const w = ((width - labelWidth - 60) * b.v) / max;
		ctx.fillStyle = c.accent;
		ctx.fillRect(labelWidth, y, Math.max(1, w), barHeight);
		ctx.fillStyle = c.muted;
		ctx.fillText(formatRate(b.v), labelWidth + w + 4, y + barHeight / 2 + 4);
	});
	ctx.fillStyle = c.muted;
	ctx.fillText(unit, 2, height - 3);
}

/* ---- services: datacenters and the health of every address ------------------------------ */

/* "service/www.example.test/dc1/192.0.2.1" -> its parts; other target names stay whole. */
function splitTarget(name) {
	const m = /^service\/([^/]+)\/([^/]+)\/(.+)$/.exec(name || "");
	return m ? {service: m[1], datacenter: m[2], address: m[3]}
	         : {service: name || "?", datacenter: "", address: ""};
}

function monitorsByKey(monitors) {
	const map = new Map();
	for (const row of monitors.data || [])
		map.set(row.key, row);
	return map;
}

/* When the target last changed: its most recent check change (a forced state has none). */
function targetSince(row, checks) {
	let since = 0;
	for (const m of row.monitors || []) {
		const c = checks.get(m.key);
		if (c && c.since > since)
			since = c.since;
	}
	return since;
}

function targetDetail(row, checks) {
	const parts = [row.reason || ""];
	for (const m of row.monitors || []) {
		const c = checks.get(m.key);
		const last = c && c.last ? c.last.detail : m.last;
		if (last && !parts[0].includes(last))
			parts.push(`${m.key}: ${last}`);
	}
	return parts.filter(Boolean).join("; ");
}

const SERVICE_COLUMNS = ["Datacenter", "Address", "State", "Since", "Last error / detail"];

function headRow(columns) {
	return el("thead", {}, el("tr", {}, ...columns.map((h) => el("th", {scope: "col"}, h))));
}

function renderServices(health, monitors) {
	const box = $("services");
	if (!health.data) {
		setText("services-summary", health.error || "No answer for the health table.");
		box.replaceChildren();
		return;
	}
	const checks = monitorsByKey(monitors);
	const services = new Map();
	for (const row of health.data) {
		const t = splitTarget(row.name);
		if (!services.has(t.service))
			services.set(t.service, []);
		services.get(t.service).push({row, t});
	}
	const down = health.data.filter((r) => stateKind(r.state) === "down").length;
	setText("services-summary",
	        health.data.length ? `${services.size} services, ${health.data.length} addresses, ` +
	                             `${down} DOWN.`
	                           : "No GSLB services are configured.");
	const tables = [];
	const byName = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
	for (const [service, targets] of [...services.entries()].sort(byName)) {
		const up = targets.filter((x) => stateKind(x.row.state) === "up").length;
		const caption = el("caption", {}, service, " ",
		                   el("span", {class: "note"}, `${up} of ${targets.length} up`));
		const rows = targets.map(({row, t}) => el(
		    "tr", {"data-target": row.name},
		    el("th", {scope: "row"}, t.datacenter || "–"),
		    el("td", {}, t.address || row.name),
		    el("td", {}, stateBadge(row.state, row.forced ? "forced" : null)),
		    el("td", {}, sinceNode(targetSince(row, checks))),
		    el("td", {class: "detail"}, targetDetail(row, checks))));
		tables.push(el("div", {class: "scroll"},
		               el("table", {class: "service", "data-service": service}, caption,
		                  headRow(SERVICE_COLUMNS), el("tbody", {}, ...rows))));
	}
	box.replaceChildren(...tables);
}

/* ---- monitors --------------------------------------------------------------------------- */

/* What the state alone does not say: flapping, or how far slow start has ramped. */
function checkNote(m) {
	if (m.flapping)
		return "flapping";
	return m.ramp_percent ? `ramp ${m.ramp_percent} %` : null;
}

function checkRtt(m) {
	return m.last && m.last.ok ? `${(num(m.last.rtt_us) / 1000).toFixed(1)} ms` : "–";
}

function renderMonitors(monitors) {
	const tbody = $("monitors").tBodies[0];
	if (!monitors.data) {
		setText("monitors-note", monitors.error || "");
		replaceRows(tbody, []);
		$("monitors").hidden = true;
		return;
	}
	setText("monitors-note", monitors.data.length ? "" : "No health checks are configured.");
	$("monitors").hidden = monitors.data.length === 0;
	replaceRows(tbody, monitors.data.map((m) => el(
	    "tr", {"data-check": m.key},
	    el("th", {scope: "row"}, m.key),
	    el("td", {}, m.type || ""),
	    el("td", {}, stateBadge(m.state, checkNote(m))),
	    el("td", {}, sinceNode(m.since)),
	    el("td", {class: "detail"}, m.last ? m.last.detail : "no result yet"),
	    el("td", {class: "num"}, checkRtt(m)),
	    el("td", {class: "num"}, String(num(m.flaps))))));
}

/* ---- forwarder upstreams ---------------------------------------------------------------- */

function renderUpstreams(result) {
	const tbody = $("upstreams").tBodies[0];
	if (result.absent || !result.data) {
		setText("upstreams-note", result.absent ? "No forwarder is configured on this node."
		                                        : result.error || "");
		replaceRows(tbody, []);
		$("upstreams").hidden = true;
		return;
	}
	$("upstreams").hidden = false;
	const groups = (result.data.groups || []).map(
	    (g) => `${g.domain} (${g.policy}): using ${(g.active || []).join(", ") || "none"}`);
	setText("upstreams-note", groups.length ? `Groups: ${groups.join("; ")}.` : "");
	replaceRows(tbody, (result.data.upstreams || []).map((u) => el(
	    "tr", {"data-upstream": u.name},
	    el("th", {scope: "row"}, u.name),
	    el("td", {}, u.group || ""),
	    el("td", {}, u.address || ""),
	    el("td", {}, u.link || "–"),
	    el("td", {}, stateBadge(u.state, u.active ? "active" : u.suspect ? "suspect" : null)),
	    el("td", {}, sinceNode(u.since)),
	    el("td", {class: "detail"}, u.reason || ""),
	    el("td", {class: "num"}, typeof u.srtt_ms === "number" ? `${u.srtt_ms.toFixed(1)} ms` : "–"),
	    el("td", {class: "num"}, String(num(u.timeouts))))));
}

/* ---- cluster node ----------------------------------------------------------------------- */

function fact(label, value) {
	return el("div", {}, el("dt", {}, label), el("dd", {}, value));
}

function keeperText(keeper) {
	return `${keeper.alive ? "alive" : "dead"}: ${keeper.message || ""}`;
}

function renderCluster(result) {
	const facts = $("cluster-facts"), table = $("cluster-checks");
	if (result.absent || !result.data) {
		setText("cluster-note", result.absent ? "This node is not in a cluster." : result.error || "");
		facts.replaceChildren();
		table.hidden = true;
		return;
	}
	const c = result.data;
	setText("cluster-note", c.reason ? `Reason: ${c.reason}` : "");
	facts.replaceChildren(
	    fact("Node", c.node_id || "?"), fact("State", stateBadge(c.state)),
	    fact("Self-check", c.healthy ? "healthy" : "failing"),
	    fact("Announced", c.announced ? "yes" : "no"), fact("Method", c.method || "?"),
	    fact("Service addresses", (c.service_addresses || []).join(", ") || "–"),
	    fact("Transitions", String(num(c.transitions))),
	    fact("Last transition", sinceNode(c.last_transition)),
	    ...(c.vrrp_state ? [fact("VRRP", c.vrrp_state)] : []),
	    ...(c.keeper ? [fact("Keeper", keeperText(c.keeper))] : []));
	const checks = (c.self_check && c.self_check.checks) || [];
	table.hidden = checks.length === 0;
	replaceRows(table.tBodies[0], checks.map((k) => el(
	    "tr", {}, el("th", {scope: "row"}, k.name),
	    el("td", {}, stateBadge(!k.enabled ? "off" : k.ok ? "ok" : "failed")),
	    el("td", {class: "num"}, String(num(k.failures))),
	    el("td", {class: "detail"}, k.detail || ""))));
}

/* ---- recent state changes --------------------------------------------------------------- */

/*
 * The changes this page saw between two polls, shown when the daemon has no event list of
 * its own (it then knows about changes that happened while nobody looked).
 */
function trackChanges(health, monitors, upstreams, cluster, when) {
	const now = new Map();
	const note = (kind, subject, state, detail) =>
	    now.set(`${kind} ${subject}`, {kind, subject, state, detail: detail || ""});
	for (const m of monitors.data || [])
		note("check", m.key, m.state, m.last && m.last.detail);
	for (const h of health.data || [])
		note("target", h.name, h.state, h.reason);
	for (const u of (upstreams.data && upstreams.data.upstreams) || [])
		note("upstream", `upstream/${u.name}`, u.state, u.reason);
	if (cluster.data)
		note("cluster", `node/${cluster.data.node_id}`, cluster.data.state, cluster.data.reason);
	for (const [key, cur] of now) {
		const before = page.prevStates.get(key);
		if (before && before.state !== cur.state)
			page.seenChanges.unshift({at: when / 1000, kind: cur.kind, subject: cur.subject,
			                          from: before.state, to: cur.state, detail: cur.detail});
	}
	page.prevStates = now;
	page.seenChanges.length = Math.min(page.seenChanges.length, EVENTS_SHOWN);
}

/* The daemon's events say "up" and "down"; the rest of the page, like steerctl, UP and DOWN. */
function stateWord(state) {
	return state === "up" || state === "down" ? state.toUpperCase() : state;
}

/* One event of the daemon's list as the page's own: {at, kind, subject, from, to, detail}. */
function normaliseEvent(e) {
	return {
		at: num(e.time),
		kind: e.kind || "",
		subject: e.subject || "",
		from: stateWord(e.from),
		to: stateWord(e.to),
		detail: e.reason || "",
	};
}

/* Fold the reply of "events" (all of them, or those after page.eventSeq) into page.events. */
function collectEvents(data) {
	const rows = Array.isArray(data) ? data : data.events;
	if (!Array.isArray(rows))
		return;
	const last = num(data.last_seq);
	if (last < page.eventSeq) {
		/* The daemon restarted and numbers from 1 again: start over next poll. */
		page.events = null;
		page.eventSeq = 0;
		return;
	}
	if (!page.events)
		page.events = [];
	const fresh = rows.map(normaliseEvent).sort((a, b) => b.at - a.at);
	page.events = fresh.concat(page.events).slice(0, EVENTS_SHOWN);
	page.eventSeq = last;
}

function clockNode(epochSeconds) {
	const ms = epochSeconds * 1000;
	return el("time", {datetime: new Date(ms).toISOString()}, clockText(ms));
}

function renderEvents(result) {
	let list, note;
	if (result.data)
		collectEvents(result.data);
	if (result.data && page.events) {
		list = page.events;
		note = list.length ? "" : "No state changes since the daemon started.";
	} else {
		list = page.seenChanges;
		note = "Changes seen while this page is open" +
		       (result.error && !result.unsupported ? ` (the daemon's list: ${result.error})` : "") + ".";
		if (!list.length)
			note += " None yet.";
	}
	setText("events-note", note);
	$("events").replaceChildren(...list.map((e) => el(
	    "li", {"data-subject": e.subject},
	    e.at ? clockNode(e.at) : null,
	    el("span", {class: "kind"}, e.kind), el("span", {}, e.subject),
	    e.from !== undefined && e.from !== null ? el("span", {}, stateBadge(e.from), " → ") : null,
	    e.to !== undefined && e.to !== null ? stateBadge(e.to) : null,
	    e.detail ? el("span", {class: "detail"}, e.detail) : null)));
}

/* ---- start ------------------------------------------------------------------------------ */

$("token-form").addEventListener("submit", (ev) => {
	ev.preventDefault();
	const value = $("token-input").value.trim();
	if (!value)
		return;
	page.token = value;
	sessionStorage.setItem(TOKEN_KEY, value);
	$("token-input").value = "";
	$("token-form").hidden = true;
	$("main").hidden = false;
});

poll();

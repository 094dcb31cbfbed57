// nodeconverge HTML report: a view of the JSON report embedded in this page
// (the script element #nc-report holds it byte for byte as `--report json`
// writes it, compacted). Written for this project; no library, no network.
// Every string from the run is put into the page as text (textContent),
// never as markup, and control characters are shown as visible escapes.
(function () {
  "use strict";
  var t0 = performance.now();
  // The data is the JSON report as text, or, for a large run, the same
  // bytes gzip-compressed in base64, which the browser decompresses.
  function load(done) {
    var plain = document.getElementById("nc-report");
    if (plain) { done(JSON.parse(plain.textContent)); return; }
    var bin = atob(document.getElementById("nc-report-gz").textContent.replace(/\s+/g, ""));
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text()
      .then(function (t) { done(JSON.parse(t)); })
      .catch(function (e) { document.getElementById("app").textContent = "This browser cannot read the report's compressed data: " + e; });
  }
  load(function (data) {
  window.ncReport = data;
  var PAGE = 100;

  // Cell and host states, most severe first. Labels say what each means.
  var STATES = [
    ["unreachable", "unreachable"],
    ["failed", "failed"],
    ["refused", "refused before writing"],
    ["prooffail", "proof failed"],
    ["notattempted", "not attempted"],
    ["changed", data.check ? "would change" : "changed"],
    ["ignored", "failed, ignored"],
    ["ok", "ok"],
    ["skipped", "skipped"],
    ["none", "no result"]
  ];
  var RANK = {}, LABEL = {};
  STATES.forEach(function (s, i) { RANK[s[0]] = i; LABEL[s[0]] = s[1]; });

  // el builds an element; kids are nodes or strings (as text).
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) continue;
      if (k === "text") e.appendChild(vis(String(attrs[k])));
      else if (k === "class") e.className = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
    }
    (kids || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === "string" ? vis(c) : c);
    });
    return e;
  }

  // vis is s as text, with control characters (and the bidi and
  // zero-width ones that can make text lie) shown as escapes.
  var CTL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;
  function vis(s) {
    var f = document.createDocumentFragment(), last = 0, m;
    CTL.lastIndex = 0;
    while ((m = CTL.exec(s)) !== null) {
      if (m.index > last) f.appendChild(document.createTextNode(s.slice(last, m.index)));
      var c = m[0].charCodeAt(0);
      var esc = c < 0x100 ? "\\x" + ("0" + c.toString(16)).slice(-2) : "\\u" + ("000" + c.toString(16)).slice(-4);
      f.appendChild(el("span", { "class": "ctl", title: "control character U+" + ("000" + c.toString(16).toUpperCase()).slice(-4) }, [document.createTextNode(esc)]));
      last = m.index + 1;
    }
    if (last < s.length) f.appendChild(document.createTextNode(s.slice(last)));
    return f;
  }

  // ---- the fleet: one row per host, one column per task, from the results.
  var results = data.results || [];
  var hosts = data.hosts || [];
  var groups = data.groups || {};
  var notAttempted = data.not_attempted || {};
  var interrupted = data.interrupted || {};
  var cols = [], colIdx = {};
  var byHost = {};
  hosts.forEach(function (h) { byHost[h] = { name: h, results: [], cells: {} }; });

  function colKey(r) { return (r.handler ? "H" : "T") + "\u0000" + r.play + "\u0000" + (r.task || "connect"); }

  // A result's proofs by pod (the JSON report's `proofs`: one per
  // runtime handler, the daemon's, a workload's). A proof that failed, or
  // one left unproven on a result that failed for it (prove: required),
  // makes the result "proof failed": the node's running containerd could
  // not start a pod through a runtime it must serve. An unproven proof the
  // play accepted (prove: best-effort) leaves an ok result ok; the panel
  // still shows it.
  function proofBad(p, r) {
    return p.status === "failed" || (p.status === "unproven" && r.status === "failed");
  }
  function proofFailed(r) {
    return (r.proofs || []).some(function (p) { return proofBad(p, r); });
  }

  function cellState(r) {
    switch (r.status) {
      case "failed":
        if (r.ignored) return "ignored";
        if (r.refused) return "refused";
        return proofFailed(r) ? "prooffail" : "failed";
      case "changed": return proofFailed(r) ? "prooffail" : "changed";
      case "ok": return proofFailed(r) ? "prooffail" : "ok";
      case "unreachable": return "unreachable";
      case "skipped": return "skipped";
    }
    return "none";
  }

  results.forEach(function (r) {
    var k = colKey(r);
    if (!(k in colIdx)) {
      colIdx[k] = cols.length;
      cols.push({ key: k, play: r.play, task: r.task || "connect", handler: !!r.handler });
    }
    var h = byHost[r.host];
    if (!h) { h = byHost[r.host] = { name: r.host, results: [], cells: {} }; hosts.push(r.host); }
    h.results.push(r);
    var st = cellState(r), prev = h.cells[k];
    if (!prev || RANK[st] < RANK[prev.state]) h.cells[k] = { state: st, r: r };
  });

  var rows = hosts.map(function (n) {
    var h = byHost[n];
    var st = "none";
    for (var k in h.cells) if (RANK[h.cells[k].state] < RANK[st]) st = h.cells[k].state;
    if (n in notAttempted && RANK.notattempted < RANK[st]) st = "notattempted";
    if (st === "skipped") st = "ok";
    h.state = st;
    h.groups = (groups[n] || []).slice();
    h.changed = h.results.filter(function (r) { return r.status === "changed"; }).length;
    return h;
  });

  // ---- state of the view, mirrored in the URL's fragment so a link opens
  // the same view: #status=failed&group=gpu&host=omen
  var view = { status: "", group: "", q: "", sort: "state", dir: 1, page: 0, host: "" };
  function readHash() {
    var h = location.hash.replace(/^#/, "");
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) return;
      var k = decodeURIComponent(kv.slice(0, i)), v = decodeURIComponent(kv.slice(i + 1));
      if (k === "status" || k === "group" || k === "q" || k === "host" || k === "sort") view[k] = v;
      if (k === "page") view.page = parseInt(v, 10) || 0;
    });
  }
  function writeHash() {
    var parts = [];
    ["status", "group", "q", "sort", "host"].forEach(function (k) {
      if (view[k] && !(k === "sort" && view[k] === "state")) parts.push(k + "=" + encodeURIComponent(view[k]));
    });
    if (view.page) parts.push("page=" + view.page);
    var h = parts.length ? "#" + parts.join("&") : "";
    if (location.hash !== h) history.replaceState(null, "", h || location.pathname + location.search);
  }

  function filtered() {
    var q = view.q.toLowerCase();
    var out = rows.filter(function (h) {
      if (view.status && h.state !== view.status) return false;
      if (view.group && h.groups.indexOf(view.group) < 0) return false;
      if (q && h.name.toLowerCase().indexOf(q) < 0) return false;
      return true;
    });
    var s = view.sort, d = view.dir;
    out.sort(function (a, b) {
      var x, y;
      if (s === "host") { x = a.name; y = b.name; }
      else if (s === "state") { x = RANK[a.state]; y = RANK[b.state]; }
      else if (s.slice(0, 4) === "col:") {
        var k = cols[+s.slice(4)].key;
        x = RANK[(a.cells[k] || { state: "none" }).state]; y = RANK[(b.cells[k] || { state: "none" }).state];
      }
      if (x < y) return -d;
      if (x > y) return d;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    return out;
  }

  // ---- the page
  var app = document.getElementById("app");
  var total = {};
  rows.forEach(function (h) { total[h.state] = (total[h.state] || 0) + 1; });

  var fmtTime = function (s) { return s ? String(s).replace("T", " ").replace(/\.\d+/, "") : ""; };
  var exitWords = { 0: "in sync", 1: "failure", 2: "drift (changes pending)", 4: "a host unreachable" };
  app.appendChild(el("header", null, [
    el("h1", null, ["nodeconverge " + (data.check ? "check" : "apply") + " · " + rows.length + " hosts · exit " + data.exit_code + " (" + (exitWords[data.exit_code] || "?") + ")"]),
    el("div", { "class": "meta" }, ["run " + data.run_id + " · started " + fmtTime(data.started) + " · finished " + fmtTime(data.finished) +
      (data.check ? " · check mode: nothing was changed" : "")])
  ]));
  var main = el("main");
  app.appendChild(main);
  var fleet = el("div", { id: "fleet" });
  var panel = el("aside", { id: "panel", hidden: true, "aria-live": "polite" });
  main.appendChild(fleet);
  main.appendChild(panel);

  var runmsgs = el("ul", { id: "runmsgs" });
  (data.errors || []).forEach(function (m) { runmsgs.appendChild(el("li", { "class": "err" }, ["ERROR: " + m])); });
  (data.lost || []).forEach(function (m) { runmsgs.appendChild(el("li", { "class": "lost" }, [m])); });
  (data.notes || []).forEach(function (m) { runmsgs.appendChild(el("li", { "class": "note" }, ["NOTE: " + m])); });
  fleet.appendChild(runmsgs);

  var counts = el("div", { id: "counts", role: "group", "aria-label": "hosts by status" });
  fleet.appendChild(counts);
  function drawCounts() {
    counts.textContent = "";
    counts.appendChild(el("button", { type: "button", "data-status": "", "aria-pressed": view.status === "" ? "true" : "false",
      onclick: function () { setFilter("status", ""); } }, ["all", el("span", { "class": "n", text: rows.length })]));
    STATES.forEach(function (s) {
      if (!total[s[0]]) return;
      counts.appendChild(el("button", { type: "button", "data-status": s[0], "aria-pressed": view.status === s[0] ? "true" : "false",
        onclick: function () { setFilter("status", view.status === s[0] ? "" : s[0]); } },
        [el("span", { "class": "sw s-" + s[0] }), s[1], el("span", { "class": "n", text: total[s[0]] })]));
    });
  }

  var allGroups = {};
  rows.forEach(function (h) { h.groups.forEach(function (g) { allGroups[g] = (allGroups[g] || 0) + 1; }); });
  var fStatus = el("select", { id: "f-status", onchange: function () { setFilter("status", fStatus.value); } },
    [el("option", { value: "" }, ["any status"])].concat(STATES.filter(function (s) { return total[s[0]]; }).map(function (s) {
      return el("option", { value: s[0] }, [s[1] + " (" + total[s[0]] + ")"]);
    })));
  var fGroup = el("select", { id: "f-group", onchange: function () { setFilter("group", fGroup.value); } },
    [el("option", { value: "" }, ["any group"])].concat(Object.keys(allGroups).sort().map(function (g) {
      return el("option", { value: g }, [g + " (" + allGroups[g] + ")"]);
    })));
  var fHost = el("input", { id: "f-host", type: "search", placeholder: "host name contains", oninput: function () { setFilter("q", fHost.value); } });
  var shown = el("span", { id: "shown" });
  fleet.appendChild(el("div", { id: "filters" }, [
    el("label", { "for": "f-status" }, ["status"]), fStatus,
    el("label", { "for": "f-group" }, ["group"]), fGroup,
    el("label", { "for": "f-host" }, ["host"]), fHost, shown
  ]));

  var table = el("table", { "class": "grid", id: "grid" });
  var thead = el("thead"), tbody = el("tbody");
  table.appendChild(thead);
  table.appendChild(tbody);
  fleet.appendChild(table);
  var pager = el("div", { id: "pager" });
  fleet.appendChild(pager);
  fleet.appendChild(el("div", { id: "legend" }, STATES.map(function (s) {
    return el("span", null, [el("span", { "class": "sw s-" + s[0] }), s[1]]);
  }).concat(cols.length ? [el("div", null, ["Columns: " + cols.map(function (c, i) { return (i + 1) + ". " + (c.handler ? "handler " : "") + c.task; }).join(" · ")])] : [])));

  function sortBy(key) {
    if (view.sort === key) view.dir = -view.dir; else { view.sort = key; view.dir = 1; }
    view.page = 0;
    draw();
  }
  function drawHead() {
    thead.textContent = "";
    var aria = function (k) { return view.sort === k ? (view.dir > 0 ? "ascending" : "descending") : null; };
    var tr = el("tr", null, [
      el("th", { "class": "host", "aria-sort": aria("host"), onclick: function () { sortBy("host"); } }, ["host"]),
      el("th", { "class": "st", "aria-sort": aria("state"), onclick: function () { sortBy("state"); } }, ["status"])
    ]);
    cols.forEach(function (c, i) {
      var name = (c.handler ? "handler: " : "") + c.task;
      tr.appendChild(el("th", { "class": "task", title: c.play + " / " + name, "aria-sort": aria("col:" + i),
        onclick: function () { sortBy("col:" + i); } }, [el("span", null, [(i + 1) + ". " + name])]));
    });
    thead.appendChild(tr);
  }

  function drawRows() {
    var list = filtered();
    var pages = Math.max(1, Math.ceil(list.length / PAGE));
    if (view.page >= pages) view.page = pages - 1;
    if (view.page < 0) view.page = 0;
    var slice = list.slice(view.page * PAGE, view.page * PAGE + PAGE);
    tbody.textContent = "";
    var frag = document.createDocumentFragment();
    slice.forEach(function (h) {
      var tr = el("tr", { "data-host": h.name, "data-status": h.state, "class": h.name === view.host ? "sel" : null });
      tr.appendChild(el("td", { "class": "host" }, [el("button", { type: "button", title: h.groups.join(", "),
        onclick: function () { openHost(h.name); } }, [h.name])]));
      tr.appendChild(el("td", { "class": "st" }, [el("span", { "class": "badge s-" + h.state }, [LABEL[h.state]])]));
      cols.forEach(function (c) {
        var cell = h.cells[c.key];
        var st = cell ? cell.state : (h.name in notAttempted ? "notattempted" : "none");
        var mark = cell && cell.r.rolled_back && cell.r.rolled_back.length ? "\u21BA" : "";
        tr.appendChild(el("td", { "class": "cell s-" + st, "data-col": c.key, title: c.task + ": " + LABEL[st] + (mark ? ", rolled back" : ""),
          onclick: function () { openHost(h.name, c.key); } }, [mark]));
      });
      frag.appendChild(tr);
    });
    tbody.appendChild(frag);
    shown.textContent = list.length === rows.length ? rows.length + " hosts" : list.length + " of " + rows.length + " hosts";
    pager.textContent = "";
    if (pages > 1) {
      pager.appendChild(el("button", { type: "button", id: "prev", disabled: view.page === 0, onclick: function () { view.page--; draw(); } }, ["\u2039 previous"]));
      pager.appendChild(el("span", { id: "pageno" }, ["page " + (view.page + 1) + " of " + pages + " (" + PAGE + " hosts a page)"]));
      pager.appendChild(el("button", { type: "button", id: "next", disabled: view.page >= pages - 1, onclick: function () { view.page++; draw(); } }, ["next \u203A"]));
    }
  }

  function setFilter(k, v) {
    view[k] = v;
    view.page = 0;
    draw();
  }
  function draw() {
    fStatus.value = view.status;
    fGroup.value = view.group;
    if (fHost.value !== view.q) fHost.value = view.q;
    drawCounts();
    drawHead();
    drawRows();
    writeHash();
  }

  // ---- one host
  var TODO = {
    unreachable: "The node did not answer over SSH. Check that it is up and that sshd listens, then run the check again for it alone:",
    failed: "A task failed on this host. Read the message below; when the host was rolled back its files are as before the run. Fix the cause, then check again:",
    refused: "The plan refused this host before writing anything: the node is as the run found it. Read why below, fix the node or the playbook, then check again:",
    prooffail: "The node's running containerd failed its proof by pod: a runtime it must serve could not start a pod sandbox, or the daemon could not be asked (see each proof's reason below). Pods through that runtime would fail. " +
      (data.check ? "Nothing was changed. " : "A restart that failed its proof was rolled back. ") + "Fix the runtime (toolkit, driver, its config), then prove again:",
    notattempted: "A stopped play never reached this host. Fix the failure that stopped it (see the run's errors), then run again:",
    changed: data.check ? "The host has drifted from the playbook: the changes below are pending. Apply them with:" : "The run changed this host as shown below. Nothing to do; to confirm, check again:",
    ignored: "A task failed but ignore_errors kept the host in the play. Read the message below:",
    ok: "The host is in sync. Nothing to do.",
    none: "No task ran on this host."
  };

  function diffBlock(text) {
    var pre = el("pre", { "class": "diff" });
    text.replace(/\n$/, "").split("\n").forEach(function (line) {
      var cls = null;
      if (/^(---|\+\+\+) /.test(line)) cls = "hdr";
      else if (/^@@/.test(line)) cls = "hunk";
      else if (/^(\+|  \+ )/.test(line)) cls = "add";
      else if (/^(-|  - )/.test(line)) cls = "del";
      var s = el("span", { "class": cls }, [line]);
      pre.appendChild(s);
      if (!cls) pre.appendChild(document.createTextNode("\n"));
    });
    return pre;
  }

  function short(h) { return h ? h.slice(0, 12) : "none"; }

  function taskSection(r, focus) {
    var st = cellState(r);
    var sec = el("section", { "class": "task", "data-status": st, "data-col": colKey(r) }, [
      el("h3", null, [el("span", { "class": "badge s-" + st }, [LABEL[st]]), " ", (r.handler ? "handler: " : "") + (r.task || "connect")]),
      el("div", { "class": "sub" }, [r.play + " · " + (r.module || "") + " · " + (r.duration_ns / 1e6).toFixed(0) + " ms" +
        (r.because ? " · because " + r.because.join(", ") : "") + (r.no_log ? " · no_log: details hidden" : "")])
    ]);
    var msg = r.msg || (r.result && r.result.msg) || "";
    if (msg) sec.appendChild(el("pre", { "class": "msg" + (r.status === "failed" || r.status === "unreachable" ? " bad" : "") }, [msg]));
    if (r.rolled_back && r.rolled_back.length) {
      sec.appendChild(el("div", { "class": "rb" }, [el("strong", null, ["Rolled back: "]), "this host's run was undone; restored " + r.rolled_back.join(", ")]));
    }
    var p = r.plan;
    if (p) {
      if (p.skip) sec.appendChild(el("div", { "class": "sub" }, ["skipped: " + p.skip]));
      if (p.files && p.files.length) {
        sec.appendChild(el("h4", null, ["plan: files"]));
        sec.appendChild(el("ul", { "class": "files" }, p.files.map(function (f) {
          return el("li", null, [f.action + " " + f.path + (f.from ? " (from " + f.from + ")" : "") +
            (f.mode ? " mode " + (f.mode & 4095).toString(8) : "") + (f.owner ? " owner " + f.owner : "") +
            " · sha256 " + short(f.before_sha256) + " \u2192 " + short(f.after_sha256) +
            (f.reasons && f.reasons.length ? " · " + f.reasons.join("; ") : "")]);
        })));
      }
      if (p.commands && p.commands.length) {
        sec.appendChild(el("h4", null, ["plan: commands"]));
        sec.appendChild(el("ul", { "class": "plain" }, p.commands.map(function (c) { return el("li", { "class": "cmd" }, [c]); })));
      }
      if (p.restart && p.restart.length) sec.appendChild(el("div", { "class": "sub" }, ["restarts " + p.restart.join(", ")]));
    }
    if (r.diff) {
      sec.appendChild(el("h4", null, ["diff"]));
      sec.appendChild(diffBlock(r.diff));
    } else if (p && p.files && p.files.length && !r.no_log) {
      sec.appendChild(el("div", { "class": "sub" }, ["file diffs are not in this report: the run was made without --diff"]));
    }
    if (p && p.effective && p.effective.length) {
      sec.appendChild(el("h4", null, ["effective config, as the node's containerd loads it"]));
      var tb = el("tbody"), zero = 0;
      // As the human --diff does: the zero-valued fields a new table
      // brings along are counted, not listed.
      var ZERO = { "": 1, '""': 1, "0": 1, "0.0": 1, "false": 1, "[]": 1, "{}": 1 };
      p.effective.forEach(function (e) {
        if (!e.before && ZERO[e.after || ""]) { zero++; return; }
        tb.appendChild(el("tr", { "data-key": e.key }, [el("td", null, [e.key]), el("td", null, [e.before || "(absent)"]), el("td", null, [e.after || "(absent)"]),
          el("td", null, [e.decided_by || ""])]));
      });
      if (tb.childNodes.length) sec.appendChild(el("table", { "class": "eff" }, [el("thead", null, [el("tr", null, [el("th", null, ["key"]), el("th", null, ["live value"]), el("th", null, ["planned"]), el("th", null, ["live value decided by"])])]), tb]));
      if (zero) sec.appendChild(el("div", { "class": "sub" }, [(tb.childNodes.length ? "and " : "") + zero + " new keys at their zero value"]));
    }
    if (p && p.drift && p.drift.length) {
      sec.appendChild(el("h4", null, ["drift: where each value comes from"]));
      sec.appendChild(el("ul", { "class": "plain" }, p.drift.map(function (d) { return el("li", null, [d]); })));
    }
    if (r.proofs && r.proofs.length) {
      // One row per proof, as the JSON report holds it: what was proved
      // (runtime handler, daemon, workload), its status, the daemon's own
      // reason, how the daemon was reached, and the runtime as the daemon
      // loaded it.
      sec.appendChild(el("h4", null, ["proof by pod: the running daemon, a pod sandbox through each runtime"]));
      var pb = el("tbody");
      r.proofs.forEach(function (x) {
        var bad = proofBad(x, r);
        var loaded = x.kind === "runtime" ? (x.loaded ? "loaded" + (x.runtime_type ? ", " + x.runtime_type : "") : "not loaded by the daemon") : "";
        var opts = x.options ? Object.keys(x.options).sort().map(function (k) { return k + "=" + x.options[k]; }).join(", ") : "";
        pb.appendChild(el("tr", { "class": "proof" + (bad ? " bad" : ""), "data-kind": x.kind, "data-name": x.name || "", "data-status": x.status }, [
          el("td", { "class": "what" }, [x.kind + (x.name ? " " + x.name : "")]),
          el("td", { "class": "pst" }, [el("span", { "class": "badge p-" + x.status }, [x.status])]),
          el("td", { "class": "reason" }, [x.reason || x.detail || ""]),
          el("td", { "class": "via" }, [x.via || ""]),
          el("td", { "class": "daemon" }, [[loaded, opts].filter(Boolean).join("; ")]),
          el("td", { "class": "dur" }, [x.duration_ns ? (x.duration_ns / 1e6).toFixed(0) + " ms" : ""])
        ]));
        if (x.output) pb.appendChild(el("tr", { "class": "proof-out" }, [el("td", { colspan: "6" }, [el("pre", null, [x.output])])]));
      });
      sec.appendChild(el("table", { "class": "proofs" }, [el("thead", null, [el("tr", null, [el("th", null, ["proof"]), el("th", null, ["status"]),
        el("th", null, ["reason (the daemon's own text)"]), el("th", null, ["daemon reached via"]), el("th", null, ["as the daemon loaded it"]), el("th", null, ["time"])])]), pb]));
    }
    if (p && p.evidence && p.evidence.length) {
      sec.appendChild(el("h4", null, ["evidence"]));
      sec.appendChild(el("ul", { "class": "ev" }, p.evidence.map(function (e) {
        return el("li", { "class": e.ok ? "ok" : "fail" }, [(e.ok ? "\u2713 " : "\u2717 ") + e.what + (e.required ? "" : " (advisory)"),
          el("div", { "class": "cmd" }, [e.command]), e.output ? el("pre", null, [e.output]) : null]);
      })));
    }
    if (p && p.notes && p.notes.length) {
      sec.appendChild(el("h4", null, ["notes"]));
      sec.appendChild(el("ul", { "class": "plain" }, p.notes.map(function (n) { return el("li", null, [n]); })));
    }
    if (r.result && r.result.output && msg.indexOf(r.result.output) < 0) {
      sec.appendChild(el("h4", null, ["output"]));
      sec.appendChild(el("pre", null, [r.result.output]));
    }
    if (focus) sec.setAttribute("data-focus", "");
    return sec;
  }

  function openHost(name, focusCol) {
    var h = byHost[name];
    if (!h) return;
    view.host = name;
    panel.textContent = "";
    panel.hidden = false;
    panel.setAttribute("data-host", name);
    panel.setAttribute("data-status", h.state);
    panel.appendChild(el("button", { type: "button", "class": "close", onclick: closeHost }, ["close \u2715"]));
    panel.appendChild(el("h2", null, [name]));
    panel.appendChild(el("div", null, [el("span", { "class": "badge s-" + h.state }, [LABEL[h.state]]),
      h.groups.length ? " groups: " + h.groups.join(", ") : ""]));
    var rc = (data.recap || {})[name];
    if (rc) panel.appendChild(el("div", { "class": "sub" }, ["ok=" + rc.ok + " changed=" + rc.changed + " unreachable=" + rc.unreachable + " failed=" + rc.failed + " skipped=" + rc.skipped + (rc.ignored ? " ignored=" + rc.ignored : "")]));
    if (name in notAttempted) panel.appendChild(el("pre", { "class": "msg bad" }, ["not attempted: " + notAttempted[name]]));
    if (name in interrupted) panel.appendChild(el("pre", { "class": "msg bad" }, ["interrupted: " + interrupted[name]]));
    var cmd = "nodeconverge apply " + (h.state === "changed" && data.check ? "" : "--check ") + (h.state === "prooffail" ? "--prove " : "") + "--diff -i INVENTORY -l " + name + " PLAYBOOK";
    panel.appendChild(el("div", { "class": "todo", id: "todo" }, [TODO[h.state] || "", h.state === "ok" || h.state === "none" ? null : el("div", null, [el("code", null, [cmd])])]));
    // Without a column, the panel opens at the host's worst result.
    if (!focusCol) {
      var worst = null;
      h.results.forEach(function (r) { if (!worst || RANK[cellState(r)] < RANK[cellState(worst)]) worst = r; });
      if (worst && RANK[cellState(worst)] < RANK.changed) focusCol = colKey(worst);
    }
    var focusEl = null;
    h.results.forEach(function (r) {
      var s = taskSection(r, !focusEl && colKey(r) === focusCol);
      if (!focusEl && colKey(r) === focusCol) focusEl = s;
      panel.appendChild(s);
    });
    Array.prototype.forEach.call(tbody.querySelectorAll("tr.sel"), function (tr) { tr.classList.remove("sel"); });
    Array.prototype.forEach.call(tbody.querySelectorAll("tr"), function (tr) { if (tr.getAttribute("data-host") === name) tr.classList.add("sel"); });
    writeHash();
    panel.scrollTop = 0;
    if (focusEl) panel.scrollTop = Math.max(0, focusEl.offsetTop - panel.offsetTop - 120);
  }
  function closeHost() {
    view.host = "";
    panel.hidden = true;
    panel.removeAttribute("data-host");
    Array.prototype.forEach.call(tbody.querySelectorAll("tr.sel"), function (tr) { tr.classList.remove("sel"); });
    writeHash();
  }

  readHash();
  draw();
  if (view.host) openHost(view.host);
  window.addEventListener("hashchange", function () { readHash(); draw(); if (view.host) openHost(view.host); else closeHost(); });
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-render-ms", (performance.now() - t0).toFixed(1));
  });
})();

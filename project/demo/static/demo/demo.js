/* The demo page: a conversation sidebar and a live transcript, read only through the public API.
 *
 * REST (/api/conversations/...) loads pages; ws/conversations/ keeps the sidebar live and
 * ws/conversations/<id>/?since=N the open transcript. Rows are upserted by id (the newer
 * event_seq wins) and shown in seq order. All model text goes in through textContent.
 */
(function () {
  "use strict";

  const PAGE = 50;
  const FINAL_CLOSE = new Set([4400, 4401, 4404]);
  const $ = (id) => document.getElementById(id);

  const list = { items: new Map(), cursor: null, loading: false, socket: null, retry: 500, opened: false };
  let view = null; // the open conversation, see openConversation()
  let held = false; // the test hook holds the connection down

  // ------------------------------------------------------------------ small helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function details(summary, body, open) {
    const box = el("details");
    box.open = Boolean(open);
    box.append(el("summary", null, summary), el("pre", null, body));
    return box;
  }

  function when(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return "";
    const today = new Date().toDateString() === date.toDateString();
    return today
      ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : date.toLocaleDateString([], { month: "short", day: "numeric" });
  }

  function moment(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return "";
    return date.toLocaleString([], {
      month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    });
  }

  async function getJSON(url) {
    const response = await fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    if (response.status === 401 || response.status === 403) {
      window.location.assign("/accounts/login/?next=/");
      throw new Error("signed out");
    }
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    return response.json();
  }

  function socketURL(path) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${window.location.host}${path}`;
  }

  function setConnection(state, text) {
    const node = $("connection");
    node.dataset.state = state;
    node.textContent = text;
    document.body.dataset.socket = state;
  }

  // ------------------------------------------------------------------ sidebar

  function renderList() {
    const items = [...list.items.values()].sort(
      (a, b) => (a.saved_at < b.saved_at ? 1 : a.saved_at > b.saved_at ? -1 : a.id < b.id ? 1 : -1),
    );
    const nodes = items.map((item) => {
      const li = el("li");
      const button = el("button", "conversation");
      button.type = "button";
      button.dataset.id = item.id;
      if (view && view.id === item.id) button.setAttribute("aria-current", "true");
      const meta = el("span", "meta");
      meta.append(
        el("span", `badge status-${item.status}`, item.status),
        el("span", null, `${item.message_count} messages`),
        el("time", null, when(item.saved_at)),
      );
      button.append(el("span", "title", item.title || "Untitled conversation"), meta);
      button.addEventListener("click", () => {
        window.location.hash = item.id;
      });
      li.append(button);
      return li;
    });
    $("conversations").replaceChildren(...nodes);
    $("conversations-empty").hidden = nodes.length > 0;
  }

  async function loadList(reset) {
    if (list.loading || (!reset && !list.cursor)) return;
    list.loading = true;
    try {
      const cursor = reset ? "" : `&cursor=${encodeURIComponent(list.cursor)}`;
      const page = await getJSON(`/api/conversations/?limit=${PAGE}${cursor}`);
      for (const item of page.results) list.items.set(item.id, item);
      list.cursor = page.next_cursor;
      renderList();
    } finally {
      list.loading = false;
    }
  }

  function connectList() {
    const socket = new WebSocket(socketURL("/ws/conversations/"));
    list.socket = socket;
    socket.onopen = () => {
      list.retry = 500;
      if (list.opened) loadList(true).catch(console.error); // catch up on what was saved meanwhile
      list.opened = true;
    };
    socket.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "conversation_saved") {
        list.items.set(frame.conversation.id, frame.conversation);
        if (view && view.id === frame.conversation.id) {
          $("conversation-title").textContent = frame.conversation.title || "Untitled conversation";
        }
        renderList();
      } else if (frame.type === "conversation_deleted") {
        list.items.delete(frame.conversation_id);
        renderList();
      }
    };
    socket.onclose = (event) => {
      if (socket !== list.socket || FINAL_CLOSE.has(event.code)) return;
      if (held) return;
      setTimeout(connectList, list.retry);
      list.retry = Math.min(list.retry * 2, 30000);
    };
  }

  // ------------------------------------------------------------------ cards

  const ROLE = { user: "You", assistant: "Assistant", tool: "Tool", system: "System" };

  function body(row) {
    const c = row.content || {};
    switch (row.content_type) {
      case "text":
      case "notification":
      case "error":
        return [el("p", "text", c.text)];
      case "thinking": {
        const box = el("details", "thinking");
        box.append(el("summary", null, "Thinking"), el("p", "text", c.text));
        return [box];
      }
      case "tool_call": {
        const parts = [];
        const meta = row.metadata || {};
        const text = meta.display_text || c.display_text;
        if (text) parts.push(el("p", "display-text", text));
        parts.push(details("Arguments", pretty(c.arguments)));
        if (meta.result !== undefined && meta.result !== null) {
          parts.push(details("Result", pretty(meta.result)));
        }
        if (meta.error) parts.push(details("Error", pretty(meta.error), true));
        return parts;
      }
      case "tool_result": {
        const text = pretty(c.content);
        return [text.length > 600 ? details("Output", text) : el("pre", "output", text)];
      }
      case "image": {
        const img = el("img", "image");
        img.alt = "image";
        img.src = c.url || `data:${c.mime_type};base64,${c.data}`;
        return [img];
      }
      case "file_reference":
        return [el("p", "text", `${c.name} (${c.path})`)];
      case "structured_data":
        return [details(c.format || "data", pretty(c.data))];
      case "todo_snapshot": {
        const ul = el("ul", "todos");
        for (const todo of c.todos || []) {
          ul.append(el("li", null, typeof todo === "string" ? todo : pretty(todo)));
        }
        return c.summary ? [el("p", "text", c.summary), ul] : [ul];
      }
      default:
        return [el("pre", null, pretty(c))];
    }
  }

  function heading(row) {
    const c = row.content || {};
    if (row.content_type === "tool_call") return `Tool call · ${c.name}`;
    if (row.content_type === "tool_result") {
      return `${c.is_error ? "Failed result" : "Result"} · ${c.name || c.tool_call_id}`;
    }
    if (row.content_type === "error") return "Error";
    if (row.metadata && row.metadata.injected) return "Injected context";
    return ROLE[row.message_type] || row.message_type;
  }

  function card(row, previous) {
    const li = el("li", `card ${row.message_type} ${row.content_type.replace("_", "-")}`);
    li.dataset.id = row.id;
    li.dataset.seq = String(row.seq);
    if (row.content && row.content.is_error) li.classList.add("failed");
    const head = el("div", "card-head");
    head.append(el("span", "who", heading(row)));
    if (row.created_at) {
      // when it happened: for an imported log, the log's own time (docs/formats.md "Times")
      const stamp = el("time", "muted", moment(row.created_at));
      stamp.dateTime = row.created_at;
      head.append(stamp);
    }
    if (row.content_type === "tool_call") {
      li.dataset.callId = row.tool_call_id || row.content.call_id;
      const badge = el("span", `badge status-${row.status}`, row.status);
      badge.dataset.role = "tool-status";
      head.append(badge);
      const seen = previous ? previous.dataset.history.split(" ") : [];
      if (seen[seen.length - 1] !== row.status) seen.push(row.status);
      li.dataset.history = seen.join(" ");
    }
    if (row.truncated) head.append(el("span", "muted", "(shortened; open the API for all)"));
    li.append(head, ...body(row));
    return li;
  }

  function isVisible(row) {
    return view.visibleFrom === null || row.seq >= view.visibleFrom;
  }

  function nearBottom() {
    const box = $("transcript");
    return box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  }

  function scrollToBottom() {
    const box = $("transcript");
    box.scrollTop = box.scrollHeight;
  }

  function place(row) {
    const cards = $("cards");
    const old = cards.querySelector(`li.card[data-id="${CSS.escape(row.id)}"]`);
    if (!isVisible(row)) return;
    const fresh = card(row, old);
    if (old) {
      old.replaceWith(fresh);
      return;
    }
    let next = cards.lastElementChild;
    while (next && Number(next.dataset.seq) > row.seq) next = next.previousElementSibling;
    if (next) next.after(fresh);
    else cards.prepend(fresh);
  }

  function upsert(row) {
    const known = view.rows.get(row.id);
    if (known && known.event_seq > row.event_seq) return; // an older state than we show
    view.rows.set(row.id, row);
    place(row);
  }

  function upsertAll(rows) {
    const stick = nearBottom();
    for (const row of rows) upsert(row);
    if (stick) scrollToBottom();
  }

  function showStatus(status, pending) {
    const stick = nearBottom();
    const badge = $("conversation-status");
    badge.hidden = !status;
    badge.className = `badge status-${status}`;
    badge.textContent = status || "";
    const box = $("pending");
    box.hidden = !pending;
    if (!pending) return;
    box.querySelector(".question").textContent = pending.question || "The agent is waiting.";
    const options = (pending.pauseData && pending.pauseData.options) || [];
    box
      .querySelector(".options")
      .replaceChildren(...(Array.isArray(options) ? options : []).map((o) => el("li", null, pretty(o))));
    if (stick) scrollToBottom();
  }

  function stream(frame) {
    const box = $("streams");
    let node = box.querySelector(`li[data-stream="${CSS.escape(frame.stream_id)}"]`);
    const stick = nearBottom();
    if (!node) {
      node = el("li", "card assistant text streaming");
      node.dataset.stream = frame.stream_id;
      const head = el("div", "card-head");
      head.append(el("span", "who", "Assistant"), el("span", "badge status-executing", "typing"));
      node.append(head, el("p", "text"));
      box.append(node);
    }
    node.querySelector("p.text").textContent += frame.text;
    if (stick) scrollToBottom();
  }

  // ------------------------------------------------------------------ the open conversation

  function markEvent(frame) {
    if (typeof frame.event_seq === "number" && frame.event_seq > view.lastEventSeq) {
      view.lastEventSeq = frame.event_seq;
    }
  }

  async function pageSince(since) {
    let cursor = "";
    for (;;) {
      const page = await getJSON(`${view.api}display-messages/?since=${since}&limit=100${cursor}`);
      upsertAll(page.results);
      if (!page.next_cursor) return;
      cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
    }
  }

  function onFrame(frame, current) {
    switch (frame.type) {
      case "snapshot":
        $("conversation-title").textContent = frame.conversation.title || "Untitled conversation";
        showStatus(frame.status, frame.pending);
        return;
      case "display_message_saved":
      case "display_message_updated":
        if (frame.message.message_type === "assistant" && frame.message.content_type === "text") {
          $("streams").replaceChildren(); // the final text replaces what was streamed
        }
        upsertAll([frame.message]);
        break;
      case "tool_execution_update":
        break; // the tool_call row arrives as display_message_updated in the same event
      case "status_changed":
        showStatus(frame.status, frame.pending);
        break;
      case "conversation_updated":
        $("conversation-title").textContent = frame.conversation.title || "Untitled conversation";
        break;
      case "display_message_delta":
        stream(frame);
        return;
      case "resync": {
        // More changed than a replay carries: page them over REST, then go on live.
        const target = frame.event_seq;
        current.resyncing = pageSince(current.since).then(() => {
          if (target > view.lastEventSeq) view.lastEventSeq = target;
        });
        return;
      }
      default:
        return;
    }
    markEvent(frame);
  }

  function connectConversation() {
    const current = view;
    const since = current.lastEventSeq;
    const socket = new WebSocket(
      socketURL(`/ws/conversations/${current.id}/?since=${since}`),
    );
    current.socket = socket;
    const link = { since, resyncing: null };
    socket.onopen = () => {
      current.retry = 500;
      setConnection("live", "Live");
    };
    socket.onmessage = (event) => {
      if (view !== current) return;
      onFrame(JSON.parse(event.data), link);
    };
    socket.onclose = (event) => {
      if (view !== current || socket !== current.socket) return;
      if (FINAL_CLOSE.has(event.code)) {
        const why = { 4401: "Signed out", 4404: "Conversation not found", 4400: "Bad request" };
        setConnection("closed", why[event.code]);
        return;
      }
      $("streams").replaceChildren(); // the saved text will come through the replay
      if (held) {
        setConnection("offline", "Offline");
        return;
      }
      setConnection("reconnecting", "Reconnecting…");
      setTimeout(() => view === current && !held && connectConversation(), current.retry);
      current.retry = Math.min(current.retry * 2, 30000);
    };
  }

  async function loadOlder() {
    const current = view;
    if (!current || !current.cursor || current.loadingOlder) return;
    current.loadingOlder = true;
    $("older").hidden = false;
    const box = $("transcript");
    const before = box.scrollHeight;
    try {
      const cursor = encodeURIComponent(current.cursor);
      const page = await getJSON(`${current.api}display-messages/?limit=${PAGE}&cursor=${cursor}`);
      if (view !== current) return;
      current.cursor = page.next_cursor;
      const seqs = page.results.map((row) => row.seq);
      current.visibleFrom = current.cursor && seqs.length ? Math.min(...seqs) : null;
      // Rows kept from live events for seqs not shown yet, and this page: newest state wins.
      for (const row of page.results) {
        const known = current.rows.get(row.id);
        if (!known || known.event_seq <= row.event_seq) current.rows.set(row.id, row);
      }
      for (const row of current.rows.values()) if (isVisible(row)) place(row);
      box.scrollTop += box.scrollHeight - before; // keep what the reader looked at in place
    } finally {
      current.loadingOlder = false;
      $("older").hidden = true;
    }
    fillViewport();
  }

  function fillViewport() {
    const box = $("transcript");
    if (view && view.cursor && box.scrollHeight <= box.clientHeight + 40) {
      loadOlder().catch(console.error);
    }
  }

  async function openConversation(id) {
    if (view && view.socket) {
      const old = view.socket;
      view = null;
      old.close(1000);
    }
    const current = {
      id,
      api: `/api/conversations/${id}/`,
      rows: new Map(),
      cursor: null,
      visibleFrom: null,
      lastEventSeq: 0,
      socket: null,
      retry: 500,
      loadingOlder: false,
    };
    view = current;
    renderList();
    $("cards").replaceChildren();
    $("streams").replaceChildren();
    showStatus("", null);
    const summary = list.items.get(id);
    $("conversation-title").textContent = summary ? summary.title || "Untitled conversation" : "…";
    setConnection("connecting", "Connecting…");
    const page = await getJSON(`${current.api}display-messages/?limit=${PAGE}`);
    if (view !== current) return;
    current.cursor = page.next_cursor;
    const seqs = page.results.map((row) => row.seq);
    current.visibleFrom = current.cursor && seqs.length ? Math.min(...seqs) : null;
    for (const row of page.results) {
      current.lastEventSeq = Math.max(current.lastEventSeq, row.event_seq);
    }
    upsertAll(page.results.slice().reverse());
    scrollToBottom();
    connectConversation();
    fillViewport();
  }

  function closeConversation() {
    if (view && view.socket) {
      const old = view.socket;
      view = null;
      old.close(1000);
    }
    view = null;
    $("conversation-title").textContent = "Pick a conversation";
    $("cards").replaceChildren();
    $("streams").replaceChildren();
    showStatus("", null);
    renderList();
  }

  function route() {
    const id = window.location.hash.slice(1);
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
      if (!view || view.id !== id) {
        openConversation(id).catch((error) => {
          console.error(error);
          $("conversation-title").textContent = "This conversation cannot be shown";
          setConnection("closed", "Not loaded");
        });
      }
    } else {
      closeConversation();
    }
  }

  // ------------------------------------------------------------------ run the demo agent

  async function runAgent(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          Accept: "application/json",
          "X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value,
        },
      });
      const answer = await response.json();
      if (response.ok) window.location.hash = answer.conversation_id;
      else window.alert(answer.detail || "The demo agent could not start.");
    } finally {
      button.disabled = false;
    }
  }

  // ------------------------------------------------------------------ start

  // Test hook (the browser test; also handy by hand): drop the sockets, optionally holding them
  // down, then restore them; the transcript catches up through ?since=.
  window.murmurDemo = {
    dropConnection(hold) {
      held = Boolean(hold);
      if (list.socket) list.socket.close(1000);
      if (view && view.socket) view.socket.close(1000);
    },
    restoreConnection() {
      held = false;
      connectList();
      if (view) connectConversation();
    },
    lastEventSeq: () => (view ? view.lastEventSeq : null),
  };

  $("run-agent").addEventListener("submit", runAgent);
  $("transcript").addEventListener("scroll", () => {
    if ($("transcript").scrollTop < 80) loadOlder().catch(console.error);
  });
  $("conversations").parentElement.addEventListener("scroll", (event) => {
    const box = event.currentTarget;
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 80) loadList(false).catch(console.error);
  });
  window.addEventListener("hashchange", route);

  loadList(true)
    .then(() => {
      connectList();
      if (!window.location.hash && list.items.size) {
        const newest = [...list.items.values()].sort((a, b) => (a.saved_at < b.saved_at ? 1 : -1))[0];
        window.location.hash = newest.id; // fires hashchange -> route()
      } else {
        route();
      }
    })
    .catch(console.error);
})();

/* The demo page: a conversation sidebar and a live transcript, read and written only through the
 * public API (docs/demo.md).
 *
 * REST (/api/conversations/...) loads pages, renames, pins, archives, tags, deletes, answers the
 * pending ask, rates assistant cards, forks from a card and makes and revokes share links;
 * /api/search/ finds messages; ws/conversations/ keeps the sidebar live (tokens and cost
 * included) and ws/conversations/<id>/?since=N the open transcript.
 * Rows are upserted by id (the newer event_seq wins) and shown in seq order. All model text goes in
 * through textContent; remote images load only when the reader asks for them.
 */
(function () {
  "use strict";

  const PAGE = 50;
  const FINAL_CLOSE = { 4400: "Bad request", 4401: "Signed out", 4404: "Conversation not found" };
  const UNTITLED = "Untitled conversation";
  const $ = (id) => document.getElementById(id);

  // The sidebar: summaries by id, the next page's cursor, its socket.
  const list = {
    items: new Map(),
    cursor: null,
    loadingMore: false,
    generation: 0, // bumped by every full reload; a page of an older generation is dropped
    changes: null, // socket frames that arrived during a full reload, applied after it
    editing: null, // the id whose title is being edited
    tagging: null, // the id whose tags are being edited
    archived: false, // the sidebar shows archived conversations (only) when true
    tag: null, // the sidebar shows only conversations with this tag
    socket: null,
    timer: null,
    retry: backoff(),
    opened: false,
  };
  let view = null; // the open conversation, see newView()
  let held = false; // the test hook holds the connection down
  const paging = new Set(); // resync walks in flight (the test hook waits for them)
  let resyncGate = null; // while the test hook holds resync walks: {promise, release}

  // ------------------------------------------------------------------ small helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function button(className, text, onClick) {
    const node = el("button", className, text);
    node.type = "button";
    if (onClick) node.addEventListener("click", onClick);
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

  function titleOf(summary) {
    return (summary && summary.title) || UNTITLED;
  }

  const COMPACT = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
  const WHOLE = new Intl.NumberFormat();

  /** A cost (the API's exact decimal string, USD) for reading: cents, or "<$0.01". */
  function money(text) {
    const value = Number(text);
    if (value > 0 && value < 0.01) return "<$0.01";
    return `$${value.toFixed(2)}`;
  }

  /** The tokens and cost of a summary's `usage` (docs/usage.md): {short, long}, or null when the
   * conversation has none. */
  function usageText(usage) {
    if (!usage || !Array.isArray(usage.models) || usage.models.length === 0) return null;
    const tokens = usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    const unpriced = Array.isArray(usage.unpriced) ? usage.unpriced : [];
    // The priced part; "+" when some models' tokens have no price (docs/usage.md).
    const cost = usage.cost === null ? "cost unknown" : money(usage.cost) + (unpriced.length ? "+" : "");
    const long = [
      `${WHOLE.format(usage.input_tokens)} input (uncached)`,
      `${WHOLE.format(usage.cache_read_tokens)} cache read`,
      `${WHOLE.format(usage.cache_write_tokens)} cache write`,
      `${WHOLE.format(usage.output_tokens)} output (${WHOLE.format(usage.reasoning_tokens)} reasoning)`,
      `models: ${usage.models.map((m) => m || "unnamed").join(", ")}`,
      usage.cost === null ? "no price for its models" : `$${usage.cost}`,
      ...(unpriced.length ? [`no price: ${unpriced.map((u) => u.model || "unnamed").join(", ")}`] : []),
    ].join(" · ");
    return { short: `${COMPACT.format(tokens)} tokens · ${cost}`, long };
  }

  function showUsage(node, usage) {
    const text = usageText(usage);
    node.hidden = !text;
    node.textContent = text ? text.short : "";
    node.title = text ? text.long : "";
    return node;
  }

  /** Reconnect delays: 0.5 s doubling to 30 s, each with +-20 % jitter; reset() once connected. */
  function backoff() {
    let delay = 500;
    return {
      next() {
        const wait = delay * (0.8 + Math.random() * 0.4);
        delay = Math.min(delay * 2, 30000);
        return wait;
      },
      reset() {
        delay = 500;
      },
    };
  }

  // ------------------------------------------------------------------ times

  /** A sortable key of an API time: "YYYY-MM-DDTHH:MM:SS.ffffff" in UTC (the API drops a zero
   * fraction, so its strings do not sort as they are). */
  function timeKey(iso) {
    const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/.exec(iso || "");
    if (match) return `${match[1]}.${(match[2] || "").padEnd(6, "0")}`;
    const ms = Date.parse(iso);
    return Number.isNaN(ms) ? "" : new Date(ms).toISOString().slice(0, -1).padEnd(26, "0");
  }

  /** The list's order (GET /api/conversations/): pinned first, then newest first. */
  function listOrder(a, b) {
    if (Boolean(a.pinned) !== Boolean(b.pinned)) return a.pinned ? -1 : 1;
    return newestFirst(a, b);
  }

  /** The API's order of conversations: saved_at descending, then id descending. */
  function newestFirst(a, b) {
    const ka = timeKey(a.saved_at);
    const kb = timeKey(b.saved_at);
    if (ka !== kb) return ka < kb ? 1 : -1;
    return a.id === b.id ? 0 : a.id < b.id ? 1 : -1;
  }

  // The viewer's locale and time zone (undefined: the browser's own).
  const SAME_DAY = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
  const OTHER_DAY = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const IN_FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

  /** Show an API time in `node` (a <time>): the time of day when it is today, else date and time;
   * the full date as its tooltip. */
  function showTime(node, iso) {
    const date = new Date(iso);
    node.hidden = !iso || Number.isNaN(date.getTime());
    if (node.hidden) {
      node.textContent = "";
      node.removeAttribute("datetime");
      return node;
    }
    node.dateTime = iso;
    const today = new Date().toDateString() === date.toDateString();
    node.textContent = (today ? SAME_DAY : OTHER_DAY).format(date);
    node.title = IN_FULL.format(date);
    return node;
  }

  // ------------------------------------------------------------------ HTTP

  function csrfToken() {
    const input = document.querySelector("[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.detail) || `HTTP ${status}`);
      this.status = status;
      this.code = body && body.code;
    }
  }

  /** fetch() an API route as the signed-in user; the parsed body, or ApiError. A lost session
   * sends the page to the login. */
  async function api(method, url, body) {
    const headers = { Accept: "application/json" };
    const init = { method, credentials: "same-origin", headers };
    if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    let answer = null;
    if (response.status !== 204) answer = await response.json().catch(() => null);
    const code = answer && answer.code;
    if (
      response.status === 401 ||
      (response.status === 403 && (code === "not_authenticated" || code === "authentication_failed"))
    ) {
      window.location.assign("/accounts/login/?next=/");
    }
    if (!response.ok) throw new ApiError(response.status, answer);
    return answer;
  }

  const getJSON = (url) => api("GET", url);

  function socketURL(path) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${window.location.host}${path}`;
  }

  /** Open a websocket for `owner` (the sidebar or a view) with the page's close rules: a final
   * close code (docs/websocket.md) ends it; any other close, unless the test hook holds the
   * connection down, reconnects after the owner's backoff. `on`: alive(), open(), frame(f),
   * final(code), drop(), reconnect(). */
  function openSocket(owner, path, on) {
    const socket = new WebSocket(socketURL(path));
    owner.socket = socket;
    socket.onopen = () => {
      if (owner.socket !== socket || !on.alive()) return;
      owner.retry.reset();
      on.open();
    };
    socket.onmessage = (event) => {
      if (owner.socket !== socket || !on.alive()) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        console.warn("ignored a frame that is not JSON", error);
        return;
      }
      on.frame(frame);
    };
    socket.onclose = (event) => {
      if (owner.socket !== socket || !on.alive()) return;
      owner.socket = null;
      if (event.code in FINAL_CLOSE) {
        on.final(event.code);
        return;
      }
      on.drop();
      if (held) return;
      owner.timer = setTimeout(() => {
        owner.timer = null;
        if (on.alive() && !held && !owner.socket) on.reconnect();
      }, owner.retry.next());
    };
    return socket;
  }

  function closeSocket(owner) {
    clearTimeout(owner.timer);
    owner.timer = null;
    const socket = owner.socket;
    owner.socket = null;
    if (socket) socket.close(1000);
  }

  function setConnection(state, text) {
    const node = $("connection");
    node.dataset.state = state;
    node.textContent = text;
    document.body.dataset.socket = state;
  }

  let noticeTimer = null;

  /** A short message at the bottom of the page (role=status), gone after a while or on Dismiss. */
  function notify(text) {
    const box = $("notice");
    box.querySelector(".notice-text").textContent = text;
    box.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => {
      box.hidden = true;
    }, 8000);
  }

  // ------------------------------------------------------------------ sidebar

  /** Keep the newer of two states of one summary (a page and a frame may cross); a state that
   * does not belong in the list as filtered (archived, tag) takes the conversation out of it. */
  function putSummary(items, summary) {
    const known = items.get(summary.id);
    if (known && timeKey(known.saved_at) > timeKey(summary.saved_at)) return;
    if (belongs(summary)) items.set(summary.id, summary);
    else items.delete(summary.id);
  }

  function belongs(summary) {
    if (Boolean(summary.archived) !== list.archived) return false;
    return !list.tag || (summary.tags || []).includes(list.tag);
  }

  /** The list's filter parameters (after "?limit=..."). */
  function listQuery() {
    let query = list.archived ? "&archived=1" : "";
    if (list.tag) query += `&tag=${encodeURIComponent(list.tag)}`;
    return query;
  }

  function listItem(item) {
    const li = el("li", "conversation-item");
    li.dataset.id = item.id;
    const open = button("conversation", null, () => {
      window.location.hash = item.id;
    });
    if (view && view.id === item.id) open.setAttribute("aria-current", "true");
    const meta = el("span", "meta");
    if (item.pinned) meta.append(el("span", "pin-mark", "Pinned"));
    meta.append(
      el("span", `badge status-${item.status}`, item.status),
      el("span", null, `${item.message_count} messages`),
      showTime(el("time"), item.saved_at),
      showUsage(el("span", "usage"), item.usage),
    );
    open.append(el("span", "title", titleOf(item)), meta);
    const actions = el("span", "actions");
    const named = (node, verb) => {
      node.setAttribute("aria-label", `${verb} “${titleOf(item)}”`);
      return node;
    };
    actions.append(
      named(button("small", item.pinned ? "Unpin" : "Pin", () => organise(item.id, { pinned: !item.pinned })), item.pinned ? "Unpin" : "Pin"),
      named(button("small", item.archived ? "Unarchive" : "Archive", () => organise(item.id, { archived: !item.archived })), item.archived ? "Unarchive" : "Archive"),
      named(button("small", "Tags", () => startTagging(item.id)), "Edit tags of"),
      named(button("small", "Rename", () => startRename(item.id)), "Rename"),
      named(button("small danger-text", "Delete", () => confirmDelete(item.id)), "Delete"),
    );
    li.append(open);
    if ((item.tags || []).length) {
      const tags = el("span", "tag-list");
      for (const tag of item.tags) {
        const chip = button("tag", `#${tag}`, () => filterByTag(tag));
        chip.setAttribute("aria-label", `Show conversations tagged ${tag}`);
        tags.append(chip);
      }
      li.append(tags);
    }
    li.append(actions);
    return li;
  }

  /** The tag editor of one sidebar item: a comma-separated field; Enter saves, Escape cancels. */
  function tagItem(item) {
    const li = el("li", "conversation-item tagging");
    li.dataset.id = item.id;
    const form = el("form", "rename");
    const input = el("input");
    input.name = "tags";
    input.value = (item.tags || []).join(", ");
    input.autocomplete = "off";
    input.setAttribute("aria-label", "Tags, separated by commas");
    const save = el("button", "primary small", "Save tags");
    save.type = "submit";
    const cancel = button("secondary small", "Cancel", () => stopTagging(item.id));
    const error = el("p", "form-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    form.append(input, save, cancel, error);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const tags = input.value.split(",").map((tag) => tag.trim()).filter(Boolean);
      organise(item.id, { tags }, error)
        .then((saved) => {
          if (saved) stopTagging(item.id);
        })
        .catch(console.error);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") stopTagging(item.id);
    });
    li.append(form);
    return li;
  }

  function renameItem(item) {
    const li = el("li", "conversation-item editing");
    li.dataset.id = item.id;
    const form = el("form", "rename");
    const input = el("input");
    input.name = "title";
    input.value = item.title;
    input.maxLength = 255;
    input.autocomplete = "off";
    input.setAttribute("aria-label", "New title");
    const save = el("button", "primary small", "Save");
    save.type = "submit";
    const cancel = button("secondary small", "Cancel", () => stopRename(item.id));
    const error = el("p", "form-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    form.append(input, save, cancel, error);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      saveTitle(item.id, input.value.trim(), form).catch(console.error);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") stopRename(item.id);
    });
    li.append(form);
    return li;
  }

  function renderList() {
    const box = $("conversations");
    const shown = new Map([...box.children].map((li) => [li.dataset.id, li]));
    const nodes = [...list.items.values()].sort(listOrder).map((item) => {
      const old = shown.get(item.id);
      if (list.tagging === item.id) return old && old.classList.contains("tagging") ? old : tagItem(item);
      if (list.editing !== item.id) return listItem(item);
      // The form being edited stays the same node, so its text and focus survive live updates.
      return old && old.classList.contains("editing") ? old : renameItem(item);
    });
    let at = box.firstElementChild;
    for (const node of nodes) {
      if (node === at) at = at.nextElementSibling;
      else box.insertBefore(node, at);
    }
    while (at) {
      const next = at.nextElementSibling;
      at.remove();
      at = next;
    }
    $("conversations-empty").hidden = nodes.length > 0;
  }

  /** Load the sidebar. `reset`: reload as many conversations as it shows, from the top, and
   * replace it (so what was deleted meanwhile goes); otherwise the next page. */
  async function loadList(reset) {
    if (!reset) {
      if (list.loadingMore || !list.cursor || list.changes) return;
      list.loadingMore = true;
      const generation = list.generation;
      try {
        const cursor = encodeURIComponent(list.cursor);
        const page = await getJSON(`/api/conversations/?limit=${PAGE}${listQuery()}&cursor=${cursor}`);
        if (generation !== list.generation) return; // a reload replaced the list meanwhile
        for (const item of page.results) putSummary(list.items, item);
        list.cursor = page.next_cursor;
        renderList();
      } finally {
        list.loadingMore = false;
      }
      return;
    }
    const generation = ++list.generation;
    const wanted = Math.max(PAGE, list.items.size);
    list.changes = [];
    try {
      const items = new Map();
      let cursor = "";
      let next = null;
      do {
        const page = await getJSON(`/api/conversations/?limit=${PAGE}${listQuery()}${cursor}`);
        if (generation !== list.generation) return;
        for (const item of page.results) putSummary(items, item);
        next = page.next_cursor;
        cursor = next ? `&cursor=${encodeURIComponent(next)}` : "";
      } while (next && items.size < wanted);
      for (const frame of list.changes) applyListFrame(items, frame);
      list.items = items;
      list.cursor = next;
      renderList();
    } finally {
      if (generation === list.generation) list.changes = null;
    }
  }

  function applyListFrame(items, frame) {
    // A subagent's child conversation shows under its Task card, not in the sidebar.
    if (frame.type === "conversation_saved" && frame.conversation.parent_id) return;
    if (frame.type === "conversation_saved") putSummary(items, frame.conversation);
    else if (frame.type === "conversation_deleted") items.delete(frame.conversation_id);
  }

  function onListFrame(frame) {
    if (list.changes) list.changes.push(frame);
    applyListFrame(list.items, frame);
    if (frame.type === "conversation_saved" && view && view.id === frame.conversation.id) {
      showHead(view, list.items.get(view.id));
    }
    if (frame.type === "conversation_deleted" && view && view.id === frame.conversation_id) {
      conversationGone(view, "This conversation was deleted.");
    }
    renderList();
  }

  function connectList() {
    if (held) return; // restoreConnection() connects
    openSocket(list, "/ws/conversations/", {
      alive: () => true,
      open() {
        // Back after a drop: reload, dropping what was deleted and adding what was saved meanwhile.
        if (list.opened) loadList(true).catch(console.error);
        list.opened = true;
      },
      frame: onListFrame,
      final: () => {},
      drop: () => {},
      reconnect: connectList,
    });
  }

  // ------------------------------------------------------------------ pin, archive, tags

  /** PATCH organising fields of a conversation (docs/api.md "Organising"); true once saved. */
  async function organise(id, fields, error) {
    try {
      const detail = await api("PATCH", `/api/conversations/${id}/`, fields);
      putSummary(list.items, detail);
      renderList();
      if (fields.archived !== undefined) notify(detail.archived ? `Archived “${titleOf(detail)}”.` : `“${titleOf(detail)}” is back in the list.`);
      return true;
    } catch (failure) {
      const text = failure instanceof ApiError ? failure.message : "The change could not be saved (no connection?).";
      if (error) {
        error.textContent = text;
        error.hidden = false;
      } else {
        notify(text);
      }
      return false;
    }
  }

  function startTagging(id) {
    list.tagging = id;
    renderList();
    const input = $("conversations").querySelector("li.tagging input");
    if (input) input.focus();
  }

  function stopTagging(id) {
    if (list.tagging !== id) return;
    list.tagging = null;
    renderList();
  }

  function filterByTag(tag) {
    list.tag = tag;
    $("tag-filter").hidden = !tag;
    $("tag-filter").querySelector(".tag").textContent = tag ? `#${tag}` : "";
    loadList(true).catch(console.error);
  }

  // ------------------------------------------------------------------ rename and delete

  function startRename(id) {
    list.editing = id;
    renderList();
    const input = $("conversations").querySelector("li.editing input");
    if (input) {
      input.focus();
      input.select();
    }
  }

  function stopRename(id) {
    if (list.editing !== id) return;
    list.editing = null;
    renderList();
    const again = $("conversations").querySelector(`li[data-id="${CSS.escape(id)}"] .actions button`);
    if (again) again.focus();
  }

  async function saveTitle(id, title, form) {
    const error = form.querySelector(".form-error");
    const controls = form.querySelectorAll("input, button");
    controls.forEach((node) => {
      node.disabled = true;
    });
    try {
      const detail = await api("PATCH", `/api/conversations/${id}/`, { title });
      putSummary(list.items, detail);
      if (view && view.id === id) showHead(view, detail);
      stopRename(id);
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 404) {
        list.items.delete(id);
        list.editing = null;
        renderList();
        notify("That conversation no longer exists.");
        return;
      }
      error.textContent = failure instanceof ApiError ? failure.message : "The title could not be saved (no connection?).";
      error.hidden = false;
    } finally {
      controls.forEach((node) => {
        node.disabled = false;
      });
    }
  }

  function confirmDelete(id) {
    const item = list.items.get(id);
    if (!item) return;
    const dialog = $("confirm-delete");
    dialog.dataset.id = id;
    dialog.querySelector(".confirm-name").textContent = `“${titleOf(item)}”`;
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector("button[value=cancel]").focus();
  }

  async function deleteConversation(id) {
    const title = titleOf(list.items.get(id));
    try {
      await api("DELETE", `/api/conversations/${id}/`);
    } catch (failure) {
      // 404: someone else deleted it first, which is what was asked.
      if (!(failure instanceof ApiError && failure.status === 404)) {
        notify(failure instanceof ApiError ? failure.message : "The conversation could not be deleted (no connection?).");
        return;
      }
    }
    list.items.delete(id);
    if (view && view.id === id) conversationGone(view, null);
    renderList();
    notify(`Deleted “${title}”.`);
  }

  // ------------------------------------------------------------------ cards

  const ROLE = { user: "You", assistant: "Assistant", tool: "Tool", system: "System" };

  /** An image block: inline (data:) and same-origin images show at once; a remote one is a
   * placeholder whose button creates the <img>, so its host learns nothing until the reader asks. */
  function image(c) {
    if (typeof c.data === "string" && typeof c.mime_type === "string") {
      if (!/^image\/[\w.+-]+$/.test(c.mime_type)) return el("pre", null, pretty(c));
      return picture(`data:${c.mime_type};base64,${c.data}`, "Image");
    }
    if (typeof c.url !== "string" || !c.url) return el("pre", null, pretty(c));
    let url = null;
    try {
      url = new URL(c.url, window.location.href);
    } catch (error) {
      return el("p", "muted", `An image at an address that cannot be read: ${pretty(c.url)}`);
    }
    if (url.origin === window.location.origin) return picture(url.href, "Image");
    const box = el("figure", "remote-image");
    const address = el("p", "address", url.href);
    if (url.protocol !== "https:") {
      box.append(el("p", "muted", "An image on another site, not loaded: only https images can be."), address);
      return box;
    }
    const load = button("secondary small", `Load image from ${url.host}`, () => {
      box.replaceChildren(picture(url.href, `Image from ${url.host}`), el("figcaption", "address", url.href));
    });
    box.append(el("p", "muted", `An image on ${url.host}. It is not loaded until you ask, so that site does not learn you read this.`), address, load);
    return box;
  }

  function picture(src, alt) {
    const img = el("img", "image");
    img.alt = alt;
    img.referrerPolicy = "no-referrer";
    img.addEventListener("error", () => {
      img.replaceWith(el("p", "muted", "The image could not be loaded."));
    });
    img.src = src;
    return img;
  }

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
      case "image":
        return [image(c)];
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
    head.append(cardTools(row), showTime(el("time", "when"), row.created_at));
    li.append(head, ...body(row));
    if (row.content_type === "tool_call") li.append(...subagents(row));
    return li;
  }

  /** Fork from this card; thumbs on assistant cards (pressed: the reader's own feedback). */
  function cardTools(row) {
    const tools = el("span", "card-tools");
    if (row.message_type === "assistant") {
      const rating = row.feedback ? row.feedback.rating : 0;
      for (const [value, glyph, label] of [[1, "+1", "Good answer"], [-1, "−1", "Bad answer"]]) {
        const thumb = el("button", null, glyph);
        thumb.type = "button";
        thumb.dataset.action = "rate";
        thumb.dataset.rating = String(value);
        thumb.setAttribute("aria-label", label);
        thumb.setAttribute("aria-pressed", String(rating === value));
        tools.append(thumb);
      }
    }
    const fork = el("button", null, "Fork");
    fork.type = "button";
    fork.dataset.action = "fork";
    fork.setAttribute("aria-label", "Fork from here");
    tools.append(fork);
    return tools;
  }

  /** A card's tool was clicked (one listener for every card). */
  function onCardTool(event) {
    const tool = event.target.closest("button[data-action]");
    const li = tool && tool.closest("li.card");
    const current = view;
    if (!li || !current) return;
    const row = current.rows.get(li.dataset.id);
    if (!row) return;
    if (tool.dataset.action === "fork") forkAt(current, row).catch(console.error);
    if (tool.dataset.action === "rate") rate(current, row, Number(tool.dataset.rating)).catch(console.error);
  }

  /** PUT (or, for the rating already given, DELETE) the reader's feedback on a row. */
  async function rate(current, row, rating) {
    const url = `${current.api}display-messages/${row.id}/feedback/`;
    const same = row.feedback && row.feedback.rating === rating;
    try {
      const fresh = same ? await api("DELETE", url) : await api("PUT", url, { rating });
      upsertAll(current, [fresh]);
    } catch (failure) {
      notify(failure instanceof ApiError ? failure.message : "The feedback could not be saved (no connection?).");
    }
  }

  /** Fork the conversation at a card (POST fork/) and open the new conversation. */
  async function forkAt(current, row) {
    try {
      const summary = await api("POST", `${current.api}fork/`, { at_seq: row.seq });
      putSummary(list.items, summary);
      renderList();
      window.location.hash = summary.id;
      notify(`Forked “${titleOf(summary)}” at message ${row.seq}.`);
    } catch (failure) {
      notify(failure instanceof ApiError ? failure.message : "The conversation could not be forked (no connection?).");
    }
  }

  // ------------------------------------------------------------------ share links

  function openShareDialog() {
    if (!view) return;
    const dialog = $("share-dialog");
    dialog.dataset.id = view.id;
    dialog.querySelector(".share-result").hidden = true;
    dialog.querySelector(".share-new .form-error").hidden = true;
    dialog.showModal();
    loadShares(view.id).catch(console.error);
  }

  function describeShare(share) {
    const parts = [share.mode === "live" ? "live" : "snapshot"];
    if (share.require_login) parts.push("signed-in readers only");
    if (share.revoked_at) parts.push("revoked");
    else if (!share.active) parts.push("expired");
    else if (share.expires_at) parts.push(`until ${OTHER_DAY.format(new Date(share.expires_at))}`);
    return parts.join(" · ");
  }

  async function loadShares(id) {
    const box = $("share-dialog").querySelector(".share-links");
    const page = await getJSON(`/api/conversations/${id}/shares/?limit=100`);
    if ($("share-dialog").dataset.id !== id) return;
    box.replaceChildren(
      ...page.results.map((share) => {
        const li = el("li");
        li.dataset.id = share.id;
        li.append(el("span", share.active ? null : "muted", describeShare(share)));
        li.append(showTime(el("time", "muted"), share.created_at));
        if (!share.revoked_at) {
          const revoke = button("small danger-text secondary", "Revoke", () => revokeShare(id, share.id).catch(console.error));
          revoke.setAttribute("aria-label", `Revoke the ${share.mode} link`);
          li.append(revoke);
        }
        return li;
      }),
    );
    if (!page.results.length) box.append(el("li", "muted", "No links yet."));
  }

  async function createShare(event) {
    event.preventDefault();
    const dialog = $("share-dialog");
    const form = event.currentTarget;
    const id = dialog.dataset.id;
    const error = form.querySelector(".form-error");
    error.hidden = true;
    const expires = form.elements.expires_in.value;
    try {
      const share = await api("POST", `/api/conversations/${id}/shares/`, {
        mode: form.elements.mode.value,
        expires_in: expires ? Number(expires) : null,
        require_login: form.elements.require_login.checked,
      });
      const result = dialog.querySelector(".share-result");
      result.querySelector("input").value = share.url;
      result.hidden = false;
      result.querySelector("input").select();
      await loadShares(id);
    } catch (failure) {
      error.textContent = failure instanceof ApiError ? failure.message : "The link could not be made (no connection?).";
      error.hidden = false;
    }
  }

  async function copyShare() {
    const input = $("share-dialog").querySelector(".share-result input");
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      notify("Link copied.");
    } catch (failure) {
      notify("Select the link and copy it (the browser did not allow copying).");
    }
  }

  async function revokeShare(id, shareId) {
    try {
      await api("DELETE", `/api/conversations/${id}/shares/${shareId}/`);
      notify("Link revoked: it no longer opens anything.");
    } catch (failure) {
      notify(failure instanceof ApiError ? failure.message : "The link could not be revoked (no connection?).");
    }
    await loadShares(id);
  }

  // ------------------------------------------------------------------ subagents

  /** The child conversations a tool call launched (docs/demo.md "Subagents"): each with its live
   * status and step count, and a button that opens its transcript nested in the card. */
  function subagents(row) {
    const current = view;
    if (!current) return [];
    const callId = row.tool_call_id || (row.content && row.content.call_id);
    const boxes = [];
    for (const child of current.children.values()) {
      if (child.parent_call_id !== callId) continue;
      const box = el("section", "subagent");
      box.dataset.childId = child.id;
      const head = el("div", "subagent-head");
      const badge = el("span", `badge status-${child.status}`, child.status);
      badge.dataset.role = "subagent-status";
      const steps = el("span", "muted", `${child.steps} ${child.steps === 1 ? "step" : "steps"}`);
      steps.dataset.role = "subagent-steps";
      const opened = current.openChildren.has(child.id);
      const toggle = button("secondary small", opened ? "Hide subagent" : "Open subagent", () =>
        toggleChild(current, child.id).catch(console.error),
      );
      toggle.setAttribute("aria-expanded", String(opened));
      head.append(el("span", "subagent-title", `Subagent · ${titleOf(child)}`), badge, steps, toggle);
      box.append(head);
      if (opened) {
        const rows = [...(current.childRows.get(child.id) || new Map()).values()];
        const nested = el("ol", "cards nested");
        nested.setAttribute("aria-label", `Transcript of ${titleOf(child)}`);
        for (const childRow of rows.sort((a, b) => a.seq - b.seq)) nested.append(card(childRow, null));
        box.append(nested);
      }
      boxes.push(box);
    }
    return boxes;
  }

  /** Re-render the tool-call cards that launched `childId` (its status, steps or rows moved). */
  function showChild(current, childId) {
    if (view !== current) return;
    const child = current.children.get(childId);
    for (const row of current.rows.values()) {
      const callId = row.tool_call_id || (row.content && row.content.call_id);
      if (row.content_type === "tool_call" && child && callId === child.parent_call_id) {
        place(current, row);
      }
    }
  }

  /** The rows of a child's transcript changed after `since` (all of them the first time). */
  async function loadChildRows(current, childId) {
    const rows = current.childRows.get(childId) || new Map();
    const since = current.childSeq.get(childId) || 0;
    let cursor = "";
    for (;;) {
      const page = await getJSON(
        `/api/conversations/${childId}/display-messages/?since=${since}&limit=100${cursor}`,
      );
      if (view !== current) return;
      for (const row of page.results) {
        rows.set(row.id, row);
        current.childSeq.set(childId, Math.max(current.childSeq.get(childId) || 0, row.event_seq));
      }
      if (!page.next_cursor) break;
      cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
    }
    current.childRows.set(childId, rows);
  }

  async function toggleChild(current, childId) {
    if (current.openChildren.has(childId)) {
      current.openChildren.delete(childId);
    } else {
      current.openChildren.add(childId);
      await loadChildRows(current, childId);
    }
    showChild(current, childId);
  }

  /** `child_updated` / `child_deleted` on the open conversation's stream. */
  function onChild(current, frame) {
    if (frame.type === "child_deleted") {
      const gone = current.children.get(frame.child_id);
      current.children.delete(frame.child_id);
      current.openChildren.delete(frame.child_id);
      if (gone) {
        for (const row of current.rows.values()) {
          if (row.content_type === "tool_call" && row.content.call_id === gone.parent_call_id) place(current, row);
        }
      }
      return;
    }
    const child = frame.child;
    const known = current.children.get(child.id);
    if (known && timeKey(known.saved_at) > timeKey(child.saved_at)) return;
    current.children.set(child.id, child);
    if (current.openChildren.has(child.id)) {
      loadChildRows(current, child.id)
        .then(() => showChild(current, child.id))
        .catch(console.error);
    }
    showChild(current, child.id);
  }

  /** The children of the open conversation, for its Task cards (GET ?parent=). */
  async function loadChildren(current) {
    let cursor = "";
    for (;;) {
      const page = await getJSON(`/api/conversations/?parent=${current.id}&limit=100${cursor}`);
      if (view !== current) return;
      for (const child of page.results) {
        if (!current.children.has(child.id)) current.children.set(child.id, child);
      }
      if (!page.next_cursor) break;
      cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
    }
    for (const child of current.children.values()) showChild(current, child.id);
  }

  function nearBottom() {
    const box = $("transcript");
    return box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  }

  function scrollToBottom() {
    const box = $("transcript");
    box.scrollTop = box.scrollHeight;
  }

  function place(current, row) {
    if (current.visibleFrom !== null && row.seq < current.visibleFrom) return;
    const cards = $("cards");
    const old = cards.querySelector(`li.card[data-id="${CSS.escape(row.id)}"]`);
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

  /** Upsert rows into `current` (newest event_seq wins) and show them if it is still open. */
  function upsertAll(current, rows) {
    if (view !== current) return;
    const stick = nearBottom();
    for (const row of rows) {
      const known = current.rows.get(row.id);
      if (known && known.event_seq > row.event_seq) continue; // an older state than we show
      current.rows.set(row.id, row);
      place(current, row);
    }
    if (stick) scrollToBottom();
  }

  function showHead(current, summary) {
    if (view !== current || !summary) return;
    $("share-open").hidden = false;
    $("conversation-title").textContent = titleOf(summary);
    showUsage($("conversation-usage"), summary.usage);
    // With its subagents' tokens (the detail row's usage_with_children): kept until a detail
    // row says otherwise, since summary frames do not carry it.
    const family = $("conversation-usage-children");
    if (!summary.child_count) showUsage(family, null);
    else if (summary.usage_with_children) {
      showUsage(family, summary.usage_with_children);
      if (!family.hidden) family.textContent = `with subagents: ${family.textContent}`;
    }
    showTime($("conversation-started"), summary.created_at);
    if (!$("conversation-started").hidden) {
      $("conversation-started").textContent = `started ${$("conversation-started").textContent}`;
    }
  }

  function optionLabel(option) {
    if (typeof option === "string") return option;
    if (option && typeof option === "object") {
      for (const key of ["label", "text", "value"]) {
        if (typeof option[key] === "string") return option[key];
      }
    }
    return pretty(option);
  }

  function optionAnswer(option) {
    if (option && typeof option === "object" && "value" in option) {
      return typeof option.value === "string" ? option.value : pretty(option.value);
    }
    return optionLabel(option);
  }

  /** Show the conversation's status and pending ask as of `eventSeq`. */
  function showStatus(current, status, pending, eventSeq) {
    if (view !== current) return;
    current.statusSeq = Math.max(current.statusSeq, eventSeq || 0);
    const stick = nearBottom();
    const badge = $("conversation-status");
    badge.hidden = !status;
    badge.className = `badge status-${status}`;
    badge.textContent = status || "";
    const box = $("pending");
    const wasHidden = box.hidden;
    box.hidden = !pending;
    if (!pending) return;
    if (wasHidden) box.querySelector(".form-error").hidden = true;
    box.querySelector(".question").textContent = pending.question || "The agent is waiting for you.";
    const options = (pending.pauseData && pending.pauseData.options) || [];
    const buttons = (Array.isArray(options) ? options : []).map((option) =>
      button("option", optionLabel(option), () => sendAnswer(current, optionAnswer(option)).catch(console.error)),
    );
    box.querySelector(".options").replaceChildren(...buttons);
    box.querySelector(".options").hidden = buttons.length === 0;
    box.querySelector("label").textContent = buttons.length ? "Or write your own answer" : "Your answer";
    if (stick) scrollToBottom();
  }

  function setAnswering(busy) {
    $("pending").querySelectorAll("button, textarea").forEach((node) => {
      node.disabled = busy;
    });
    $("pending").setAttribute("aria-busy", String(busy));
  }

  /** Answer the pending ask (POST pending/answer/, docs/api.md): the saved user message shows at
   * once; 409 means someone else answered it or it was withdrawn, so say so and reload the ask. */
  async function sendAnswer(current, text) {
    if (view !== current || !text.trim()) return;
    const error = $("pending").querySelector(".form-error");
    error.hidden = true;
    setAnswering(true);
    try {
      const reply = await api("POST", `${current.api}pending/answer/`, {
        answer: text,
        event_seq: current.seenSeq,
      });
      if (view !== current) return;
      $("answer-text").value = "";
      upsertAll(current, reply.messages || []);
      putSummary(list.items, reply.conversation);
      renderList();
      showHead(current, reply.conversation);
      const seq = Math.max(0, ...(reply.messages || []).map((row) => row.event_seq));
      // A newer status may have come over the socket already; it wins.
      if (seq >= current.statusSeq) showStatus(current, reply.conversation.status, null, seq);
    } catch (failure) {
      if (view !== current) return;
      if (failure instanceof ApiError && failure.status === 409) {
        notify("That question was already answered or withdrawn; here is the conversation as it is now.");
        await refreshStatus(current);
      } else if (failure instanceof ApiError && failure.code === "not_found") {
        conversationGone(current, "This conversation no longer exists.");
      } else {
        error.textContent =
          failure instanceof ApiError ? failure.message : "The answer could not be sent (no connection?).";
        error.hidden = false;
      }
    } finally {
      setAnswering(false);
    }
  }

  /** Reload status and pending ask over REST; a status frame that arrives meanwhile wins. */
  async function refreshStatus(current) {
    const before = current.statusSeq;
    const [detail, pending] = await Promise.all([getJSON(current.api), getJSON(`${current.api}pending/`)]);
    if (view !== current || current.statusSeq !== before) return;
    showHead(current, detail);
    showStatus(current, detail.status, pending.pending, before);
  }

  function stream(current, frame) {
    if (view !== current) return;
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

  function newView(id) {
    return {
      id,
      api: `/api/conversations/${id}/`,
      rows: new Map(),
      cursor: null, // of older display rows
      visibleFrom: null, // the lowest seq shown (null: all)
      lastEventSeq: 0, // every change up to this event_seq is applied: the next ?since=
      seenSeq: 0, // the newest event_seq any frame showed (sent with an answer)
      statusSeq: 0, // the event_seq of the status shown
      resync: null, // the resync walk in progress
      socket: null,
      timer: null,
      retry: backoff(),
      loadingOlder: false,
      children: new Map(), // child conversations by id (their summaries)
      openChildren: new Set(), // children whose transcript is open in their Task card
      childRows: new Map(), // child id -> its display rows by id
      childSeq: new Map(), // child id -> the newest event_seq of its rows loaded
    };
  }

  /** Frames of one connection. `link.applied`: the newest event_seq applied from it; it moves
   * `lastEventSeq` on only while no resync walk is filling the rows below it. */
  function markEvent(current, link, seq) {
    if (typeof seq !== "number") return;
    current.seenSeq = Math.max(current.seenSeq, seq);
    link.applied = Math.max(link.applied, seq);
    if (!current.resync) current.lastEventSeq = Math.max(current.lastEventSeq, link.applied);
  }

  /** A resync (more changed than a replay carries): page display-messages/?since= from the last
   * event_seq fully applied, for this view only; then move lastEventSeq on to the resync's target
   * and what the connection applied meanwhile. A failed walk forces a reconnect from where the
   * view stands; a walk is dropped when the view closes or a newer resync replaces it. */
  function startResync(current, link, target) {
    if (current.resync) current.resync.cancelled = true;
    const walk = { cancelled: false };
    current.resync = walk;
    const since = current.lastEventSeq;
    const done = (async () => {
      let cursor = "";
      for (;;) {
        if (resyncGate) await resyncGate.promise;
        if (walk.cancelled || view !== current) return;
        const page = await getJSON(`${current.api}display-messages/?since=${since}&limit=100${cursor}`);
        if (walk.cancelled || view !== current) return;
        upsertAll(current, page.results);
        if (!page.next_cursor) break;
        cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
      }
      if (current.resync === walk) current.resync = null;
      current.lastEventSeq = Math.max(current.lastEventSeq, target, link.applied);
    })().catch((failure) => {
      if (walk.cancelled || view !== current) return;
      console.warn("the resync walk failed; reconnecting", failure);
      if (current.resync === walk) current.resync = null;
      if (current.socket === link.socket) {
        closeSocket(current);
        setConnection("reconnecting", "Reconnecting…");
        current.timer = setTimeout(() => view === current && !held && connectConversation(current), current.retry.next());
      }
    });
    paging.add(done);
    done.finally(() => paging.delete(done));
  }

  function onFrame(current, link, frame) {
    switch (frame.type) {
      case "snapshot":
        current.seenSeq = Math.max(current.seenSeq, frame.event_seq || 0);
        showHead(current, frame.conversation);
        showStatus(current, frame.status, frame.pending, frame.event_seq);
        return; // the replay that follows may carry older event_seqs
      case "display_message_saved":
      case "display_message_updated":
        if (view === current && frame.message.message_type === "assistant" && frame.message.content_type === "text") {
          $("streams").replaceChildren(); // the final text replaces what was streamed
        }
        upsertAll(current, [frame.message]);
        break;
      case "tool_execution_update":
        break; // the tool_call row arrives as display_message_updated in the same event
      case "status_changed":
        showStatus(current, frame.status, frame.pending, frame.event_seq);
        break;
      case "conversation_updated":
        showHead(current, frame.conversation);
        break;
      case "child_updated":
      case "child_deleted":
        if (view === current) onChild(current, frame);
        break;
      case "display_message_delta":
        stream(current, frame);
        return;
      case "resync":
        startResync(current, link, frame.event_seq);
        return;
      case "conversation_deleted":
        conversationGone(current, "This conversation was deleted.");
        return;
      default:
        return;
    }
    markEvent(current, link, frame.event_seq);
  }

  function connectConversation(current) {
    if (held) {
      setConnection("offline", "Offline"); // restoreConnection() connects
      return;
    }
    const since = current.lastEventSeq;
    const link = { since, applied: since, socket: null };
    link.socket = openSocket(current, `/ws/conversations/${current.id}/?since=${since}`, {
      alive: () => view === current,
      open: () => setConnection("live", "Live"),
      frame: (frame) => onFrame(current, link, frame),
      final: (code) => setConnection("closed", FINAL_CLOSE[code]),
      drop() {
        $("streams").replaceChildren(); // the saved text will come through the replay
        if (held) setConnection("offline", "Offline");
        else setConnection("reconnecting", "Reconnecting…");
      },
      reconnect: () => connectConversation(current),
    });
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
      for (const row of current.rows.values()) place(current, row);
      box.scrollTop += box.scrollHeight - before; // keep what the reader looked at in place
    } finally {
      current.loadingOlder = false;
      if (view === current) $("older").hidden = true;
    }
    fillViewport();
  }

  function fillViewport() {
    const box = $("transcript");
    if (view && view.cursor && box.scrollHeight <= box.clientHeight + 40) {
      loadOlder().catch(console.error);
    }
  }

  /** Close the open conversation (its socket, reconnect timer and resync walk) and empty the pane. */
  function leaveView() {
    const old = view;
    view = null;
    if (old) {
      if (old.resync) old.resync.cancelled = true;
      closeSocket(old);
    }
    $("conversation-title").textContent = "Pick a conversation";
    showUsage($("conversation-usage"), null);
    showUsage($("conversation-usage-children"), null);
    $("share-open").hidden = true;
    showTime($("conversation-started"), null);
    $("cards").replaceChildren();
    $("streams").replaceChildren();
    $("older").hidden = true;
    $("conversation-status").hidden = true;
    $("pending").hidden = true;
    const live = list.socket && list.socket.readyState === WebSocket.OPEN;
    setConnection(live ? "live" : "connecting", live ? "Live" : "Connecting…");
  }

  /** The open conversation was deleted (here or elsewhere): leave it and drop it from the URL. */
  function conversationGone(current, message) {
    if (view !== current) return;
    list.items.delete(current.id);
    leaveView();
    renderList();
    if (window.location.hash) {
      window.history.replaceState(null, "", window.location.pathname + window.location.search);
    }
    if (message) notify(message);
  }

  async function openConversation(id) {
    leaveView();
    const current = newView(id);
    view = current;
    renderList();
    showHead(current, list.items.get(id) || { title: "…" });
    setConnection("connecting", "Connecting…");
    const page = await getJSON(`${current.api}display-messages/?limit=${PAGE}`);
    if (view !== current) return;
    current.cursor = page.next_cursor;
    const seqs = page.results.map((row) => row.seq);
    current.visibleFrom = current.cursor && seqs.length ? Math.min(...seqs) : null;
    for (const row of page.results) {
      current.lastEventSeq = Math.max(current.lastEventSeq, row.event_seq);
    }
    upsertAll(current, page.results.slice().reverse());
    scrollToBottom();
    connectConversation(current);
    fillViewport();
    await loadChildren(current);
    await showHit(current);
  }

  function route() {
    const id = window.location.hash.slice(1);
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
      if (!view || view.id !== id) {
        openConversation(id).catch((error) => {
          console.warn(error);
          if (!view || view.id !== id) return;
          leaveView();
          $("conversation-title").textContent = "This conversation cannot be shown";
          setConnection("closed", "Not loaded");
        });
      }
    } else if (view) {
      leaveView();
      renderList();
    }
  }

  // ------------------------------------------------------------------ search

  // The search box over the sidebar: GET /api/search/ (docs/search.md); a hit opens its
  // conversation and scrolls to its card, loading older pages until the card is there.
  const finder = { query: "", cursor: null, generation: 0, timer: null, pending: null };
  let jumpTarget = null; // {id, seq}: the hit to show once its conversation is open

  /** Text with its highlights ([start, end) code point offsets) as <mark>s; text nodes only. */
  function highlighted(text, highlights) {
    const chars = Array.from(text || "");
    const nodes = [];
    let at = 0;
    for (const [start, end] of highlights || []) {
      if (start < at || end <= start) continue;
      if (start > at) nodes.push(document.createTextNode(chars.slice(at, start).join("")));
      nodes.push(el("mark", null, chars.slice(start, end).join("")));
      at = end;
    }
    if (at < chars.length) nodes.push(document.createTextNode(chars.slice(at).join("")));
    return nodes;
  }

  function hitItem(hit) {
    const li = el("li");
    li.dataset.conversation = hit.conversation_id;
    li.dataset.seq = String(hit.seq);
    const open = button("hit-link", null, () => jump(hit.conversation_id, hit.seq));
    const snippet = el("span", "snippet");
    snippet.append(...highlighted(hit.snippet, hit.highlights));
    const where = `${ROLE[hit.role] || hit.role} · ${hit.content_type.replace("_", " ")}`;
    open.append(el("span", "title", hit.conversation_title || UNTITLED), snippet, el("span", "where", where));
    li.append(open);
    return li;
  }

  function searching(on) {
    $("search-results").hidden = !on;
    $("conversations").parentElement.classList.toggle("searching", on);
  }

  /** Search for the box's text (a new search), or `more`: the next page of the current one. */
  async function runSearch(more) {
    clearTimeout(finder.timer);
    if (!more) {
      const query = $("search-text").value.trim();
      if (!query) {
        clearSearch();
        return;
      }
      finder.generation += 1;
      finder.query = query;
      finder.cursor = null;
      $("hits").replaceChildren();
    }
    const generation = finder.generation;
    searching(true);
    $("search-more").hidden = true;
    $("search-status").textContent = "Searching…";
    let url = `/api/search/?q=${encodeURIComponent(finder.query)}&limit=20`;
    if (more && finder.cursor) url += `&cursor=${encodeURIComponent(finder.cursor)}`;
    try {
      const page = await getJSON(url);
      if (generation !== finder.generation) return;
      $("hits").append(...page.results.map(hitItem));
      finder.cursor = page.next_cursor;
      $("search-more").hidden = !finder.cursor;
      const count = $("hits").children.length;
      const noun = count === 1 ? "message" : "messages";
      $("search-status").textContent = count ? `${count}${finder.cursor ? "+" : ""} ${noun}` : "Nothing found.";
    } catch (failure) {
      if (generation !== finder.generation) return;
      $("search-status").textContent =
        failure instanceof ApiError ? failure.message : "The search failed (no connection?).";
    }
  }

  function search(more) {
    const done = runSearch(more).catch(console.error);
    finder.pending = done;
    done.finally(() => {
      if (finder.pending === done) finder.pending = null;
    });
    return done;
  }

  function clearSearch() {
    clearTimeout(finder.timer);
    finder.generation += 1;
    finder.query = "";
    finder.cursor = null;
    $("hits").replaceChildren();
    searching(false);
  }

  /** Open a hit: its conversation (through the URL, as a click in the list does), then its card. */
  function jump(id, seq) {
    jumpTarget = { id, seq };
    if (view && view.id === id) showHit(view).catch(console.error);
    else window.location.hash = id;
  }

  async function showHit(current) {
    const target = jumpTarget;
    if (!target || target.id !== current.id) return;
    jumpTarget = null;
    for (let pages = 0; view === current && pages < 1000; ) {
      const node = $("cards").querySelector(`li.card[data-seq="${target.seq}"]`);
      if (node) {
        node.scrollIntoView({ block: "center" });
        node.classList.add("hit");
        setTimeout(() => node.classList.remove("hit"), 4000);
        return;
      }
      if (!current.cursor) break;
      if (current.loadingOlder) {
        await new Promise((resolve) => setTimeout(resolve, 50)); // a page is on its way
        continue;
      }
      pages += 1;
      await loadOlder();
    }
    if (view === current) notify("That message is not in this conversation any more.");
  }

  // ------------------------------------------------------------------ run the demo agent

  async function runAgent(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const submit = form.querySelector("button");
    submit.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) window.location.hash = answer.conversation_id;
      else notify(answer.detail || "The demo agent could not start.");
    } catch (error) {
      notify("The demo agent could not start (no connection?).");
    } finally {
      submit.disabled = false;
    }
  }

  // ------------------------------------------------------------------ start

  // Test hook (the browser test; also handy by hand): drop the sockets, optionally holding them
  // down, then restore them; the transcript catches up through ?since=. holdResync() makes resync
  // walks wait before their next page until releaseResync(); resyncing() counts the walks in
  // flight and settled() resolves once none is.
  window.murmurDemo = {
    dropConnection(hold) {
      held = Boolean(hold);
      if (list.socket) list.socket.close(1000);
      if (view && view.socket) view.socket.close(1000);
    },
    restoreConnection() {
      held = false;
      clearTimeout(list.timer);
      if (!list.socket) connectList();
      if (view && !view.socket) {
        clearTimeout(view.timer);
        connectConversation(view);
      }
    },
    lastEventSeq: () => (view ? view.lastEventSeq : null),
    holdResync() {
      if (resyncGate) return;
      let release = null;
      const promise = new Promise((resolve) => {
        release = resolve;
      });
      resyncGate = { promise, release };
    },
    releaseResync() {
      const gate = resyncGate;
      resyncGate = null;
      if (gate) gate.release();
    },
    resyncing: () => paging.size,
    children: () => (view ? [...view.children.values()] : []),
    searched: () => finder.pending || Promise.resolve(),
    settled: () => Promise.allSettled([...paging]).then(() => undefined),
  };

  $("run-agent").addEventListener("submit", runAgent);
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    search(false);
  });
  $("search-text").addEventListener("input", () => {
    clearTimeout(finder.timer);
    finder.timer = setTimeout(() => search(false), 300);
  });
  $("search-text").addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      $("search-text").value = "";
      clearSearch();
    }
  });
  $("search-more").addEventListener("click", () => search(true));
  $("answer").addEventListener("submit", (event) => {
    event.preventDefault();
    if (view) sendAnswer(view, $("answer-text").value).catch(console.error);
  });
  $("answer-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("answer").requestSubmit();
  });
  $("confirm-delete").addEventListener("close", () => {
    const dialog = $("confirm-delete");
    if (dialog.returnValue === "delete") deleteConversation(dialog.dataset.id).catch(console.error);
  });
  $("notice").querySelector("button").addEventListener("click", () => {
    $("notice").hidden = true;
  });
  $("transcript").addEventListener("scroll", () => {
    if ($("transcript").scrollTop < 80) loadOlder().catch(console.error);
  });
  $("conversations").parentElement.addEventListener("scroll", (event) => {
    const box = event.currentTarget;
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 80) loadList(false).catch(console.error);
  });
  window.addEventListener("hashchange", route);
  $("cards").addEventListener("click", onCardTool);
  $("share-open").addEventListener("click", openShareDialog);
  $("share-dialog").querySelector(".share-new").addEventListener("submit", (event) => {
    createShare(event).catch(console.error);
  });
  $("share-dialog").querySelector(".share-copy").addEventListener("click", () => {
    copyShare().catch(console.error);
  });
  $("show-archived").addEventListener("click", () => {
    list.archived = !list.archived;
    $("show-archived").setAttribute("aria-pressed", String(list.archived));
    $("show-archived").textContent = list.archived ? "Show the list" : "Show archived";
    loadList(true).catch(console.error);
  });
  $("tag-filter").querySelector("button").addEventListener("click", () => filterByTag(null));

  connectList();
  loadList(true)
    .then(() => {
      if (!window.location.hash && list.items.size) {
        const newest = [...list.items.values()].sort(newestFirst)[0];
        window.location.hash = newest.id; // fires hashchange -> route()
      } else {
        route();
      }
    })
    .catch(console.error);
})();

/* The read-only page of a share link (docs/demo.md): GET /api/shared/<token>/, pages oldest first.
 * It shows what the API answers and nothing else; all text goes in through textContent and no
 * image is ever loaded (a shared view shows an image's address only). */
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const token = decodeURIComponent(window.location.pathname.split("/").filter(Boolean).pop() || "");
  const base = `/api/shared/${encodeURIComponent(token)}/`;
  const ROLE = { user: "You", assistant: "Assistant", tool: "Tool", system: "System" };
  let cursor = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function details(summary, text) {
    const box = el("details");
    box.append(el("summary", null, summary), el("pre", null, text));
    return box;
  }

  function body(row) {
    const c = row.content || {};
    const meta = row.metadata || {};
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
        if (meta.display_text) parts.push(el("p", "display-text", meta.display_text));
        if (c.private) parts.push(el("p", "muted", "Arguments are private."));
        else parts.push(details("Arguments", pretty(c.arguments)));
        if (meta.result !== undefined && meta.result !== null) parts.push(details("Result", pretty(meta.result)));
        if (meta.error) parts.push(details("Error", pretty(meta.error)));
        return parts;
      }
      case "tool_result":
        return [details("Output", pretty(c.content))];
      case "image":
        return [el("p", "muted", c.url ? `An image: ${c.url}` : "An image (not shown on shared pages).")];
      default:
        return [details(c.format || row.content_type, pretty(c.data !== undefined ? c.data : c))];
    }
  }

  function card(row) {
    const li = el("li", `card ${row.message_type} ${row.content_type.replace("_", "-")}`);
    li.dataset.seq = String(row.seq);
    const head = el("div", "card-head");
    const c = row.content || {};
    let who = ROLE[row.message_type] || row.message_type;
    if (row.content_type === "tool_call") who = `Tool call · ${c.name}`;
    if (row.content_type === "tool_result") who = `Result · ${c.name || c.tool_call_id}`;
    head.append(el("span", "who", who));
    if (row.content_type === "tool_call") head.append(el("span", `badge status-${row.status}`, row.status));
    li.append(head, ...body(row));
    return li;
  }

  function problem(text) {
    $("shared-title").textContent = "Nothing to show";
    $("shared-problem").textContent = text;
    $("shared-problem").hidden = false;
    $("shared-more").hidden = true;
  }

  async function load() {
    const url = cursor ? `${base}?limit=100&cursor=${encodeURIComponent(cursor)}` : `${base}?limit=100`;
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 404) {
      problem("This link does not exist, was revoked or has expired.");
      return;
    }
    if (response.status === 401 || response.status === 403) {
      problem("Sign in to read this conversation.");
      const link = el("a", null, "Sign in");
      link.href = `/accounts/login/?next=${encodeURIComponent(window.location.pathname)}`;
      $("shared-problem").append(" ", link);
      return;
    }
    if (!response.ok) {
      problem("The conversation could not be loaded.");
      return;
    }
    const page = await response.json();
    const conversation = page.conversation || {};
    $("shared-title").textContent = conversation.title || "Untitled conversation";
    $("shared-status").textContent = conversation.status || "";
    $("shared-status").className = `badge status-${conversation.status}`;
    $("shared-status").hidden = !conversation.status;
    const share = page.share || {};
    $("shared-kind").textContent =
      share.mode === "live" ? "Shared conversation · live" : "Shared conversation · snapshot";
    $("shared-cards").append(...page.messages.map(card));
    cursor = page.next_cursor;
    $("shared-more").hidden = !cursor;
  }

  $("shared-more").addEventListener("click", () => {
    load().catch(() => problem("The conversation could not be loaded."));
  });
  load().catch(() => problem("The conversation could not be loaded."));
})();

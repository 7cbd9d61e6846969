// The console's little JavaScript: plain, no build step. Every text it shows is set as text
// (textContent), never as HTML; a refreshed region is the server's own (escaped) HTML.
"use strict";

// A region marked data-refresh="N" is fetched again every N seconds (while the tab is shown).
function followRegion(region) {
  const every = Number(region.dataset.refresh) * 1000;
  async function again() {
    if (!document.hidden) {
      try {
        const here = location.href.split("#")[0];
        const answer = await fetch(here, {credentials: "same-origin", cache: "no-store"});
        if (answer.ok && answer.url === here) {  // not the login page a lapsed session is sent to
          const page = new DOMParser().parseFromString(await answer.text(), "text/html");
          const fresh = page.getElementById(region.id);
          if (fresh) {
            region.replaceChildren(...fresh.childNodes);
            if (!fresh.dataset.refresh) return;
          }
        }
      } catch (err) {
        // the server is away for a moment (restarting): the next round tries again
      }
    }
    setTimeout(again, every);
  }
  setTimeout(again, every);
}

// A worker's Log: its output appended as it grows, until the worker has ended. Each start of
// the worker writes a file of its own: when another start is on, the Log begins again from 0.
function followLog(pre) {
  const said = document.getElementById("follow");
  let offset = 0;
  let attempt = null;
  async function more() {
    let live = true;
    try {
      const answer = await fetch(pre.dataset.url + "?offset=" + offset, {credentials: "same-origin"});
      if (answer.ok) {
        const chunk = await answer.json();
        if (attempt !== null && chunk.attempt !== attempt) {
          pre.replaceChildren();  // another start: its own file, read from its beginning
          if (offset !== 0) {  // this chunk is the new file read from the old file's offset
            attempt = chunk.attempt;
            offset = 0;
            setTimeout(more, 0);
            return;
          }
        }
        attempt = chunk.attempt;
        if (chunk.text) pre.append(document.createTextNode(chunk.text));
        const moved = chunk.offset !== offset;
        offset = chunk.offset;
        live = chunk.live || moved;
        said.textContent = chunk.live ? "Following…" : "The worker has ended.";
      }
    } catch (err) {
      // the server is away for a moment: try again
    }
    if (live) setTimeout(more, 1000);
  }
  more();
}

// The New → Run form: with an array, Start is forced to independent and CPU and memory are per worker.
function shapeForm(form) {
  const size = form.querySelector("#array_size");
  const start = form.querySelector("#start");
  const note = form.querySelector("#array-start");
  const gpus = form.querySelector("#gpus");
  function shape() {
    const array = size && size.value.trim() !== "";
    if (start) {
      start.disabled = array;
      if (array) start.value = "Independent";
    }
    if (note) note.hidden = !array;
    const per = array || !gpus || gpus.value.trim() === "" ? "per worker" : "per GPU";
    for (const name of ["cpu", "memory"]) {
      const label = form.querySelector("label[for=" + name + "]");
      if (label) label.textContent = label.dataset.label + " " + per;
    }
  }
  for (const input of [size, gpus]) if (input) input.addEventListener("input", shape);
  shape();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const region of document.querySelectorAll("[data-refresh]")) followRegion(region);
  const log = document.getElementById("log");
  if (log) followLog(log);
  const form = document.getElementById("new-run");
  if (form) shapeForm(form);
  document.addEventListener("submit", (event) => {
    const asks = event.target.dataset && event.target.dataset.confirm;
    if (asks && !window.confirm(asks)) event.preventDefault();
  });
});

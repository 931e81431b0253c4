/* Flags are words to search for: a query typed as "--max-cost-usd" finds the pages that
   hold all of its words (+max +cost +usd, as the search's separator splits the flag),
   where the search engine would read a leading "-" as "pages without this word" and find
   nothing.
   Wraps the Worker that runs the site's search (Material for MkDocs posts each query to
   it as {type: 2, data: query}); loaded before the theme's bundle creates the worker. */
(() => {
  const Base = window.Worker;
  if (typeof Base !== "function") return;
  const QUERY = 2;
  window.Worker = class extends Base {
    postMessage(message, ...rest) {
      if (message && message.type === QUERY && typeof message.data === "string") {
        const data = message.data.replace(/(^|\s)[-\u2013\u2014]+(\w[\w-]*)/g,
          (_, before, flag) => before + flag.split("-").filter(Boolean).map(w => "+" + w).join(" "));
        message = {...message, data};
      }
      return super.postMessage(message, ...rest);
    }
  };
})();

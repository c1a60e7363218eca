// What more than one page script needs: the page's translated strings, and WebSocket URLs to this host.
export const strings = JSON.parse(document.getElementById("ui-strings").textContent);

// ws(s)://<this host><path>?<params>: the scheme follows the page's, so TLS pages open TLS sockets.
export function socketUrl(path, params) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}${path}?${new URLSearchParams(params)}`;
}

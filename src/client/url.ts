/**
 * Where the client opens its WebSocket. http(s) URLs are site URLs, as in Meteor:
 * the raw DDP endpoint is `/websocket` below them. A ws(s) URL with a path is
 * taken as it is; without one it gets `/websocket`. A bare `host:port` means ws,
 * and in a browser a path-only URL is relative to the page.
 */
export function toWebSocketUrl(url: string): string {
  const location = (globalThis as { location?: { href: string } }).location;
  const absolute = url.startsWith('/') || /^[a-z][a-z\d+.-]*:\/\//i.test(url) ? url : `ws://${url}`;
  const parsed = new URL(absolute, location?.href);
  switch (parsed.protocol) {
    case 'http:':
    case 'https:':
      parsed.protocol = parsed.protocol === 'https:' ? 'wss:' : 'ws:';
      parsed.pathname = parsed.pathname.replace(/\/?$/, '/websocket');
      break;
    case 'ws:':
    case 'wss:':
      if (parsed.pathname === '/') parsed.pathname = '/websocket';
      break;
    default:
      throw new Error(`Unsupported DDP URL ${url}: use ws(s):// or http(s)://`);
  }
  return parsed.toString();
}

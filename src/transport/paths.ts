/** Which URL paths carry DDP (DDP notes §3.1), shared by the server, the workers' primary and the balancer. */

const RAW_WEBSOCKET = /^\/(?:sockjs\/)?websocket\/?$/;
const SOCKJS_WEBSOCKET = /^\/sockjs\/[^/.]+\/[^/.]+\/websocket\/?$/;
const SOCKJS_SESSION = /^\/sockjs\/[^/.]+\/([^/.]+)\/[^/]+$/;
/** The SockJS transports whose request opens a session when there is none; xhr_send and jsonp_send post to one. */
const SOCKJS_OPENING = /^\/sockjs\/[^/.]+\/[^/.]+\/(?:xhr|xhr_streaming|eventsource|htmlfile|jsonp)$/;

/** The path of a request URL, without its query. */
export function pathOf(url: string | undefined): string {
  const path = url ?? '/';
  const q = path.indexOf('?');
  return q === -1 ? path : path.slice(0, q);
}

/** `/websocket` or `/sockjs/websocket`: DDP straight over WebSocket. */
export function isRawWebSocketPath(path: string): boolean {
  return RAW_WEBSOCKET.test(path);
}

/** `/sockjs/<server>/<session>/websocket`: SockJS framing over WebSocket. */
export function isSockjsWebSocketPath(path: string): boolean {
  return SOCKJS_WEBSOCKET.test(path);
}

/** Any path DDP is served on over WebSocket. */
export function isWebSocketPath(path: string): boolean {
  return RAW_WEBSOCKET.test(path) || SOCKJS_WEBSOCKET.test(path);
}

/** The SockJS session id a request belongs to (`/sockjs/<server>/<session>/<transport>`), if any. */
export function sockjsSessionOf(path: string): string | undefined {
  return SOCKJS_SESSION.exec(path)?.[1];
}

/** Whether a request at `path` may open a SockJS session (a poll or stream), not only post to one. */
export function opensSockjsSession(path: string): boolean {
  return SOCKJS_OPENING.test(path);
}

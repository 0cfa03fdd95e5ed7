/**
 * perseid/client under Node: the same API, with the `ws` package as the default
 * WebSocket (Node 20 has no global one).
 */
import WebSocket from 'ws';
import { DDPClient as BrowserDDPClient, type DDPClientOptions } from './index.js';

export * from './index.js';

export class DDPClient extends BrowserDDPClient {
  constructor(url: string, options: DDPClientOptions = {}) {
    super(url, { ...options, WebSocket: options.WebSocket ?? WebSocket });
  }
}

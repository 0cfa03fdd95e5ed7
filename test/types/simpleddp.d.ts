// The parts of simpleddp (an untyped npm package) the tests use.
declare module 'simpleddp' {
  interface Listener {
    stop(): void;
  }
  interface Subscription {
    ready(): Promise<void>;
    stop(): Promise<void>;
    remove(): void;
  }
  interface DDPCollection<T> {
    fetch(): T[];
    filter(f: (doc: T) => boolean): DDPCollection<T>;
    onChange(f: (change: { prev: T | false; next: T | false }) => void): Listener;
  }
  export default class SimpleDDP {
    constructor(options: { endpoint: string; SocketConstructor: unknown; reconnectInterval?: number; autoReconnect?: boolean; maxTimeout?: number }, plugins?: object[]);
    connected: boolean;
    ddpConnection: { sub(name: string, params: unknown[]): string };
    connect(): Promise<void>;
    disconnect(): Promise<void>;
    call<T = unknown>(method: string, ...args: unknown[]): Promise<T>;
    subscribe(name: string, ...args: unknown[]): Subscription;
    collection<T = Record<string, unknown>>(name: string): DDPCollection<T>;
    on(event: string, f: (message: Record<string, unknown>) => void): Listener;
  }
}

declare module 'simpleddp' {
  export default interface SimpleDDP {
    login(credentials: Record<string, unknown>): Promise<{ id: string; token: string; type: string }>;
    logout(): Promise<void>;
  }
}

declare module 'simpleddp-plugin-login' {
  export const simpleDDPLogin: object;
}

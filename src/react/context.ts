/** The client the hooks use, given once near the root: `createElement(DDPProvider, { client }, app)`. */
import { createContext, createElement, useContext, type ReactNode } from 'react';
import type { DDPClient } from '../client/client.js';

const ClientContext = createContext<DDPClient | undefined>(undefined);

export interface DDPProviderProps {
  client: DDPClient;
  children?: ReactNode;
}

export function DDPProvider({ client, children }: DDPProviderProps): ReactNode {
  return createElement(ClientContext.Provider, { value: client }, children);
}

/** The DDPClient of the nearest DDPProvider. */
export function useClient(): DDPClient {
  const client = useContext(ClientContext);
  if (!client) throw new Error('perseid/react hooks need a DDPProvider above them: createElement(DDPProvider, { client }, ...)');
  return client;
}

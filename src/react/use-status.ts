/** useStatus: the connection's status (`connecting`, `connected`, `waiting`, ...), re-rendering when it changes. */
import { useCallback, useSyncExternalStore } from 'react';
import type { ClientStatus } from '../client/client.js';
import { useClient } from './context.js';

export function useStatus(): ClientStatus {
  const client = useClient();
  const subscribe = useCallback((changed: () => void) => client.on('status', changed), [client]);
  const get = useCallback(() => client.status, [client]);
  return useSyncExternalStore(subscribe, get, get);
}

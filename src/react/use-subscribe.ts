/**
 * useSubscribe: subscribes while the component is mounted (and re-subscribes
 * when the name or parameters change), as react-meteor-data's hook does:
 * returns `isLoading()`, true until the subscription's data is in.
 */
import { useEffect, useRef, useState } from 'react';
import type { InputsOf, PublicationDefinition } from '../contract/index.js';
import { EJSON } from '../ddp/ejson.js';
import { useClient } from './context.js';

export function useSubscribe<D extends PublicationDefinition>(publication: D | null | undefined, ...params: InputsOf<D>): () => boolean;
export function useSubscribe(name?: string | null, ...params: unknown[]): () => boolean;
export function useSubscribe(publication?: string | PublicationDefinition | null, ...params: unknown[]): () => boolean {
  const client = useClient();
  const name = typeof publication === 'string' || !publication ? publication : publication.name;
  // Parameters compared by value: a new array with the same contents keeps the subscription.
  const key = name ? `${name}:${EJSON.stringify(params)}` : '';
  const latestParams = useRef(params);
  latestParams.current = params;
  // Readiness of the subscription for `key` on `client`: reset as soon as either changes, since a
  // new subscription is made even for a key that was ready before (or ready on another client).
  const [readiness, setReadiness] = useState({ client, key, ready: false });
  if (readiness.key !== key || readiness.client !== client) setReadiness({ client, key, ready: false });
  useEffect(() => {
    if (!name) return undefined;
    const subscription = client.subscribe(name, ...latestParams.current);
    let active = true;
    subscription.ready.then(
      () => active && setReadiness({ client, key, ready: true }),
      () => undefined, // an error ends it; the page sees it through onStop if it asks
    );
    return () => {
      active = false;
      subscription.stop();
    };
  }, [client, name, key]);
  const loading = name ? !(readiness.key === key && readiness.client === client && readiness.ready) : false;
  return () => loading;
}

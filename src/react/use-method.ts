/**
 * useMethod: a method call for event handlers, with its state for the render:
 * `call(...params)` returns the call's promise (it runs the stub at once, as
 * any call), and the component re-renders with `pending`, then `result` or
 * `error` of the latest call.
 */
import { useCallback, useRef, useState } from 'react';
import type { MethodOptions } from '../client/methods.js';
import type { InputsOf, MethodDefinition, ResultOf } from '../contract/index.js';
import type { DDPError } from '../ddp/errors.js';
import { useClient } from './context.js';

export interface MethodState<Params extends unknown[], Result> {
  call(...params: Params): Promise<Result>;
  pending: boolean;
  result: Result | undefined;
  error: DDPError | Error | undefined;
}

export function useMethod<D extends MethodDefinition>(method: D, options?: MethodOptions): MethodState<InputsOf<D>, ResultOf<D>>;
export function useMethod<Result = unknown>(method: string, options?: MethodOptions): MethodState<unknown[], Result>;
export function useMethod(method: string | MethodDefinition, options: MethodOptions = {}): MethodState<unknown[], unknown> {
  const client = useClient();
  const name = typeof method === 'string' ? method : method.name;
  const [state, setState] = useState<Omit<MethodState<unknown[], unknown>, 'call'>>({ pending: false, result: undefined, error: undefined });
  const latest = useRef(0);
  const optionsRef = useRef(options);
  optionsRef.current = options;
  const call = useCallback(
    async (...params: unknown[]) => {
      const mine = ++latest.current;
      setState({ pending: true, result: undefined, error: undefined });
      try {
        const result = await client.apply(name, params, optionsRef.current);
        if (mine === latest.current) setState({ pending: false, result, error: undefined });
        return result;
      } catch (error) {
        if (mine === latest.current) setState({ pending: false, result: undefined, error: error as Error });
        throw error;
      }
    },
    [client, name],
  );
  return { call, ...state };
}

/**
 * perseid/react: hooks that bind React components to a perseid/client
 * DDPClient. Browser code: it imports only ../client/ (and React, an optional
 * peer dependency), never the server side of the package.
 */
export { DDPProvider, useClient } from './context.js';
export type { DDPProviderProps } from './context.js';
export { useSubscribe } from './use-subscribe.js';
export { useFind, useFindOne } from './use-find.js';
export { useMethod } from './use-method.js';
export type { MethodState } from './use-method.js';
export { useUser, useUserId } from './use-user.js';
export { useStatus } from './use-status.js';

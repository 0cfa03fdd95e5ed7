/**
 * perseid/client: the DDP client for browsers (and, through node.ts, for Node).
 * Everything reachable from here must run in a browser: no Node built-ins or
 * globals, and nothing from the server side of the package (src/query/ is
 * shared: the server's own query code, on mingo's browser build).
 */
export { DDPClient } from './client.js';
export type { ClientEvents, ClientStatus, DDPClientOptions, DisconnectInfo, MethodPromise } from './client.js';
export type { MethodOptions } from './methods.js';
export type { Stub, StubInvocation } from './stubs.js';
// Typed contracts, defined once and imported by the server too (perseid's implement()).
export { defineMethod, definePublication, returns } from '../contract/index.js';
export type { MethodDefinition, PublicationDefinition, InputsOf, OutputsOf, ResultOf, Returns } from '../contract/index.js';
export { AccountsClient } from './accounts.js';
export type { AccountsClientEvents, TokenStorage, UserSelector, ClientUser } from './accounts.js';
export type { HotCodePush } from './hot-code-push.js';
export type { Subscription } from './subscriptions.js';
export { LocalCollection } from './local-collection.js';
export type { UpdateOptions, UpsertResult } from './local-collection.js';
/** The local copy of a collection (the name earlier versions used). */
export type { LocalCollection as ClientCollection } from './local-collection.js';
export { LocalCursor } from './local-cursor.js';
export type { ObserveCallbacks, ObserveChangesCallbacks, ObserveHandle, WatchHandle } from './local-cursor.js';
export type { FindOptions, LocalSelector } from './local-query.js';
export type { Document, DocumentChange, Fields } from './documents.js';
export { METEOR_BACKOFF, retryDelay } from './backoff.js';
export type { BackoffOptions } from './backoff.js';
export type { WebSocketConstructor, WebSocketLike } from './connection.js';
export { toWebSocketUrl } from './url.js';

// The parts of the codec an application needs next to the client: errors it
// receives, EJSON values and ids in documents, and seeded streams to predict the
// ids a method with a `randomSeed` will insert.
export { DDPError } from '../ddp/errors.js';
export type { SerializedError } from '../ddp/errors.js';
export { EJSON } from '../ddp/ejson.js';
export type { EJSONCustomType } from '../ddp/ejson.js';
export { ObjectID } from '../ddp/object-id.js';
export { idParse, idStringify } from '../ddp/ids.js';
export { Random, RandomStream, collectionIdSequence } from '../ddp/random.js';
export type { ServerMessage } from '../ddp/messages.js';

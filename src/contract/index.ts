/**
 * perseid's typed contracts: a method or a publication defined once — name,
 * a Standard Schema (zod, valibot, arktype, ...) per parameter, the result
 * type — and imported by both sides. The server gets a validated handler
 * (`implement`, in perseid), the client a typed `call`/`subscribe`, by
 * TypeScript inference alone. Pure: no code of either side, so a page's
 * bundle can import the same file as the server.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';

export type Schemas = readonly StandardSchemaV1[];

/** A result type with no runtime check: `result: returns<string>()`. */
export interface Returns<T> {
  readonly '~returns'?: T;
}

export function returns<T>(): Returns<T> {
  return {};
}

export interface MethodDefinition<P extends Schemas = Schemas, R = unknown> {
  readonly kind: 'method';
  readonly name: string;
  readonly params: P;
  /** A schema the server checks the result against before sending it, if one was given. */
  readonly result: StandardSchemaV1 | undefined;
  /** Type only: what the method resolves with. */
  readonly '~result'?: R;
}

export interface PublicationDefinition<P extends Schemas = Schemas> {
  readonly kind: 'publication';
  readonly name: string;
  readonly params: P;
}

/**
 * Trailing parameters that accept undefined (optional or defaulted schemas) may
 * be left out, as the server's handler then gets undefined for them.
 */
type OptionalTail<T extends unknown[]> = T extends [...infer Head, infer Last]
  ? undefined extends Last
    ? [...OptionalTail<Head>, Last?]
    : T
  : T;

/** What a caller passes: each schema's input. */
export type ParamsIn<P extends Schemas> = OptionalTail<{ -readonly [K in keyof P]: StandardSchemaV1.InferInput<P[K]> }>;
/** What a handler receives: each schema's output (after defaults and transforms). */
export type ParamsOut<P extends Schemas> = { -readonly [K in keyof P]: StandardSchemaV1.InferOutput<P[K]> };

export type InputsOf<D> = D extends MethodDefinition<infer P, unknown> | PublicationDefinition<infer P> ? ParamsIn<P> : never;
export type OutputsOf<D> = D extends MethodDefinition<infer P, unknown> | PublicationDefinition<infer P> ? ParamsOut<P> : never;
export type ResultOf<D> = D extends MethodDefinition<Schemas, infer R> ? R : never;

type ResultSpec<R> = StandardSchemaV1<unknown, R> | Returns<R>;

function isSchema(value: unknown): value is StandardSchemaV1 {
  return typeof value === 'object' && value !== null && '~standard' in value;
}

export function defineMethod<const P extends Schemas, R = unknown>(spec: {
  name: string;
  params: P;
  result?: ResultSpec<R>;
}): MethodDefinition<P, R> {
  return { kind: 'method', name: spec.name, params: spec.params, result: isSchema(spec.result) ? spec.result : undefined };
}

export function definePublication<const P extends Schemas>(spec: { name: string; params: P }): PublicationDefinition<P> {
  return { kind: 'publication', name: spec.name, params: spec.params };
}

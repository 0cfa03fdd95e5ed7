/**
 * OpenTelemetry spans for methods, subscriptions and database operations,
 * through @opentelemetry/api only: with no SDK registered the tracer is a
 * no-op and a span costs one small object (its attributes are set only when
 * it records). With an SDK (see docs/reference/metrics.md), a method or
 * subscription is a SERVER span following the RPC conventions (`rpc.system`
 * `ddp`, `rpc.service`, `rpc.method`), each database operation made inside it
 * a CLIENT child span (`db.system.name`, `db.collection.name`,
 * `db.operation.name`, and the query's shape as `db.query.summary`: never its
 * values), a subscription's wait for its live queries an INTERNAL child
 * (`perseid.observe <collection>`), and the app's own spans inside the
 * handler become its children.
 */
import { context, ProxyTracerProvider, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type SpanOptions } from '@opentelemetry/api';
import { errorText } from './error-text.js';
import type { Trace } from './trace.js';

const tracer = trace.getTracer('perseid');
const SERVER_SPAN: SpanOptions = { kind: SpanKind.SERVER };
const CLIENT_SPAN: SpanOptions = { kind: SpanKind.CLIENT };
const INTERNAL_SPAN: SpanOptions = { kind: SpanKind.INTERNAL };
/** What the API's provider delegates to while no SDK is registered. */
const NO_SDK = new ProxyTracerProvider().getDelegate();

/** Whether an SDK may record spans (checked before building a span's name). */
function sdkRegistered(): boolean {
  const provider = trace.getTracerProvider();
  // A provider from another copy of the API is someone's SDK: let its spans say whether they record.
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NO_SDK;
}

const SERVICE = { method: 'perseid.method', sub: 'perseid.subscription' } as const;

/** Starts the span of a call; undefined when no SDK records spans. */
export function startCallSpan(kind: 'method' | 'sub', name: string, session: string, userId: string | null): Span | undefined {
  if (!sdkRegistered()) return undefined;
  const span = tracer.startSpan(`${SERVICE[kind]}/${name}`, SERVER_SPAN, ROOT_CONTEXT);
  if (!span.isRecording()) return undefined;
  span.setAttributes({ 'rpc.system': 'ddp', 'rpc.service': SERVICE[kind], 'rpc.method': name, 'ddp.session.id': session });
  if (userId) span.setAttribute('enduser.id', userId);
  return span;
}

/** Runs `fn` with the call's span as the active one (so the app's spans nest under it). */
export function withCallSpan<T>(span: Span | undefined, fn: () => T): T {
  return span ? context.with(trace.setSpan(context.active(), span), fn) : fn();
}

export function endCallSpan(t: Trace): void {
  const span = t.span;
  if (!span) return;
  span.setAttributes({
    'perseid.wait_ms': t.wait,
    'perseid.db_ms': t.db,
    'perseid.async_ms': t.async,
    'perseid.compute_ms': t.compute,
  });
  if (t.error) {
    span.recordException({ name: 'Error', message: t.error.message, stack: t.error.stack });
    // As the conventions have it for a server's 4xx: the client's mistake or a refusal is not the server failing.
    if (!t.clientError) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: t.error.message });
      span.setAttribute('error.type', 'Error');
    }
  }
  span.end();
}

/**
 * A subscription's wait for one of its cursors' live queries (its first read,
 * or a running one's documents): an INTERNAL child of the subscription's
 * span. The live query's own reads are spans of their own, not its children:
 * a live query outlives the subscription that started it and serves others.
 */
export function startObserveSpan(parent: Span | undefined, collection: string): Span | undefined {
  if (!parent) return undefined;
  const span = tracer.startSpan(`perseid.observe ${collection}`, INTERNAL_SPAN, trace.setSpan(ROOT_CONTEXT, parent));
  span.setAttribute('db.collection.name', collection);
  return span;
}

export function endObserveSpan(span: Span | undefined, docs: number | undefined, reused: boolean | undefined, error: unknown): void {
  if (reused !== undefined) span?.setAttribute('perseid.live_query.reused', reused);
  endDbSpan(span, docs, error);
}

/** Starts a database operation's span, child of `parent` (a call's span) or of the active context. */
export function startDbSpan(parent: Span | undefined, system: string, collection: string, op: string, shape: string | undefined): Span | undefined {
  if (!sdkRegistered()) return undefined;
  const ctx = parent ? trace.setSpan(ROOT_CONTEXT, parent) : context.active();
  const span = tracer.startSpan(`${op} ${collection}`, CLIENT_SPAN, ctx);
  if (!span.isRecording()) return undefined;
  span.setAttributes({ 'db.system.name': system, 'db.collection.name': collection, 'db.operation.name': op });
  if (shape !== undefined) span.setAttribute('db.query.summary', shape);
  return span;
}

export function endDbSpan(span: Span | undefined, docs: number | undefined, error: unknown): void {
  if (!span) return;
  if (docs !== undefined) span.setAttribute('db.response.returned_rows', docs);
  if (error !== undefined) {
    const { message } = errorText(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message });
    span.setAttribute('error.type', error instanceof Error ? error.name : 'Error');
  }
  span.end();
}

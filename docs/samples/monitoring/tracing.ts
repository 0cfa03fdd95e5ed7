// tracing.ts — send Perseid's spans to an OpenTelemetry collector (OTLP over HTTP,
// OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318). Load it before the app, workers too:
// NODE_OPTIONS='--import ./dist/tracing.js' npx perseid start dist/app.js
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

export const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
provider.register();

// Sends log lines to a running `faultline serve` through real client libraries, as the
// end-to-end tests need (tests/e2e/push_clients.sh). Exits non-zero if the client reports an
// error or the server refuses the request.
//
//   node send.js CLIENT URL NODE KIND LINE [TOKEN]
//   CLIENT  loki-proto  winston-loki, protobuf + snappy (its default; needs the `snappy` module)
//           loki-json   winston-loki with json: true
//           otlp-proto  @opentelemetry/exporter-logs-otlp-proto, gzip
//           otlp-json   @opentelemetry/exporter-logs-otlp-http (JSON), gzip
//   KIND    kernel: labelled as the kernel stream (Loki transport="kernel"; OTLP: a journald-
//           receiver style kvlist body with _TRANSPORT=kernel)
//           pod: labelled with a pod (Loki pod="evil-0"; OTLP resource k8s.pod.name)
//           pod-cut: as pod, the line followed by half an emoji (a string cut inside a UTF-16
//           surrogate pair), which JSON.stringify writes as a lone "\ud83d" escape
'use strict';

const [client, url, node, kindArg, lineArg, token] = process.argv.slice(2);
const kind = kindArg === 'pod-cut' ? 'pod' : kindArg;
const line = kindArg === 'pod-cut' ? `${lineArg} \u{1F680}`.slice(0, -1) : lineArg;
const headers = { 'X-Scope-OrgID': 'e2e' };
if (token) headers.Authorization = `Bearer ${token}`;

async function loki(json) {
  const winston = require('winston');
  const LokiTransport = require('winston-loki');
  let failed = null;
  const labels = kind === 'kernel' ? { node, transport: 'kernel' } : { node, pod: 'evil-0' };
  const transport = new LokiTransport({
    host: url,
    labels,
    json,
    batching: false,
    headers,
    onConnectionError: (err) => { failed = err; },
  });
  if (!json) {
    require('snappy');  // winston-loki falls back to JSON silently without it: fail instead
  }
  const logger = winston.createLogger({ transports: [transport] });
  logger.error(line);
  await transport.flush();
  await transport.close();
  if (failed) throw failed;
}

async function otlp(proto) {
  const { LoggerProvider, SimpleLogRecordProcessor } = require('@opentelemetry/sdk-logs');
  const { resourceFromAttributes } = require('@opentelemetry/resources');
  const { OTLPLogExporter } = proto ? require('@opentelemetry/exporter-logs-otlp-proto')
                                    : require('@opentelemetry/exporter-logs-otlp-http');
  const attrs = { 'k8s.node.name': node, 'service.name': 'e2e' };
  if (kind === 'pod') attrs['k8s.pod.name'] = 'evil-0';
  const exporter = new OTLPLogExporter({ url: `${url}/v1/logs`, headers, compression: 'gzip' });
  // Report the export result: the SDK only logs failures.
  let result = null;
  const realExport = exporter.export.bind(exporter);
  exporter.export = (records, done) => realExport(records, (r) => { result = r; done(r); });
  // sdk-logs 0.223 takes an options object (npm @opentelemetry/sdk-logs 0.223.1).
  const provider = new LoggerProvider({
    resource: resourceFromAttributes(attrs),
    processors: [new SimpleLogRecordProcessor({ exporter })],
  });
  const body = kind === 'kernel' ? { MESSAGE: line, _TRANSPORT: 'kernel', _HOSTNAME: node } : line;
  provider.getLogger('e2e').emit({ body, severityText: 'ERROR', timestamp: Date.now() });
  await provider.forceFlush();
  await provider.shutdown();
  if (!result || result.code !== 0) {
    throw new Error(`export failed: ${result && result.error ? result.error.message : 'no result'}`);
  }
}

const clients = {
  'loki-proto': () => loki(false),
  'loki-json': () => loki(true),
  'otlp-proto': () => otlp(true),
  'otlp-json': () => otlp(false),
};
if (!clients[client]) {
  console.error(`unknown client ${client}`);
  process.exit(2);
}
clients[client]().then(() => process.exit(0), (err) => {
  console.error(`${client}: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});

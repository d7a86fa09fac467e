// Re-encodes Loki JSON push bodies in another push encoding with the real clients' own encoders,
// keeping every entry's nanosecond time, line and stream, for tests/e2e/live_replay.sh.
//
//   node encode.js FORMAT DIR...
//   DIR     holds files *.json, each {"streams":[{"stream":{LABELS},"values":[["NS","LINE"],...]},
//           ...]} (Loki JSON); each one's body in FORMAT is written beside it, its name ending
//           .bin in place of .json
//   FORMAT  loki-proto  winston-loki's PushRequest encoder (protobufjs) and snappy, as it sends
//                       them; the same labels, as Loki's label string
//           otlp-proto, otlp-json  the OTel JS exporters' serializers (@opentelemetry/
//                       otlp-transformer, which exporter-logs-otlp-proto and -http call): one
//                       resource per stream, as the OTel collector sends them:
//                       - transport="kernel" or syslog_identifier (the node's journal): the
//                         journald receiver's record, journal fields in a kvlist body (MESSAGE,
//                         _TRANSPORT, SYSLOG_IDENTIFIER, _HOSTNAME), the node as the resource's
//                         host.name (resourcedetection);
//                       - pod: the filelog receiver's, the line as a string body, the resource's
//                         k8s.node.name, k8s.namespace.name, k8s.pod.name and, for the label
//                         job_name, k8s.job.name (k8sattributes).
// The clients themselves take times in milliseconds (winston-loki) or from their own clock; their
// encoders are given each entry's time whole.
'use strict';

const fs = require('fs');
const path = require('path');

// Nanoseconds since the epoch (a decimal string) as [seconds, nanoseconds].
function split(ns) {
  const t = BigInt(ns);
  return [Number(t / 1000000000n), Number(t % 1000000000n)];
}

function lokiProto(req) {
  const { logproto } = require('winston-loki/src/proto');
  const snappy = require('snappy');
  const streams = req.streams.map(({ stream, values }) => ({
    labels: `{${Object.entries(stream).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ')}}`,
    entries: values.map(([ns, line]) => {
      const [seconds, nanos] = split(ns);
      return { timestamp: { seconds, nanos }, line };
    }),
  }));
  const err = logproto.PushRequest.verify({ streams });
  if (err) throw new Error(err);
  const message = logproto.PushRequest.create({ streams });
  return snappy.compressSync(logproto.PushRequest.encode(message).finish());
}

function otlp(req, serializer) {
  const { resourceFromAttributes } = require('@opentelemetry/resources');
  const scope = { name: 'faultline-live-replay' };
  const records = [];
  for (const { stream, values } of req.streams) {
    const node = stream.node_name;
    let journal = null;
    let attrs;
    if (stream.transport === 'kernel') {
      journal = { _TRANSPORT: 'kernel', SYSLOG_IDENTIFIER: 'kernel' };
    } else if (stream.syslog_identifier) {
      journal = { _TRANSPORT: 'journal', SYSLOG_IDENTIFIER: stream.syslog_identifier };
    }
    if (journal) {
      attrs = { 'host.name': node };
    } else if (stream.pod) {
      attrs = {
        'k8s.node.name': node,
        'k8s.namespace.name': stream.namespace,
        'k8s.pod.name': stream.pod,
      };
      if (stream.job_name) attrs['k8s.job.name'] = stream.job_name;
    } else {
      throw new Error(`no OTLP equivalent for the stream ${JSON.stringify(stream)}`);
    }
    const resource = resourceFromAttributes(attrs);
    for (const [ns, line] of values) {
      const hrTime = split(ns);
      records.push({
        resource,
        instrumentationScope: scope,
        hrTime,
        hrTimeObserved: hrTime,
        body: journal ? { MESSAGE: line, ...journal, _HOSTNAME: node } : line,
        attributes: {},
        droppedAttributesCount: 0,
      });
    }
  }
  return serializer.serializeRequest(records);
}

const encoders = {
  'loki-proto': lokiProto,
  'otlp-proto': (req) => otlp(req, require('@opentelemetry/otlp-transformer').ProtobufLogsSerializer),
  'otlp-json': (req) => otlp(req, require('@opentelemetry/otlp-transformer').JsonLogsSerializer),
};
const [format, ...dirs] = process.argv.slice(2);
if (!encoders[format]) {
  console.error(`unknown format ${format}`);
  process.exit(2);
}
for (const dir of dirs) {
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.json'))) {
    const body = encoders[format](JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')));
    fs.writeFileSync(path.join(dir, name.replace(/\.json$/, '.bin')), body);
  }
}

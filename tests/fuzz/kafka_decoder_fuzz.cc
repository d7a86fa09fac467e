// Fuzzes the Kafka message decoders (all four encodings) with arbitrary values, keys and node
// headers.
#include <cstdint>
#include <string_view>

#include "ingest/kafka/decoders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // First line: the key, then after a tab, if there is one, the node header's value (without a
  // tab the message has no header lookup); the rest: the value.
  const size_t nl = in.find('\n');
  const std::string_view first = in.substr(0, nl == std::string_view::npos ? 0 : nl);
  const size_t tab = first.find('\t');
  faultline::KafkaMessage msg;
  msg.key = first.substr(0, tab);
  if (tab != std::string_view::npos) {
    msg.node_header = [header = first.substr(tab + 1)] { return header; };
  }
  msg.value = nl == std::string_view::npos ? in : in.substr(nl + 1);
  msg.timestamp_ms = 1741000000000;
  for (auto encoding :
       {faultline::KafkaEncoding::kRaw, faultline::KafkaEncoding::kJson,
        faultline::KafkaEncoding::kOtlpProto, faultline::KafkaEncoding::kOtlpJson}) {
    faultline::KafkaTopicConfig topic;
    topic.name = "t";
    topic.encoding = encoding;
    const faultline::KafkaDecoder decoder(topic);
    faultline::RecordBatch batch;
    (void)decoder.decode(msg, 0, &batch);
  }
  return 0;
}

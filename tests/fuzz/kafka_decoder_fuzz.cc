// Fuzzes the Kafka message decoders (raw and json) with arbitrary values, keys and headers.
#include <cstdint>
#include <string_view>

#include "ingest/kafka/decoders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // First line: the key; the rest: the value.
  const size_t nl = in.find('\n');
  faultline::KafkaMessage msg;
  msg.key = in.substr(0, nl == std::string_view::npos ? 0 : nl);
  msg.value = nl == std::string_view::npos ? in : in.substr(nl + 1);
  msg.timestamp_ms = 1741000000000;
  for (auto encoding : {faultline::KafkaEncoding::kRaw, faultline::KafkaEncoding::kJson}) {
    faultline::KafkaTopicConfig topic;
    topic.name = "t";
    topic.encoding = encoding;
    const faultline::KafkaDecoder decoder(topic);
    faultline::RecordBatch batch;
    (void)decoder.decode(msg, 0, &batch);
  }
  return 0;
}

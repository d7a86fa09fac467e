#include "ingest/kafka/kafka_source.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <future>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <librdkafka/rdkafka.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "core/yaml_read.h"

namespace faultline {
namespace {

// How long closing the consumer (the final commit and leaving the group) may take before the handle
// is left behind: librdkafka's close waits for an unreachable coordinator up to
// session.timeout.ms (45 s by default), past Kubernetes' grace period (30 s), which would kill the
// pod with its decisions undrained. The partitions' next owner then reads from the last committed
// offsets again (at-least-once, as after a crash).
constexpr std::chrono::seconds kCloseWait{5};
// How long destroying the consumer may take before it is left behind (HandleDeleter).
constexpr std::chrono::seconds kDestroyWait{10};

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
// rd_kafka_destroy() also closes a consumer that was not closed (commits, leaves the group).
// Waited for kDestroyWait at most: librdkafka 2.0.2 (Debian 12's) closes a consumer one of whose
// partitions was deleted or lost, then never returns from waiting for its own threads (a
// reference cycle, librdkafka #4187, fixed in 2.1.0), which held SIGTERM and a restart on new
// rules for good, with the pipeline never drained. Past the wait the handle is left to a thread
// of its own until the process exits or executes anew.
struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const {
    auto destroyed = std::make_shared<std::promise<void>>();
    std::future<void> done = destroyed->get_future();
    try {
      std::thread([rk, destroyed] {
        rd_kafka_destroy(rk);
        destroyed->set_value();
      }).detach();
    } catch (const std::system_error&) {  // no thread to spare: wait as before
      rd_kafka_destroy(rk);
      return;
    }
    if (done.wait_for(kDestroyWait) != std::future_status::ready) {
      spdlog::warn(
          "kafka: the consumer, closed, was not destroyed within {} s (librdkafka before 2.1.0 "
          "never finishes once a partition was deleted or lost); left behind",
          kDestroyWait.count());
    }
  }
};
struct MessageDeleter {
  void operator()(rd_kafka_message_t* msg) const { rd_kafka_message_destroy(msg); }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* queue) const { rd_kafka_queue_destroy(queue); }
};
struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;
using HandlePtr = std::unique_ptr<rd_kafka_t, HandleDeleter>;
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;
using QueuePtr = std::unique_ptr<rd_kafka_queue_t, QueueDeleter>;
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

constexpr int kIdlePollMs = 100;  // bounds how long a stop request waits for poll to return
// Messages taken from librdkafka's queue per call once a batch is open: rd_kafka_consumer_poll
// reads the clock twice per message (max.poll.interval.ms), 5% of a JSON topic's CPU.
constexpr size_t kPollBatch = 256;
// A seek is served by librdkafka's main thread, in well under a millisecond: the bound is for a
// thread that is stuck, not slow.
constexpr int kSeekTimeoutMs = 10'000;
// A handler that has not returned by then is waited for with the partitions paused. Pausing
// drops prefetched messages, so it is kept for real stalls.
constexpr std::chrono::seconds kPauseAfter{1};
// The catch-up check asks librdkafka for every assigned partition's position and watermark:
// between batches of a backlog, at most this often.
constexpr int64_t kCatchUpCheckNs = 100'000'000;
// KafkaConfig::max_skew_ns: how often the assignment is read for partitions not read yet, and how
// long a partition with messages left holds the others while it hands none on (not read yet, or
// its broker not answering: one partition must not stop the others for good; one that answers
// sends a message or the partition's end first).
constexpr int64_t kLaneCheckNs = 100'000'000;
constexpr int64_t kStallNs = int64_t{10} * 1'000'000'000;
// Properties faultline sets itself, and why a `properties` entry must not replace them.
constexpr std::pair<std::string_view, std::string_view> kReservedProperties[] = {
    {"enable.auto.offset.store", "offsets are stored after each batch is handled"},
    {"enable.auto.commit",
     "the offsets stored after each batch is handled are committed every "
     "auto.commit.interval.ms (set that instead)"},
    {"group.id",
     "the group is kafka.group_id, suffixed with the pod name under leader election so that each "
     "replica reads every partition"}};

// Builds the consumer configuration (its properties checked by fromYaml); throws naming the setting
// librdkafka rejects.
ConfPtr makeConf(const KafkaConfig& config) {
  ConfPtr conf(rd_kafka_conf_new());
  char err[512];
  auto set = [&](const std::string& key, const std::string& value) {
    if (rd_kafka_conf_set(conf.get(), key.c_str(), value.c_str(), err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
      throw std::runtime_error("kafka.properties." + key + ": " + err);
    }
  };
  set("bootstrap.servers", config.brokers);
  set("group.id", config.group_id);
  set("client.id", "faultline");
  set("enable.auto.commit", "true");
  set("auto.offset.reset", "earliest");
  for (const auto& [key, value] : config.properties) {
    set(key, value);
  }
  set("enable.auto.offset.store", "false");
  // A partition's end is an event (consume() skips it): KafkaSource's `caught_up`.
  set("enable.partition.eof", "true");
  return conf;
}

void onLog(const rd_kafka_t* /*rk*/, int level, const char* facility, const char* message) {
  // librdkafka uses syslog levels.
  const auto spd = level <= 3   ? spdlog::level::err
                   : level == 4 ? spdlog::level::warn
                   : level <= 6 ? spdlog::level::info
                                : spdlog::level::debug;
  spdlog::log(spd, "librdkafka {}: {}", facility, message);
}

// --- YAML ---

KafkaTopicConfig topicFromYaml(const YAML::Node& node, const std::string& path) {
  checkKeys(node, path + ".", {"name", "encoding", "stream", "node_header", "fields"});
  KafkaTopicConfig topic;
  if (!node["name"]) {
    failAt(node, path + ".name", "required");
  }
  topic.name = stringAt(node["name"], path + ".name");
  if (topic.name.empty()) {
    failAt(node["name"], path + ".name", "must not be empty");
  }
  if (const YAML::Node n = node["encoding"]) {
    const std::string encoding = stringAt(n, path + ".encoding");
    if (encoding == "raw") {
      topic.encoding = KafkaEncoding::kRaw;
    } else if (encoding == "json") {
      topic.encoding = KafkaEncoding::kJson;
    } else if (encoding == "otlp_proto") {
      topic.encoding = KafkaEncoding::kOtlpProto;
    } else if (encoding == "otlp_json") {
      topic.encoding = KafkaEncoding::kOtlpJson;
    } else {
      failAt(n, path + ".encoding",
             "expected raw, json, otlp_proto or otlp_json, got '" + encoding + "'");
    }
  }
  if (const YAML::Node n = node["stream"]) {
    const std::string stream = stringAt(n, path + ".stream");
    if (!parseStreamKind(stream, &topic.stream)) {
      failAt(n, path + ".stream", "expected kernel, pod or other, got '" + stream + "'");
    }
  }
  if (const YAML::Node n = node["node_header"]) {
    topic.node_header = stringAt(n, path + ".node_header");
  }
  if (const YAML::Node fields = node["fields"]) {
    const std::string fpath = path + ".fields";
    checkKeys(fields, fpath + ".", {"line", "node", "time", "pod", "job"});
    JsonRecordFields& f = topic.fields;
    for (auto [key, list] :
         {std::pair{"line", &f.line}, std::pair{"node", &f.node}, std::pair{"time", &f.time},
          std::pair{"pod", &f.pod}, std::pair{"job", &f.job}}) {
      if (const YAML::Node n = fields[key]) {
        *list = stringsAt(n, fpath + "." + key, true);
      }
    }
  }
  return topic;
}

}  // namespace

KafkaConfig KafkaConfig::fromYaml(const YAML::Node& node) {
  checkKeys(node, "kafka.",
            {"brokers", "group_id", "properties", "topics", "batch_max_messages", "batch_max_bytes",
             "batch_timeout_ms"});
  KafkaConfig config;
  if (!node["brokers"]) {
    failAt(node, "kafka.brokers", "required");
  }
  config.brokers = stringAt(node["brokers"], "kafka.brokers");
  if (config.brokers.empty()) {
    failAt(node["brokers"], "kafka.brokers", "must not be empty");
  }
  if (const YAML::Node n = node["group_id"]) {
    config.group_id = stringAt(n, "kafka.group_id");
  }
  if (const YAML::Node n = node["batch_max_messages"]) {
    config.batch_max_messages = integerAt<size_t>(n, "kafka.batch_max_messages", 1);
  }
  if (const YAML::Node n = node["batch_max_bytes"]) {
    config.batch_max_bytes = integerAt<size_t>(n, "kafka.batch_max_bytes", 1);
  }
  if (const YAML::Node n = node["batch_timeout_ms"]) {
    config.batch_timeout_ms = integerAt<int>(n, "kafka.batch_timeout_ms", 0);
  }
  if (const YAML::Node props = node["properties"]) {
    if (!props.IsMap()) {
      failAt(props, "kafka.properties", "expected a mapping");
    }
    std::set<std::string> given;  // a key given twice: which value would win is not obvious
    const ConfPtr check(rd_kafka_conf_new());  // each property on its own, to name its line
    char err[512];
    for (const auto& kv : props) {
      const std::string key = kv.first.Scalar();
      const std::string path = "kafka.properties." + key;
      if (!given.insert(key).second) {
        failAt(kv.first, path, "repeated key");
      }
      for (const auto& [reserved, why] : kReservedProperties) {
        if (key == reserved) {
          failAt(kv.first, path, "must not be set; " + std::string(why));
        }
      }
      const std::string value = stringAt(kv.second, path);
      if (rd_kafka_conf_set(check.get(), key.c_str(), value.c_str(), err, sizeof(err)) !=
          RD_KAFKA_CONF_OK) {
        failAt(kv.first, path, err);
      }
      config.properties[key] = value;
    }
  }
  const YAML::Node topics = node["topics"];
  if (!topics || !topics.IsSequence() || topics.size() == 0) {
    failAt(topics ? topics : node, "kafka.topics", "expected a non-empty list");
  }
  for (size_t i = 0; i < topics.size(); ++i) {
    const std::string path = "kafka.topics[" + std::to_string(i) + "]";
    KafkaTopicConfig topic = topicFromYaml(topics[i], path);
    for (const KafkaTopicConfig& t : config.topics) {
      if (t.name == topic.name) {
        failAt(topics[i]["name"], path + ".name", "duplicate topic '" + topic.name + "'");
      }
    }
    config.topics.push_back(std::move(topic));
  }
  makeConf(config);  // rejects what librdkafka refuses in `brokers` now, not at start
  return config;
}

KafkaSource::KafkaSource(KafkaConfig config, std::atomic<bool>* caught_up)
    : config_(std::move(config)),
      counters_(new Counters[config_.topics.size()]),
      caught_up_(caught_up) {
  for (const KafkaTopicConfig& topic : config_.topics) {
    decoders_.emplace_back(topic);
  }
}

KafkaSource::~KafkaSource() = default;

KafkaStats KafkaSource::stats() const {
  KafkaStats stats;
  for (size_t i = 0; i < config_.topics.size(); ++i) {
    stats.topics.push_back({config_.topics[i].name, counters_[i].messages.load(),
                            counters_[i].bytes.load(), counters_[i].malformed.load(),
                            counters_[i].lag.load()});
  }
  stats.errors = errors_.load();
  return stats;
}

void KafkaSource::noteStatistics(std::string_view json) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(json);
    const nlohmann::json& topics = doc.at("topics");
    for (size_t i = 0; i < config_.topics.size(); ++i) {
      int64_t lag = 0;
      bool read = false;  // a partition of the topic this member fetches
      const auto topic = topics.find(config_.topics[i].name);
      if (topic != topics.end()) {
        for (const auto& [id, p] : topic->at("partitions").items()) {
          // Partition -1 is librdkafka's internal unassigned one; "none", "stopping" and
          // "stopped" are partitions this member does not fetch (not assigned, or revoked).
          const std::string state = p.at("fetch_state").get<std::string>();
          if (id == "-1" || state == "none" || state == "stopping" || state == "stopped") {
            continue;
          }
          const int64_t stored = p.at("consumer_lag_stored").get<int64_t>();
          const int64_t committed = p.at("consumer_lag").get<int64_t>();
          lag += stored >= 0 ? stored : std::max<int64_t>(committed, 0);
          read = true;
        }
      }
      // None read (the brokers unreachable, no partition assigned): no lag to tell, where 0
      // would say caught up.
      counters_[i].lag.store(read ? lag : -1, std::memory_order_relaxed);
    }
  } catch (const nlohmann::json::exception& e) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("kafka: statistics: {}", e.what());
  }
}

void KafkaSource::run(const BatchHandler& handle, std::stop_token stop) {
  if (config_.brokers.empty() || config_.topics.empty()) {
    throw std::runtime_error("kafka: brokers and at least one topic are required");
  }
  ConfPtr conf = makeConf(config_);
  rd_kafka_conf_set_opaque(conf.get(), this);
  rd_kafka_conf_set_error_cb(conf.get(), [](rd_kafka_t* /*rk*/, int err, const char* reason,
                                            void* opaque) {
    static_cast<KafkaSource*>(opaque)->errors_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("kafka: {}: {}", rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)), reason);
  });
  // Auto commits, on the interval and at the close: a refused one means the partitions' next
  // owner reads those records again.
  rd_kafka_conf_set_offset_commit_cb(
      conf.get(), [](rd_kafka_t* /*rk*/, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t* offsets, void* opaque) {
        for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && offsets != nullptr && i < offsets->cnt;
             ++i) {
          err = offsets->elems[i].err;
        }
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
          static_cast<KafkaSource*>(opaque)->errors_.fetch_add(1, std::memory_order_relaxed);
          spdlog::warn("kafka: commit: {}", rd_kafka_err2str(err));
        }
      });
  rd_kafka_conf_set_stats_cb(conf.get(),
                             [](rd_kafka_t* /*rk*/, char* json, size_t size, void* opaque) {
                               static_cast<KafkaSource*>(opaque)->noteStatistics({json, size});
                               return 0;  // librdkafka frees `json`
                             });
  rd_kafka_conf_set_log_cb(conf.get(), onLog);
  char err[512];
  HandlePtr rk(rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof(err)));
  if (!rk) {
    throw std::runtime_error(std::string("kafka: cannot create consumer: ") + err);
  }
  static_cast<void>(conf.release());     // rd_kafka_new took ownership
  rd_kafka_poll_set_consumer(rk.get());  // serve error callbacks from rd_kafka_consumer_poll

  ListPtr subscription(rd_kafka_topic_partition_list_new(static_cast<int>(config_.topics.size())));
  for (const KafkaTopicConfig& topic : config_.topics) {
    rd_kafka_topic_partition_list_add(subscription.get(), topic.name.c_str(),
                                      RD_KAFKA_PARTITION_UA);
  }
  if (rd_kafka_resp_err_t e = rd_kafka_subscribe(rk.get(), subscription.get())) {
    throw std::runtime_error(std::string("kafka: subscribe failed: ") + rd_kafka_err2str(e));
  }
  spdlog::info("kafka: consuming {} topic(s) from {} as group {}", config_.topics.size(),
               config_.brokers, config_.group_id);

  // Declared after rk so that the messages it holds are destroyed before the consumer.
  RecordBatch batch;
  std::map<std::pair<size_t, int32_t>, int64_t> next_offsets;  // (topic, partition) → offset
  size_t pending = 0;  // messages in the batch, malformed ones included
  int64_t deadline_ns = 0;

  // Messages polled but not yet consumed: the rest of a rd_kafka_consume_batch_queue call, and
  // those polled while a batch was being handled (from partitions a rebalance assigned in the
  // meantime, which start unpaused, and consumer errors), which open the next batch.
  std::deque<MessagePtr> ready;
  const QueuePtr consumer_queue(rd_kafka_queue_get_consumer(rk.get()));

  // The index in config_.topics of the topic named `name`; config_.topics.size() if none.
  auto topicIndex = [&](std::string_view name) {
    return static_cast<size_t>(
        std::find_if(config_.topics.begin(), config_.topics.end(),
                     [&](const KafkaTopicConfig& t) { return t.name == name; }) -
        config_.topics.begin());
  };

  // Event-time alignment (KafkaConfig::max_skew_ns), per (topic index, partition) read.
  using Key = std::pair<size_t, int32_t>;
  struct Lane {
    // The newest record time handed on from it, or that of its held message once released.
    int64_t newest_ns = INT64_MIN;
    bool more = false;  // librdkafka's high watermark was past the last message handed on
    int64_t high = -1;  // that watermark, read again only once a message reaches it
    // Held back: the partition paused and its position set back (a seek) to `held_offset`, the
    // offset of its first message beyond the bound, whose newest record time is held_ns. It keeps
    // no message: those polled are fetched again once it is released. -1: not held.
    int64_t held_offset = -1;
    int64_t held_ns = INT64_MIN;
    std::multiset<int64_t>::iterator at;  // in `fronts`, if it holds or has more
    bool placed = false;
    int64_t progress_ns = INT64_MIN;  // when it was found assigned or last handed a message on
  };
  std::map<Key, Lane> lanes;
  // Each lane's time that holds the others (held_ns if it holds, else newest_ns if it has more):
  // the least other one is found in O(1) per message, however many partitions are read.
  std::multiset<int64_t> fronts;
  auto place = [&](Lane& lane) {
    const bool holds = lane.held_offset >= 0 || lane.more;
    const int64_t front = lane.held_offset < 0 ? lane.newest_ns : lane.held_ns;
    if (lane.placed && holds) {
      if (*lane.at != front) {  // the node moved, not allocated again: once per message
        auto node = fronts.extract(lane.at);
        node.value() = front;
        lane.at = fronts.insert(std::move(node));
      }
    } else if (lane.placed) {
      fronts.erase(lane.at);
    } else if (holds) {
      lane.at = fronts.insert(front);
    }
    lane.placed = holds;
  };

  size_t held_lanes = 0;  // lanes held back
  const int64_t skew = config_.max_skew_ns;
  auto partitionList = [&](const Key& key) {
    ListPtr one(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(one.get(), config_.topics[key.first].name.c_str(),
                                      key.second);
    return one;
  };
  // The time up to which every partition but `own`'s with messages left was read (the time of its
  // held message, if held): INT64_MAX if there is none. One at its end holds no other.
  auto others = [&](const Lane& own) {
    auto least = fronts.begin();
    if (least != fronts.end() && own.placed && least == own.at) {
      ++least;
    }
    return least == fronts.end() ? INT64_MAX : *least;
  };
  auto beyond = [&](int64_t t, int64_t least) {
    return least <= INT64_MAX - skew && t > least + skew;
  };
  // Forgets the partitions no longer assigned (a rebalance): the pause of one held back is lifted,
  // which librdkafka would keep if it were assigned back (the new owner reads from the committed
  // offset).
  // With `now` (ns), also takes the partitions assigned and not read yet as holding the others
  // (newly assigned, their time is not known), for kStallNs at most.
  auto forgetRevoked = [&](int64_t now = INT64_MIN) {
    rd_kafka_topic_partition_list_t* raw = nullptr;
    if (rd_kafka_assignment(rk.get(), &raw) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return;
    }
    const ListPtr assigned(raw);
    for (int i = 0; now != INT64_MIN && i < assigned->cnt; ++i) {
      if (const size_t topic = topicIndex(assigned->elems[i].topic);
          topic < config_.topics.size()) {
        if (const auto [lane, added] = lanes.try_emplace({topic, assigned->elems[i].partition});
            added) {
          lane->second.more = true;
          lane->second.progress_ns = now;
          place(lane->second);
        }
      }
    }
    for (auto& [key, lane] : lanes) {
      if (now != INT64_MIN && lane.more && lane.held_offset < 0 && lane.progress_ns != INT64_MIN &&
          now - lane.progress_ns > kStallNs) {
        lane.more = false;  // until its next message
        place(lane);
      }
    }
    for (auto it = lanes.begin(); it != lanes.end();) {
      if (rd_kafka_topic_partition_list_find(assigned.get(),
                                             config_.topics[it->first.first].name.c_str(),
                                             it->first.second) != nullptr) {
        ++it;
        continue;
      }
      if (it->second.held_offset >= 0) {
        rd_kafka_resume_partitions(rk.get(), partitionList(it->first).get());
        --held_lanes;
        // Its messages polled after the held one go too (polled while the pipeline was busy):
        // handed on, they would store an offset past the held one, which the group commits if
        // the partition comes back to this member before the store.
        std::erase_if(ready, [&](const MessagePtr& m) {
          return m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition == it->first.second &&
                 topicIndex(rd_kafka_topic_name(m->rkt)) == it->first.first;
        });
      }
      if (it->second.placed) {
        fronts.erase(it->second.at);
      }
      it = lanes.erase(it);
    }
  };
  // Pauses the partition `key` and sets its position back to `offset` (the message being
  // consumed), so that the messages polled from it are dropped, and fetched again from there once
  // it is resumed. The pause comes first: a pause sets the position to the last message consumed
  // (librdkafka #3471). False, the partition resumed, if the seek failed (the partition is being
  // revoked): the message is then handed on, not held, since it would not be fetched again.
  auto holdBack = [&](const Key& key, int64_t offset) {
    const ListPtr one = partitionList(key);
    rd_kafka_pause_partitions(rk.get(), one.get());
    one->elems[0].offset = offset;
    rd_kafka_error_t* error = rd_kafka_seek_partitions(rk.get(), one.get(), kSeekTimeoutMs);
    const rd_kafka_resp_err_t err =
        error != nullptr ? rd_kafka_error_code(error) : one->elems[0].err;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      return true;
    }
    spdlog::warn("kafka: {}[{}] not held back: seek to offset {}: {}",
                 config_.topics[key.first].name, key.second, offset, rd_kafka_err2str(err));
    rd_kafka_error_destroy(error);
    rd_kafka_resume_partitions(rk.get(), one.get());
    return false;
  };
  // Resumes the partitions held back that are no longer ahead by more than the bound: they fetch
  // again from their held message.
  auto release = [&] {
    forgetRevoked();
    for (auto& [key, lane] : lanes) {
      if (lane.held_offset < 0 || beyond(lane.held_ns, others(lane))) {
        continue;
      }
      rd_kafka_resume_partitions(rk.get(), partitionList(key).get());
      lane.held_offset = -1;
      --held_lanes;
      // Its next message is the held one: the others may go on as far as they could while it was
      // held, not stop at its last message handed on until the fetch brings it again.
      lane.newest_ns = std::max(lane.newest_ns, lane.held_ns);
      lane.progress_ns = nowNanos();  // its fetch starts now: held that long, it is no stall
      place(lane);
    }
  };
  // The handler may block for long (the pipeline queue is full). Past kPauseAfter the consumer
  // pauses its partitions and keeps polling, so that it stays in its group
  // (max.poll.interval.ms) without fetching more. An exception from the handler propagates from
  // here, so that flush() stores no offsets for the batch and run() throws: the group reads the
  // batch again.
  auto handleWhilePolling = [&] {
    const int64_t handed_ns = nowNanos();
    auto done = std::async(std::launch::async, [&] { handle(batch); });
    if (done.wait_for(kPauseAfter) == std::future_status::ready) {
      done.get();
      return;
    }
    // Every partition paused here is resumed, assigned or not by then: librdkafka keeps a pause
    // across a rebalance, so a partition revoked meanwhile and assigned back later would never
    // be fetched again.
    rd_kafka_topic_partition_list_t* raw = nullptr;
    const ListPtr paused(rd_kafka_assignment(rk.get(), &raw) == RD_KAFKA_RESP_ERR_NO_ERROR
                             ? raw
                             : rd_kafka_topic_partition_list_new(1));
    rd_kafka_pause_partitions(rk.get(), paused.get());
    spdlog::info("kafka: the pipeline is busy; partitions paused");
    while (done.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      MessagePtr msg(rd_kafka_consumer_poll(rk.get(), kIdlePollMs));
      if (msg && !msg->err) {
        ListPtr one(rd_kafka_topic_partition_list_new(1));
        rd_kafka_topic_partition_list_add(one.get(), rd_kafka_topic_name(msg->rkt), msg->partition);
        rd_kafka_pause_partitions(rk.get(), one.get());
        rd_kafka_topic_partition_list_add(paused.get(), rd_kafka_topic_name(msg->rkt),
                                          msg->partition);
      }
      if (msg) {  // an error too, so that consume() counts and logs it (it was dropped unseen)
        ready.push_back(std::move(msg));
      }
    }
    rd_kafka_resume_partitions(rk.get(), paused.get());
    // The time the pipeline took is no stall of the partitions' (kStallNs): the pause dropped what
    // they had fetched, and one behind found stalled before it fetched again would let the others
    // run ahead of it.
    const int64_t busy_ns = nowNanos() - handed_ns;
    for (auto& [key, lane] : lanes) {
      if (lane.progress_ns != INT64_MIN) {
        lane.progress_ns += busy_ns;
      }
      if (lane.held_offset >= 0) {  // held back: paused still
        rd_kafka_pause_partitions(rk.get(), partitionList(key).get());
      }
    }
    spdlog::info("kafka: partitions resumed");
    done.get();
  };

  auto flush = [&] {
    if (!batch.records.empty()) {
      handleWhilePolling();
    }
    ListPtr offsets(rd_kafka_topic_partition_list_new(static_cast<int>(next_offsets.size())));
    for (const auto& [tp, offset] : next_offsets) {
      rd_kafka_topic_partition_list_add(offsets.get(), config_.topics[tp.first].name.c_str(),
                                        tp.second)
          ->offset = offset;
    }
    rd_kafka_offsets_store(rk.get(), offsets.get());
    for (int i = 0; i < offsets->cnt; ++i) {
      const rd_kafka_topic_partition_t& p = offsets->elems[i];
      if (p.err == RD_KAFKA_RESP_ERR__STATE) {
        spdlog::info(
            "kafka: {}[{}] was revoked before its offset was stored; another member "
            "re-reads it",
            p.topic, p.partition);
      } else if (p.err) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("kafka: storing offset {} for {}[{}]: {}", p.offset, p.topic, p.partition,
                     rd_kafka_err2str(p.err));
      }
    }
    batch.clear();
    next_offsets.clear();
    pending = 0;
  };

  // Partitions read to their end at least once, until caught up.
  std::set<std::pair<std::string, int32_t>> at_end;
  int64_t next_catch_up_check_ns = 0;  // kCatchUpCheckNs
  // Each assigned partition's high watermark as first seen, until caught up: the end of the
  // backlog, read once the position passes it.
  std::map<std::pair<std::string, int32_t>, int64_t> ends;
  auto consume = [&](MessagePtr owned, int64_t now) {
    rd_kafka_message_t* const msg = owned.get();
    if (msg->err) {
      if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (caught_up_ != nullptr && !caught_up_->load() && msg->rkt != nullptr) {
          at_end.emplace(rd_kafka_topic_name(msg->rkt), msg->partition);
        }
        if (msg->rkt != nullptr) {  // at its end (a high watermark past control records too)
          const auto lane = lanes.find({topicIndex(rd_kafka_topic_name(msg->rkt)), msg->partition});
          if (lane != lanes.end()) {
            lane->second.more = false;
            place(lane->second);
          }
        }
      } else {
        errors_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("kafka: consume: {}", rd_kafka_message_errstr(msg));
      }
      return;
    }
    const std::string_view topic = rd_kafka_topic_name(msg->rkt);
    const size_t index = topicIndex(topic);
    if (index == config_.topics.size()) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("kafka: message from unsubscribed topic {}", topic);
      return;
    }
    const KafkaTopicConfig& cfg = config_.topics[index];
    const Key key{index, msg->partition};
    // Its lane (skew > 0), looked up once per message: null before its partition's first message.
    Lane* lane = nullptr;
    if (skew > 0) {
      if (const auto it = lanes.find(key); it != lanes.end()) {
        if (it->second.held_offset >= 0) {
          return;  // polled before its pause took effect: fetched again once released
        }
        lane = &it->second;
      }
    }
    const size_t first_record = batch.records.size();
    const size_t first_label = batch.labels.size();

    KafkaMessage km;
    km.value = {static_cast<const char*>(msg->payload), msg->len};
    km.key = {static_cast<const char*>(msg->key), msg->key_len};
    km.timestamp_ms = rd_kafka_message_timestamp(msg, nullptr);
    if (!cfg.node_header.empty()) {
      km.node_header = [m = msg, name = cfg.node_header.c_str()]() -> std::string_view {
        rd_kafka_headers_t* headers = nullptr;
        const void* value = nullptr;
        size_t size = 0;
        if (rd_kafka_message_headers(m, &headers) == 0 &&
            rd_kafka_header_get_last(headers, name, &value, &size) == 0 && value != nullptr) {
          return {static_cast<const char*>(value), size};
        }
        return {};
      };
    }
    // otlp_proto records point into the message: the decoder makes the batch hold it. Other
    // decoders copy, and the message goes when `msg` does, without an allocation.
    if (decoders_[index].pointsIntoMessages()) {
      km.owner = std::shared_ptr<const void>(owned.release(), [](const void* p) {
        rd_kafka_message_destroy(static_cast<rd_kafka_message_t*>(const_cast<void*>(p)));
      });
    }
    const bool decoded = decoders_[index].decode(km, now, &batch);
    if (skew > 0) {
      if (lane == nullptr) {
        // The partition's first message: the partitions assigned with it and not read yet hold
        // it, as the lane check (every kLaneCheckNs) would have them do; before it, the first
        // messages of one partition passed the others' older ones.
        forgetRevoked(now);
        lane = &lanes[key];
      }
      // The message's newest record time, as the pipeline takes it (kMaxAheadNs), so that a node
      // whose clock runs ahead holds no partition.
      int64_t t = INT64_MIN;
      for (size_t i = first_record; i < batch.records.size(); ++i) {
        t = std::max(t, std::min(batch.records[i].time_ns, now + kMaxAheadNs));
      }
      bool ahead = t != INT64_MIN && beyond(t, others(*lane));
      if (ahead) {  // judged again without the partitions revoked, which hold none
        forgetRevoked();
        lane = &lanes[key];  // erased if this partition was revoked too
        ahead = beyond(t, others(*lane));
      }
      if (ahead && holdBack(key, msg->offset)) {
        // Not kept: fetched and decoded again when released.
        batch.records.resize(first_record);
        batch.labels.resize(first_label);
        lane->held_offset = msg->offset;
        lane->held_ns = t;
        ++held_lanes;
        place(*lane);
        return;
      }
      lane->newest_ns = std::max(lane->newest_ns, t);
      lane->progress_ns = now;
      // The watermark only grows: below the one last read, more is known without asking
      // librdkafka (a lock and a lookup per message).
      if (msg->offset + 1 >= lane->high) {
        int64_t low = 0;
        if (rd_kafka_get_watermark_offsets(rk.get(), cfg.name.c_str(), msg->partition, &low,
                                           &lane->high) != RD_KAFKA_RESP_ERR_NO_ERROR) {
          lane->high = -1;
        }
      }
      lane->more = msg->offset + 1 < lane->high;
      place(*lane);
    }
    if (pending++ == 0) {
      deadline_ns = now + int64_t{config_.batch_timeout_ms} * 1'000'000;
    }
    next_offsets[key] = msg->offset + 1;
    counters_[index].messages.fetch_add(1, std::memory_order_relaxed);
    counters_[index].bytes.fetch_add(msg->len, std::memory_order_relaxed);
    if (!decoded) {
      counters_[index].malformed.fetch_add(1, std::memory_order_relaxed);
    }
  };

  // The clock is read per poll, not per message: a message polled in the same call is received
  // at the same time.
  int64_t now = nowNanos();
  int64_t next_lane_check_ns = 0;  // kLaneCheckNs
  // A fatal error (librdkafka: the consumer cannot go on, e.g. a static member fenced by another
  // with its group.instance.id) ends the run: a service that stayed up would read nothing.
  while (!stop.stop_requested() &&
         rd_kafka_fatal_error(rk.get(), nullptr, 0) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // Messages already polled first, one at a time, so that they count toward the batch's
    // bounds. With a batch open, take only what librdkafka has already fetched: a batch closes
    // when nothing more is queued (a light load is not held for batch_timeout_ms), at
    // batch_max_messages messages or as many records (an OTLP message holds a whole export
    // batch), at batch_max_bytes, or at its deadline under a steady trickle. The wait for a
    // batch's first message returns with it (rd_kafka_consume_batch_queue would wait out its
    // timeout to fill the array).
    if (skew > 0 && now >= next_lane_check_ns) {
      next_lane_check_ns = now + kLaneCheckNs;
      forgetRevoked(now);
    }
    if (ready.empty() && held_lanes > 0) {
      release();
    }
    if (ready.empty()) {
      if (pending == 0) {
        if (rd_kafka_message_t* first = rd_kafka_consumer_poll(rk.get(), kIdlePollMs)) {
          ready.emplace_back(first);
        }
      } else {
        // Only what the open batch can still take, by messages, and by records and bytes at its
        // messages' mean so far: a message taken from librdkafka's queue no longer counts toward
        // that queue's bound, so none may wait here while the batch is processed.
        size_t room = std::min(kPollBatch, config_.batch_max_messages - pending);
        if (const size_t records = batch.records.size(); records < config_.batch_max_messages) {
          room =
              std::min(room, (config_.batch_max_messages - records) / (records / pending + 1) + 1);
        }
        if (const size_t used = batch.memoryBytes(); used < config_.batch_max_bytes) {
          room = std::min(room, (config_.batch_max_bytes - used) / (used / pending + 1) + 1);
        }
        std::array<rd_kafka_message_t*, kPollBatch> polled{};
        const ssize_t n =
            rd_kafka_consume_batch_queue(consumer_queue.get(), 0, polled.data(), room);
        for (ssize_t i = 0; i < n; ++i) {
          ready.emplace_back(polled[static_cast<size_t>(i)]);
        }
      }
      now = nowNanos();
    }
    const bool drained = ready.empty();
    if (!drained) {
      MessagePtr msg = std::move(ready.front());
      ready.pop_front();
      consume(std::move(msg), now);
    }
    if (pending > 0 && (drained || pending >= config_.batch_max_messages ||
                        batch.records.size() >= config_.batch_max_messages ||
                        batch.memoryBytes() >= config_.batch_max_bytes || now >= deadline_ns)) {
      flush();
      now = nowNanos();  // the handler may have taken long
    }
    // Caught up: nothing held, and every assigned partition's end reached (its messages before
    // the end event were consumed, and handled by the flush above), or its position at the high
    // watermark first seen. The end event alone is not enough: librdkafka sends it only for a
    // fetch that comes back empty, and a broker holds a fetch at the end until a message
    // arrives (fetch.wait.max.ms), so a partition written to more often never sends it.
    if (caught_up_ != nullptr && !caught_up_->load() && pending == 0 && ready.empty() &&
        held_lanes == 0 && now >= next_catch_up_check_ns) {
      next_catch_up_check_ns = now + kCatchUpCheckNs;
      rd_kafka_topic_partition_list_t* raw = nullptr;
      if (rd_kafka_assignment(rk.get(), &raw) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const ListPtr assigned(raw);
        rd_kafka_position(rk.get(), assigned.get());  // after the last message polled
        bool all = assigned->cnt > 0;
        for (int i = 0; i < assigned->cnt; ++i) {
          const rd_kafka_topic_partition_t& p = assigned->elems[i];
          const std::pair<std::string, int32_t> tp{p.topic, p.partition};
          if (at_end.count(tp) != 0) {
            continue;
          }
          int64_t low = 0;
          int64_t high = -1;  // as of librdkafka's last fetch of the partition; none before
          if (rd_kafka_get_watermark_offsets(rk.get(), p.topic, p.partition, &low, &high) ==
                  RD_KAFKA_RESP_ERR_NO_ERROR &&
              high >= 0) {
            ends.emplace(tp, high);
          }
          const auto end = ends.find(tp);
          if (end != ends.end() && p.err == RD_KAFKA_RESP_ERR_NO_ERROR && p.offset >= end->second) {
            at_end.insert(tp);
          } else {
            all = false;
          }
        }
        if (all) {
          at_end.clear();
          ends.clear();
          caught_up_->store(true);
          spdlog::info("kafka: caught up: every assigned partition read to its end");
        }
      }
    }
  }
  if (pending > 0) {
    flush();
  }

  // Closing commits the offsets the last batches stored (auto commit runs on an interval, and at
  // the unassign of a close) and leaves the group; waited for kCloseWait at most.
  const QueuePtr close_queue(rd_kafka_queue_new(rk.get()));
  if (rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk.get(), close_queue.get())) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("kafka: close: {}", rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
  }
  const auto close_deadline = std::chrono::steady_clock::now() + kCloseWait;
  while (!rd_kafka_consumer_closed(rk.get()) && std::chrono::steady_clock::now() < close_deadline) {
    // Serves the close's queue as rd_kafka_consumer_close does: its rebalance (the unassign and
    // its commit) and callbacks. The consumer's queue is forwarded there, with the messages
    // fetched ahead of the last batch: they are dropped unread (no offset of theirs was stored,
    // so the group reads them again). rd_kafka_queue_poll_callback, which serves no messages,
    // aborted the process on one (librdkafka 2.0.2: assert in rd_kafka_q_serve).
    const MessagePtr ahead(rd_kafka_consume_queue(close_queue.get(), kIdlePollMs));
  }
  char fatal[512];
  const bool failed =
      rd_kafka_fatal_error(rk.get(), fatal, sizeof(fatal)) != RD_KAFKA_RESP_ERR_NO_ERROR;
  if (rd_kafka_consumer_closed(rk.get())) {
    spdlog::info("kafka: consumer closed");
  } else if (!failed) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "kafka: the consumer did not close (commit its offsets, leave its group) within {} s; "
        "left behind: the partitions' next owner reads from the last committed offsets",
        kCloseWait.count());
    // Not destroyed: librdkafka 2.0.2 destroying a consumer whose close has not finished spins a
    // core until it does. The handle is left to its threads until the process exits or executes
    // anew, as HandleDeleter leaves one that is not destroyed in time.
    static_cast<void>(rk.release());
  }
  if (failed) {
    // Destroyed (HandleDeleter), not left behind: a consumer after a fatal error does not close,
    // and its threads, left running, logged through loggers the process's exit had destroyed.
    throw std::runtime_error(std::string("kafka: the consumer cannot go on: ") + fatal);
  }
}

}  // namespace faultline

// kafka_load: produces kernel log lines into a Kafka topic as collectors send them (librdkafka
// producer, linger.ms 5, no compression), for bench/kafka_e2e.sh and bench/latency.sh.
//
//   kafka_load --brokers B --topic T --encoding raw|json|otlp_proto|otlp_json --input FILE
//              [--batch N] [--partitions P] [--rate LINES_PER_S --seconds S [--fault LINE
//               --fault-every-ms MS [--fault-after-ms A] --fault-nodes PREFIX --sent FILE]]
//
// FILE holds one "node<TAB>message" per line. Encodings (the shapes are in bench_records.h):
// raw, one message per line with the node in the `node` header (the OTel collector's raw
// encoding); json, one Fluent Bit systemd record per message; otlp_proto / otlp_json, one
// journald-receiver export batch of up to N (default 1000) records of one node per message, sent
// when it is full or 200 ms old (the batch processor's defaults are 8192 and 200 ms); each
// node's first batch is cut shorter, at a size and an age drawn from its name, so that nodes do
// not all send at once.
// Event times are the wall clock (CLOCK_REALTIME) when the line is produced. With --partitions
// the messages go to partitions 0..P-1 in turn, about 1 MB at a time (evenly filled, since the
// librdkafka mock cluster keeps only the last 5 MiB of each partition, and in large message sets,
// since the mock looks a fetch offset up by walking the partition's sets and returns one set per
// partition per fetch), else where librdkafka's partitioner puts them.
//
// Without --rate every line of FILE is produced once, as fast as the producer takes them, then
// the program waits for every delivery and prints "kafka_load: L lines in M messages, B bytes,
// S s" on stderr. With --rate the lines are produced in turn (from the top again at the end) at
// that many lines per second for S seconds; every MS ms from A ms on (default MS / 2) one fault
// line goes, alone in its message, to a node of its own (PREFIX-0000, PREFIX-0001, ...); at the
// end --sent gets "node<TAB>sent_ns<TAB>acked_ns" per fault, CLOCK_REALTIME just before the
// message is handed to librdkafka and when its delivery report arrived (the broker has it).
// Exit status: 0, 1 on a failed delivery or I/O error, 2 on bad arguments.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "bench/bench_records.h"
#include "bench/pace.h"

namespace {

using faultline::Line;
using faultline::realtimeNs;

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "kafka_load: " << error
            << "\nusage: kafka_load --brokers B --topic T --encoding raw|json|otlp_proto|otlp_json "
               "--input FILE [--batch N] [--partitions P] [--rate LINES_PER_S --seconds S "
               "[--fault LINE --fault-every-ms MS [--fault-after-ms A] --fault-nodes PREFIX "
               "--sent FILE]]\n";
  std::exit(2);
}

std::atomic<int> failed_deliveries{0};
// Per fault: when its delivery report arrived. Sized before producing; written only by the thread
// that serves the reports (a poller of its own while pacing, so that building messages does not
// delay the stamps), read after it stopped.
std::vector<int64_t> acked_ns;

// Fault messages carry their index + 1 as the message opaque.
void onDelivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* msg, void* /*opaque*/) {
  if (msg->err) {
    if (failed_deliveries++ == 0) {
      std::cerr << "kafka_load: delivery failed: " << rd_kafka_err2str(msg->err) << "\n";
    }
  } else if (msg->_private != nullptr) {
    acked_ns[reinterpret_cast<uintptr_t>(msg->_private) - 1] = realtimeNs();
  }
}

class Producer {
 public:
  Producer(const std::string& brokers, const std::string& topic, std::string encoding, size_t batch,
           int partitions)
      : topic_(topic),
        encoding_(std::move(encoding)),
        raw_(encoding_ == "raw"),
        batch_(batch),
        partitions_(partitions) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    for (const auto& [k, v] :
         std::map<std::string, std::string>{{"bootstrap.servers", brokers},
                                            {"linger.ms", "5"},
                                            {"queue.buffering.max.messages", "1000000"},
                                            {"message.max.bytes", "2000000"}}) {
      if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        usage(k + ": " + err);
      }
    }
    rd_kafka_conf_set_dr_msg_cb(conf, onDelivery);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      std::cerr << "kafka_load: " << err << "\n";
      std::exit(1);
    }
  }
  ~Producer() { rd_kafka_destroy(rk_); }

  // Adds one line; sends whatever message it completes.
  void add(const std::string& node, const std::string& message) {
    ++lines_;
    if (raw_) {
      send(message, node);
    } else if (encoding_ == "json") {
      send(faultline::fluentBitJson({node, realtimeNs(), message, seq_[node]++}), node);
    } else {
      auto [it, added] = pending_.try_emplace(node);
      Pending& p = it->second;
      if (added) {
        // A node's first batch ends early, at a size and an age drawn from its name, as
        // independent collectors' would: lines arrive round-robin, so equal batches would leave
        // every node at the same moment.
        const size_t h = std::hash<std::string>()(node);
        p.limit = 1 + h % batch_;
        p.head_start_ns = static_cast<int64_t>(h % 200) * 1'000'000;
      }
      const int64_t now = realtimeNs();
      if (p.messages.empty()) {
        p.first_ns = now;
      }
      p.messages.push_back(message);
      p.times.push_back(now);
      if (p.messages.size() >= p.limit) {
        sendBatch(node, p);
      }
    }
  }

  // Sends every OTLP batch older than `age_ns` (all of them for 0).
  void sendOld(int64_t age_ns) {
    const int64_t now = realtimeNs();
    for (auto& [node, p] : pending_) {
      if (!p.messages.empty() && now - p.first_ns + p.head_start_ns >= age_ns) {
        sendBatch(node, p);
      }
    }
  }

  // Sends fault `index`, `message`, alone in a message of its own; returns the time it was
  // handed over.
  int64_t sendAlone(const std::string& node, const std::string& message, size_t index) {
    ++lines_;
    const faultline::KernelEntry e{node, realtimeNs(), message, 0};
    std::string value;
    if (encoding_ == "raw") {
      value = message;
    } else if (encoding_ == "json") {
      value = faultline::fluentBitJson(e);
    } else if (encoding_ == "otlp_proto") {
      value = faultline::otlpRequest(&e, 1).SerializeAsString();
    } else {
      value = faultline::otlpJson(&e, 1);
    }
    const int64_t sent = realtimeNs();
    send(value, node, reinterpret_cast<void*>(index + 1));
    return sent;
  }

  // Serves delivery reports, waiting up to `ms` for one.
  void poll(int ms = 0) { rd_kafka_poll(rk_, ms); }
  bool flush() {
    sendOld(0);
    return rd_kafka_flush(rk_, 120'000) == RD_KAFKA_RESP_ERR_NO_ERROR && failed_deliveries == 0;
  }
  uint64_t lines() const { return lines_; }
  uint64_t messages() const { return messages_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Pending {
    size_t limit = 0;           // records that complete the batch
    int64_t head_start_ns = 0;  // taken off the batch's age
    int64_t first_ns = 0;
    std::vector<std::string> messages;
    std::vector<int64_t> times;
  };

  void sendBatch(const std::string& node, Pending& p) {
    std::vector<faultline::KernelEntry> entries;
    uint64_t& seq = seq_[node];
    for (size_t i = 0; i < p.messages.size(); ++i) {
      entries.push_back({node, p.times[i], p.messages[i], seq++});
    }
    send(encoding_ == "otlp_proto"
             ? faultline::otlpRequest(entries.data(), entries.size()).SerializeAsString()
             : faultline::otlpJson(entries.data(), entries.size()),
         node);
    p.messages.clear();
    p.times.clear();
    p.limit = batch_;
    p.head_start_ns = 0;
  }

  void send(const std::string& value, const std::string& node, void* opaque = nullptr) {
    if (partitions_ > 0 && run_bytes_ > 0 && run_bytes_ + value.size() > 1'000'000) {
      partition_ = (partition_ + 1) % partitions_;  // a run fills one producer batch (batch.size)
      run_bytes_ = 0;
    }
    run_bytes_ += value.size();
    for (;;) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          rk_, RD_KAFKA_V_TOPIC(topic_.c_str()),
          RD_KAFKA_V_PARTITION(partitions_ > 0 ? partition_ : RD_KAFKA_PARTITION_UA),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
          RD_KAFKA_V_HEADER("node", node.data(), static_cast<ssize_t>(node.size())),
          RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        break;
      }
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        std::cerr << "kafka_load: produce: " << rd_kafka_err2str(err) << "\n";
        std::exit(1);
      }
      rd_kafka_poll(rk_, 10);  // the local queue is full: let deliveries drain it
    }
    ++messages_;
    bytes_ += value.size();
  }

  rd_kafka_t* rk_ = nullptr;
  std::string topic_;
  std::string encoding_;
  bool raw_;
  size_t batch_;
  int partitions_;
  int32_t partition_ = 0;  // where the current run goes
  size_t run_bytes_ = 0;
  std::map<std::string, uint64_t> seq_;  // per node: the journal cursor of its entries
  std::map<std::string, Pending> pending_;
  uint64_t lines_ = 0;
  uint64_t messages_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  faultline::PaceArgs args(argc, argv, usage);
  auto get = [&](const std::string& k, const std::string& dflt = "") { return args.get(k, dflt); };
  const std::string brokers = get("--brokers");
  const std::string topic = get("--topic");
  const std::string encoding = get("--encoding");
  if (encoding != "raw" && encoding != "json" && encoding != "otlp_proto" &&
      encoding != "otlp_json") {
    usage("unknown encoding " + encoding);
  }
  const std::string input = get("--input");
  const size_t batch = std::stoul(get("--batch", "1000"));
  const int partitions = std::stoi(get("--partitions", "0"));
  const double rate = std::stod(get("--rate", "0"));
  const double seconds = rate > 0 ? std::stod(get("--seconds")) : 0;
  const bool faults = rate > 0 && args.has("--fault");
  const std::string fault = faults ? get("--fault") : "";
  const int64_t fault_every_ns =
      faults ? static_cast<int64_t>(std::stod(get("--fault-every-ms")) * 1e6) : 0;
  const int64_t fault_after_ns =
      faults && args.has("--fault-after-ms")
          ? static_cast<int64_t>(std::stod(get("--fault-after-ms")) * 1e6)
          : fault_every_ns / 2;
  const std::string fault_nodes = faults ? get("--fault-nodes") : "";
  const std::string sent_path = faults ? get("--sent") : "";
  args.finish();

  std::vector<Line> lines;
  if (!faultline::readLines(input, &lines)) {
    std::cerr << "kafka_load: cannot read " << input << " or it has no node<TAB>message line\n";
    return 1;
  }
  Producer producer(brokers, topic, encoding, batch, partitions);
  std::vector<std::string> fault_names;
  std::vector<int64_t> fault_sent_ns;
  const auto start = std::chrono::steady_clock::now();
  if (rate <= 0) {
    for (const Line& l : lines) {
      producer.add(l.node, l.message);
      if (producer.lines() % 1024 == 0) {
        producer.poll();
      }
    }
  } else {
    const int64_t duration_ns = static_cast<int64_t>(seconds * 1e9);
    if (faults) {
      acked_ns.resize(static_cast<size_t>(
          std::max<int64_t>(0, (duration_ns - fault_after_ns) / fault_every_ns + 1)));
    }
    std::atomic<bool> pacing{true};
    std::thread poller([&] {
      while (pacing) {
        producer.poll(10);
      }
    });
    uint64_t produced = 0;
    int64_t next_fault_ns = fault_after_ns;
    for (;;) {
      const int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
      if (elapsed >= duration_ns) {
        break;
      }
      if (faults && elapsed >= next_fault_ns && fault_names.size() < acked_ns.size()) {
        char name[64];
        std::snprintf(name, sizeof name, "%s-%04zu", fault_nodes.c_str(), fault_names.size());
        fault_names.emplace_back(name);
        fault_sent_ns.push_back(producer.sendAlone(name, fault, fault_names.size() - 1));
        next_fault_ns += fault_every_ns;
      }
      const auto due = static_cast<uint64_t>(rate * static_cast<double>(elapsed) / 1e9);
      for (; produced < due; ++produced) {
        const Line& l = lines[produced % lines.size()];
        producer.add(l.node, l.message);
      }
      producer.sendOld(200'000'000);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    pacing = false;
    poller.join();
  }
  const bool ok = producer.flush();
  if (faults && !faultline::writeSent(sent_path, fault_names, fault_sent_ns, acked_ns)) {
    std::cerr << "kafka_load: cannot write " << sent_path << "\n";
    return 1;
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "kafka_load: %llu lines in %llu messages, %llu bytes, %.2f s\n",
               static_cast<unsigned long long>(producer.lines()),
               static_cast<unsigned long long>(producer.messages()),
               static_cast<unsigned long long>(producer.bytes()), took);
  return ok ? 0 : 1;
}

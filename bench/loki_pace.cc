// loki_pace: pushes kernel log lines to faultline's Loki endpoint at a steady rate, with fault
// lines at known times, for bench/latency.sh.
//
//   loki_pace --url http://HOST:PORT --input FILE --rate LINES_PER_S --seconds S
//             [--fault LINE --fault-every-ms MS --fault-after-ms A --fault-nodes PREFIX
//              --sent FILE]
//
// FILE holds one "node<TAB>message" per line. Two sender threads, each on its own keep-alive
// connection, post the lines in turn (from the top again at the end) as Promtail does: POST
// /loki/api/v1/push, a PushRequest protobuf in snappy block format holding 1000 lines, one stream
// {job="node-journal", node=NODE, transport="kernel"} per node; each line stamped with the wall
// clock when its request is built. A request goes out as soon as 1000 lines are due at RATE
// lines/s; a 429 is retried after its Retry-After. With --rate 0 the lines of FILE are sent once,
// as fast as faultline answers. Every MS ms from A ms on, the main thread posts one fault line
// alone, on a connection of its own, for a node of its own (PREFIX-0000, ...); at the end --sent
// gets "node<TAB>sent_ns<TAB> answered_ns" per fault: CLOCK_REALTIME just before the request and
// when its 204 came back. Prints "loki_pace: L lines in Q requests, B bytes, K answered 429, S s"
// on stderr. Exit status: 0; 1 on another answer than 204 or 429, or a connection error; 2 on bad
// arguments.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <snappy.h>

#include "bench/pace.h"
#include "loki/push.pb.h"

namespace {

using faultline::Line;
using faultline::realtimeNs;

constexpr size_t kBatch = 1000;
constexpr int kSenders = 2;  // connections for the background, so that one answer's wait does
                             // not hold the rate back

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "loki_pace: " << error
            << "\nusage: loki_pace --url URL --input FILE --rate LINES_PER_S --seconds S "
               "[--fault LINE --fault-every-ms MS --fault-after-ms A --fault-nodes PREFIX "
               "--sent FILE]\n";
  std::exit(2);
}

// A snappy PushRequest of lines [begin, end) of `lines` (modulo its size), one stream per node.
std::string body(const std::vector<Line>& lines, uint64_t begin, uint64_t end) {
  logproto::PushRequest req;
  std::map<std::string, logproto::StreamAdapter*> streams;
  const int64_t now = realtimeNs();
  for (uint64_t i = begin; i < end; ++i) {
    const Line& l = lines[i % lines.size()];
    logproto::StreamAdapter*& s = streams[l.node];
    if (s == nullptr) {
      s = req.add_streams();
      s->set_labels("{job=\"node-journal\", node=\"" + l.node + "\", transport=\"kernel\"}");
    }
    logproto::EntryAdapter* e = s->add_entries();
    e->mutable_timestamp()->set_seconds(now / 1'000'000'000);
    e->mutable_timestamp()->set_nanos(static_cast<int32_t>(now % 1'000'000'000));
    e->set_line(l.message);
  }
  std::string compressed;
  const std::string raw = req.SerializeAsString();
  snappy::Compress(raw.data(), raw.size(), &compressed);
  return compressed;
}

// Posts until faultline takes it; false on anything but 204 after 429s.
bool post(httplib::Client& client, const std::string& b, std::atomic<uint64_t>* retried) {
  for (;;) {
    const httplib::Result r = client.Post("/loki/api/v1/push", b, "application/x-protobuf");
    if (r && r->status == 204) {
      return true;
    }
    if (!r || r->status != 429) {
      std::cerr << "loki_pace: push answered "
                << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()))
                << "\n";
      return false;
    }
    ++*retried;
    std::this_thread::sleep_for(
        std::chrono::seconds(std::max(1, std::atoi(r->get_header_value("Retry-After").c_str()))));
  }
}

}  // namespace

int main(int argc, char** argv) {
  faultline::PaceArgs args(argc, argv, usage);
  auto get = [&](const std::string& k) { return args.get(k); };
  const std::string url = get("--url");
  const std::string input = get("--input");
  const double rate = std::stod(get("--rate"));
  const double seconds = rate > 0 ? std::stod(get("--seconds")) : 0;
  const bool faults = args.has("--fault");
  const std::string fault = faults ? get("--fault") : "";
  const int64_t fault_every_ns = faults ? std::stoll(get("--fault-every-ms")) * 1'000'000 : 0;
  const int64_t fault_after_ns = faults ? std::stoll(get("--fault-after-ms")) * 1'000'000 : 0;
  const std::string fault_nodes = faults ? get("--fault-nodes") : "";
  const std::string sent_path = faults ? get("--sent") : "";
  args.finish();
  if (faults && rate <= 0) {
    usage("faults need --rate");
  }

  std::vector<Line> lines;
  if (!faultline::readLines(input, &lines)) {
    std::cerr << "loki_pace: cannot read " << input << " or it has no node<TAB>message line\n";
    return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  auto elapsedNs = [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start)
        .count();
  };
  const int64_t duration_ns = static_cast<int64_t>(seconds * 1e9);
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> retried{0};
  // Senders claim the batches in turn and post each once it is due, on their own connections.
  const uint64_t total = rate > 0 ? UINT64_MAX : lines.size();
  std::atomic<uint64_t> next_batch{0};
  std::atomic<uint64_t> sent_lines{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  auto send = [&] {
    httplib::Client client(url);
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);  // else the body waits for the ACK of the headers (40 ms)
    client.set_read_timeout(60, 0);
    while (!failed) {
      const uint64_t begin = next_batch++ * kBatch;
      if (begin >= total) {
        break;
      }
      const uint64_t end = std::min(begin + kBatch, total);
      int64_t elapsed = elapsedNs();
      while (rate > 0 && rate * static_cast<double>(elapsed) / 1e9 < static_cast<double>(end) &&
             elapsed < duration_ns) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        elapsed = elapsedNs();
      }
      if (rate > 0 && elapsed >= duration_ns) {
        break;
      }
      const std::string b = body(lines, begin, end);
      if (!post(client, b, &retried)) {
        failed = true;
      }
      sent_lines += end - begin;
      ++requests;
      bytes += b.size();
    }
  };
  std::vector<std::thread> senders;
  for (int i = 0; i < kSenders; ++i) {
    senders.emplace_back(send);
  }

  std::vector<std::string> names;
  std::vector<int64_t> sent_ns;
  std::vector<int64_t> answered_ns;
  if (faults) {
    httplib::Client client(url);
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    for (int64_t at = fault_after_ns; at < duration_ns && !failed; at += fault_every_ns) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(0, at - elapsedNs())));
      char name[64];
      std::snprintf(name, sizeof name, "%s-%04zu", fault_nodes.c_str(), names.size());
      names.emplace_back(name);
      const std::vector<Line> one = {{name, fault}};
      const std::string b = body(one, 0, 1);
      sent_ns.push_back(realtimeNs());
      if (!post(client, b, &retried)) {
        failed = true;
      }
      answered_ns.push_back(realtimeNs());
    }
  }
  for (std::thread& t : senders) {
    t.join();
  }
  const double took = static_cast<double>(elapsedNs()) / 1e9;
  if (faults && !faultline::writeSent(sent_path, names, sent_ns, answered_ns)) {
    std::cerr << "loki_pace: cannot write " << sent_path << "\n";
    return 1;
  }
  std::fprintf(stderr,
               "loki_pace: %llu lines in %llu requests, %llu bytes, %llu answered 429, %.2f s\n",
               static_cast<unsigned long long>(sent_lines.load() + names.size()),
               static_cast<unsigned long long>(requests.load() + names.size()),
               static_cast<unsigned long long>(bytes.load()),
               static_cast<unsigned long long>(retried.load()), took);
  return failed ? 1 : 0;
}

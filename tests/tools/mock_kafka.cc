// mock_kafka: a librdkafka built-in mock cluster for end-to-end tests (rdkafka_mock.h, librdkafka
// 2.0.2: confluentinc/librdkafka v2.0.2 src/rdkafka_mock.h). Its brokers are real TCP listeners on
// 127.0.0.1, so kcat and the faultline service can connect.
//
//   mock_kafka [--brokers N] [--topic name:partitions]... [--bootstrap-file F]
//
// Prints the bootstrap servers ("127.0.0.1:port[,...]") on stdout and, if asked, writes them to
// F (atomically, via rename, so a poller never reads half a line). Runs until SIGTERM or SIGINT,
// then destroys the cluster. Exit status 2 on bad arguments, 1 if the cluster cannot start.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>

namespace {

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "mock_kafka: " << error
            << "\nusage: mock_kafka [--brokers N] [--topic name:partitions]... "
               "[--bootstrap-file F]\n";
  std::exit(2);
}

int positive(const std::string& text, const std::string& what) {
  try {
    size_t end = 0;
    const int n = std::stoi(text, &end);
    if (end == text.size() && n > 0) {
      return n;
    }
  } catch (const std::exception&) {
  }
  usage(what + " must be a positive integer, got '" + text + "'");
}

}  // namespace

int main(int argc, char** argv) {
  int brokers = 1;
  std::vector<std::pair<std::string, int>> topics;
  std::string bootstrap_file;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      usage("missing value for " + arg);
    }
    const std::string value = argv[++i];
    if (arg == "--brokers") {
      brokers = positive(value, "--brokers");
    } else if (arg == "--topic") {
      const size_t colon = value.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        usage("--topic expects name:partitions, got '" + value + "'");
      }
      topics.emplace_back(value.substr(0, colon),
                          positive(value.substr(colon + 1), "--topic partitions"));
    } else if (arg == "--bootstrap-file") {
      bootstrap_file = value;
    } else {
      usage("unknown argument " + arg);
    }
  }

  // Block the signals before librdkafka starts its threads, so that they inherit the mask and
  // sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The mock cluster needs a client handle for bookkeeping; this producer never produces (and
  // logs a harmless "No bootstrap.servers configured" warning).
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof(err));
  if (rk == nullptr) {
    std::cerr << "mock_kafka: rd_kafka_new: " << err << "\n";
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (cluster == nullptr) {
    std::cerr << "mock_kafka: cannot create the mock cluster\n";
    rd_kafka_destroy(rk);
    return 1;
  }
  int status = 0;
  for (const auto& [name, partitions] : topics) {
    if (rd_kafka_resp_err_t e =
            rd_kafka_mock_topic_create(cluster, name.c_str(), partitions, std::min(brokers, 3))) {
      std::cerr << "mock_kafka: topic " << name << ": " << rd_kafka_err2str(e) << "\n";
      status = 1;
    }
  }

  const std::string bootstraps = rd_kafka_mock_cluster_bootstraps(cluster);
  if (status == 0 && !bootstrap_file.empty()) {
    const std::string tmp = bootstrap_file + ".tmp";
    std::ofstream(tmp) << bootstraps << "\n";
    if (std::rename(tmp.c_str(), bootstrap_file.c_str()) != 0) {
      std::cerr << "mock_kafka: cannot write " << bootstrap_file << "\n";
      status = 1;
    }
  }
  if (status == 0) {
    std::cout << bootstraps << std::endl;
    int sig = 0;
    sigwait(&signals, &sig);
  }

  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(rk);
  return status;
}

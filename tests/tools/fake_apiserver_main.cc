// fake_apiserver: runs FakeApiServer (tests/tools/fake_apiserver.h) on 127.0.0.1 until SIGTERM
// or SIGINT, for end-to-end tests that drive it with kubectl or curl.
//
//   fake_apiserver [--port N] [--port-file F] [--nodes n1,n2,...] [--labels k=v,k2=v2]
//                  [--tls-cert PEM --tls-key PEM]
//
// With --tls-cert and --tls-key it serves HTTPS, so clients verify it against a CA as they verify
// a real API server.
// --labels puts the labels on every node of --nodes (e.g. nvidia.com/gpu.present=true, which
// makes them eligible for faultline's taints). --port 0 (the default) picks a free port;
// --port-file then tells the caller which one. The file is written atomically (rename), so its
// appearance means the server is accepting.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "tests/tools/fake_apiserver.h"

int main(int argc, char** argv) {
  CLI::App app{"Fake Kubernetes API server (nodes only) for tests, on 127.0.0.1"};
  int port = 0;
  std::string port_file;
  std::string nodes;
  app.add_option("--port", port, "port to listen on, 0 = any free port");
  app.add_option("--port-file", port_file, "write the chosen port to this file");
  app.add_option("--nodes", nodes, "comma-separated node names to create");
  std::string labels;
  app.add_option("--labels", labels, "comma-separated key=value labels of every created node");
  std::string tls_cert;
  std::string tls_key;
  app.add_option("--tls-cert", tls_cert, "serve HTTPS with this PEM certificate")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "the certificate's PEM private key")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  if (tls_cert.empty() != tls_key.empty()) {
    std::fprintf(stderr, "fake_apiserver: --tls-cert and --tls-key go together\n");
    return 2;
  }

  // Block the signals in every thread (the server's inherit the mask) and take them in sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<faultline::FakeApiServer> owned;
  try {
    owned = std::make_unique<faultline::FakeApiServer>(tls_cert, tls_key);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  faultline::FakeApiServer& server = *owned;
  nlohmann::json label_map = nlohmann::json::object();
  std::istringstream pairs(labels);
  for (std::string pair; std::getline(pairs, pair, ',');) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "fake_apiserver: --labels wants key=value, got '%s'\n", pair.c_str());
      return 1;
    }
    label_map[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  std::istringstream names(nodes);
  for (std::string name; std::getline(names, name, ',');) {
    nlohmann::json metadata = {{"name", name}};
    if (!label_map.empty()) {
      metadata["labels"] = label_map;
      metadata["labels"]["kubernetes.io/hostname"] = name;
    }
    if (!name.empty() && !server.createNode({{"metadata", metadata}})) {
      std::fprintf(stderr, "fake_apiserver: cannot create node '%s'\n", name.c_str());
      return 1;
    }
  }
  try {
    port = server.start(port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::perror("fake_apiserver: writing the port file");
      return 1;
    }
  }
  std::fprintf(stderr, "fake_apiserver: listening on %s\n", server.url().c_str());

  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "fake_apiserver: signal %d, stopping\n", signal);
  server.stop();
  return 0;
}

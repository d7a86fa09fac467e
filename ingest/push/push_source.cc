#include "ingest/push/push_source.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <snappy.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "core/yaml_read.h"
#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"
#include "ingest/push/inflate.h"
#include "ingest/push/loki.h"

namespace faultline {
namespace {

// A refusal's reason for the log: it may quote the client's bytes (a label name, a header), so at
// most 300 bytes, each control byte as \xNN: no forged line, no terminal escape.
std::string loggable(std::string_view reason) {
  constexpr size_t kMax = 300;
  std::string out;
  for (const char c : reason.substr(0, kMax)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return reason.size() > kMax ? out + "..." : out;
}

bool isPushPath(std::string_view path) {
  return path == "/loki/api/v1/push" || path == "/v1/logs";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The media type of a Content-Type header, lower case, without parameters.
std::string mediaType(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && t.back() == ' ') {
    t.pop_back();
  }
  return t;
}

// google.rpc.Status (googleapis google/rpc/status.proto: int32 code = 1; string message = 2),
// the body of OTLP/HTTP error answers, encoded by hand: two fields.
std::string rpcStatusProto(int code, const std::string& message) {
  std::string out;
  out.push_back(0x08);  // field 1, varint
  out.push_back(static_cast<char>(code));
  out.push_back(0x12);  // field 2, length-delimited
  for (size_t n = message.size();; n >>= 7) {
    out.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
    if (n <= 0x7f) {
      break;
    }
  }
  return out + message;
}

// gRPC status codes (grpc/grpc doc/statuscodes.md) for the HTTP statuses we answer.
int rpcCode(int http_status) {
  switch (http_status) {
    case 401:
      return 16;  // UNAUTHENTICATED
    case 413:
    case 429:
      return 8;  // RESOURCE_EXHAUSTED
    case 503:
      return 14;  // UNAVAILABLE
    default:
      return 3;  // INVALID_ARGUMENT
  }
}

// Reads "host:port" ("[::]:3100" too) at `path`; throws naming `path`.
void readHostPort(const YAML::Node& n, const std::string& path, std::string* host_out,
                  int* port_out) {
  std::string listen = stringAt(n, path);
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      port = std::stoi(listen.substr(colon + 1), &used);
      if (used != listen.size() - colon - 1) {
        port = -1;
      }
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port < 0 || port > 65535 || colon == 0) {
    failAt(n, path, "expected host:port, got '" + listen + "'");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::]:3100
  }
  *host_out = host;
  *port_out = port;
}

}  // namespace

PushConfig PushConfig::fromYaml(const YAML::Node& node) {
  checkKeys(node, "http.",
            {"listen", "probe_listen", "max_body_bytes", "max_line_bytes", "threads", "token_file",
             "labels"});
  PushConfig config;
  if (const YAML::Node n = node["listen"]) {
    readHostPort(n, "http.listen", &config.host, &config.port);
  }
  if (const YAML::Node n = node["probe_listen"]) {
    readHostPort(n, "http.probe_listen", &config.probe_host, &config.probe_port);
  }
  if (const YAML::Node n = node["max_body_bytes"]) {
    config.max_body_bytes = integerAt<size_t>(n, "http.max_body_bytes", 1);
  }
  if (const YAML::Node n = node["max_line_bytes"]) {
    config.max_line_bytes = integerAt<size_t>(n, "http.max_line_bytes", 1);
  }
  if (const YAML::Node n = node["threads"]) {
    config.threads = integerAt<size_t>(n, "http.threads", 1);
  }
  if (const YAML::Node n = node["token_file"]) {
    config.token_file = stringAt(n, "http.token_file");
  }
  if (const YAML::Node labels = node["labels"]) {
    checkKeys(labels, "http.labels.", {"node", "pod", "kernel"});
    for (const auto& kv : labels) {
      const std::string key = kv.first.Scalar();
      const std::string path = "http.labels." + key;
      if (key == "node") {
        config.streams.node_labels = stringsAt(kv.second, path, false);
      } else if (key == "pod") {
        config.streams.pod_labels = stringsAt(kv.second, path, false);
      } else {  // kernel
        if (!kv.second.IsSequence()) {
          failAt(kv.second, path, "expected a list of {name, value}");
        }
        config.streams.kernel_labels.clear();
        for (size_t i = 0; i < kv.second.size(); ++i) {
          const YAML::Node e = kv.second[i];
          const std::string at = path + "[" + std::to_string(i) + "]";
          if (!e.IsMap() || !e["name"] || !e["value"] || e.size() != 2) {
            failAt(e, at, "expected {name: ..., value: ...}");
          }
          config.streams.kernel_labels.emplace_back(stringAt(e["name"], at + ".name"),
                                                    stringAt(e["value"], at + ".value"));
        }
      }
    }
  }
  return config;
}

PushServer::PushServer(PushConfig config, BatchQueue* queue, Metrics* metrics,
                       std::function<bool()> ready, std::function<std::string()> leader_elsewhere)
    : config_(std::move(config)),
      queue_(queue),
      metrics_(metrics),
      ready_(std::move(ready)),
      leader_elsewhere_(std::move(leader_elsewhere)) {
  using T = Metrics::Type;
  metrics_->declare("faultline_records_total", T::kCounter,
                    "Records accepted, by source and format");
  metrics_->declare("faultline_bytes_total", T::kCounter,
                    "Bytes in, by source and format: push request bodies after "
                    "Content-Encoding, Kafka message values");
  metrics_->declare("faultline_records_rejected_total", T::kCounter,
                    "Records dropped from accepted requests, by source and format: OTLP log "
                    "records without a usable line (partial success), and records whose labels "
                    "or attributes name no node");
  metrics_->declare("faultline_lines_truncated_total", T::kCounter,
                    "Lines cut to max_line_bytes, by source");
  metrics_->declare("faultline_push_requests_rejected_total", T::kCounter,
                    "Push requests answered with an error, by reason");
}

PushServer::~PushServer() {
  stop();
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Idle keep-alive connections hold no thread: each waits in the io_context (an async_wait for
// readable data, with an idle timer) and, once a request starts, one of the threads reads, answers
// and writes it synchronously, then sets the connection waiting again. So at most one request per
// thread is in flight (the memory bound in core/serve_loop.h), and any number of agents may keep
// connections open.
struct PushServer::Listener {
  static constexpr auto kIdle = std::chrono::seconds(120);  // as Loki's http-idle-timeout
  static constexpr size_t kReadBytes = 64 << 10;            // per read of the socket
  // Bytes/s a body must average past its first read_timeout: a bound on the whole body that a
  // client on a slow link (512 kbit/s) meets whatever its size, where a fixed one would refuse
  // large bodies; holding a thread longer costs a client that much upload per thread.
  static constexpr uint64_t kMinBodyRate = 64 << 10;

  // One connection; its handlers run one at a time (a strand), so the timer and the wait never
  // race.
  struct Connection {
    explicit Connection(tcp::socket s) : socket(std::move(s)), idle(socket.get_executor()) {}
    tcp::socket socket;
    asio::steady_timer idle;
    // What was read and not yet parsed: a part of a header, a chunk's size line or trailer, or a
    // pipelined request. Bounded, as Beast bounds only the header (8 KiB) and the body: a chunk
    // line or trailer that never ends (a client sending fast) was buffered whole. Over the bound:
    // buffer_overflow, a 400.
    beast::flat_buffer buffer{kReadBytes};
  };

  // Beast's string_body for reading a request, but each piece is appended: string_body's resize()
  // zero-fills what the copy then overwrites (3% of serve's CPU on OTLP JSON push).
  struct StringAppendBody {
    using value_type = std::string;
    class reader {  // NOLINT(readability-identifier-naming): the name Beast's Body requires
     public:
      template <bool kIsRequest, class Fields>
      reader(http::header<kIsRequest, Fields>& /*header*/, std::string& body) : body_(body) {}
      void init(const boost::optional<uint64_t>& /*length*/, beast::error_code& ec) { ec = {}; }
      template <class Buffers>
      size_t put(const Buffers& buffers, beast::error_code& ec) {
        size_t n = 0;
        for (const auto b : beast::buffers_range_ref(buffers)) {
          body_.append(static_cast<const char*>(b.data()), b.size());
          n += b.size();
        }
        ec = {};
        return n;
      }
      void finish(beast::error_code& ec) { ec = {}; }

     private:
      std::string& body_;
    };
  };

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  tcp::acceptor acceptor{io};
  std::atomic<bool> stopping{false};

  // The connection's socket for Beast's reads: asio's synchronous reads have no timeout, so each
  // read first waits for data, at most `pause` and never past `deadline` (then fails with
  // timed_out). The deadline bounds the whole request: with `pause` alone, a client sending a
  // byte every 9 s held a thread for ever.
  struct TimedReads {
    using Clock = std::chrono::steady_clock;
    tcp::socket& socket;
    std::chrono::milliseconds pause;  // the longest wait for the next bytes
    Clock::time_point deadline;
    uint64_t min_rate = 0;    // bytes/s; each byte read moves the deadline on by 1/min_rate s
    template <class Buffers>  // read_some: the name Beast's SyncReadStream requires
    // NOLINTNEXTLINE(readability-identifier-naming)
    size_t read_some(const Buffers& buffers, beast::error_code& ec) {
      pollfd p{socket.native_handle(), POLLIN, 0};
      int ready = 0;
      do {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
          break;
        }
        ready = ::poll(&p, 1, static_cast<int>(std::min(left, pause).count()));
      } while (ready < 0 && errno == EINTR);
      if (ready <= 0) {
        ec = asio::error::timed_out;
        return 0;
      }
      const size_t n = socket.read_some(buffers, ec);
      if (min_rate > 0) {
        deadline += std::chrono::nanoseconds(n * 1000000000 / min_rate);
      }
      return n;
    }
    template <class Buffers>
    // NOLINTNEXTLINE(readability-identifier-naming)
    size_t read_some(const Buffers& buffers) {
      beast::error_code ec;
      const size_t n = read_some(buffers, ec);
      if (ec) {
        throw beast::system_error(ec);
      }
      return n;
    }
  };

  void accept(PushServer& server) {
    acceptor.async_accept(asio::make_strand(io), [this, &server](beast::error_code ec,
                                                                 tcp::socket socket) {
      if (ec == asio::error::operation_aborted) {
        return;  // stopped
      }
      if (ec) {
        spdlog::warn("http: accept: {}", ec.message());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // e.g. out of descriptors
      } else {
        socket.set_option(tcp::no_delay(true), ec);  // answers are small; never wait for an ACK
        auto c = std::make_shared<Connection>(std::move(socket));
        c->buffer.reserve(kReadBytes);  // Beast reads at most the buffer's free space (>= 512 B)
        waitForRequest(server, c);
      }
      accept(server);
    });
  }

  // Serves the connection's next request once its bytes arrive; closes it after kIdle without.
  void waitForRequest(PushServer& server, const std::shared_ptr<Connection>& c) {
    if (c->buffer.size() > 0) {  // a pipelined request, already read
      asio::post(c->socket.get_executor(), [this, &server, c] { serve(server, c); });
      return;
    }
    c->idle.expires_after(kIdle);
    c->idle.async_wait([c](beast::error_code ec) {
      // Unless cancelled, or already re-armed for a later wait after a request that came in time.
      if (!ec && c->idle.expiry() <= std::chrono::steady_clock::now()) {
        beast::error_code ignored;
        c->socket.cancel(ignored);  // ends the wait below
      }
    });
    c->socket.async_wait(tcp::socket::wait_read, [this, &server, c](beast::error_code ec) {
      c->idle.cancel();
      if (!ec) {
        serve(server, c);
      }
    });
  }

  // Reads, answers and writes one request, then waits for the next one or closes.
  void serve(PushServer& server, const std::shared_ptr<Connection>& c) {
    tcp::socket& socket = c->socket;
    TimedReads stream{socket, server.config_.read_timeout,
                      TimedReads::Clock::now() + server.config_.read_timeout};
    beast::error_code ec;
    http::request_parser<StringAppendBody> parser;
    parser.body_limit(server.config_.max_body_bytes);
    http::read_header(stream, c->buffer, parser, ec);
    // A Content-Length over body_limit fails here, the body unread.
    bool over_limit = ec == http::error::body_limit;
    if (ec && !over_limit) {
      if (!clientGone(ec)) {
        refuseMalformed(server, socket, 11, "malformed request: " + ec.message());  // HTTP/1.1
      }
      return;
    }
    const auto& fields = parser.get();
    Request req;
    req.method = std::string(fields.method_string());
    req.path = std::string(fields.target().substr(0, fields.target().find('?')));
    req.content_type = std::string(fields[http::field::content_type]);
    req.content_encoding = std::string(fields[http::field::content_encoding]);
    req.authorization = std::string(fields[http::field::authorization]);
    req.tenant = std::string(fields["X-Scope-OrgID"]);
    // Only an authorized push's body is read: anyone who can reach the port could else make the
    // server hold threads × max_body_bytes with bodies it refuses. Another request's body is
    // left unread, and its connection closed after the answer.
    const bool unread = !parser.is_done() &&
                        !(req.method == "POST" && isPushPath(req.path) && server.authorized(req));
    if (!over_limit && !unread) {
      if (beast::iequals(fields[http::field::expect], "100-continue")) {
        http::response<http::empty_body> go_on{http::status::continue_, fields.version()};
        http::write(socket, go_on, ec);
      }
      // One allocation for the body and the JSON decoders' padding (read_header refused a
      // Content-Length over max_body_bytes).
      if (const auto length = parser.content_length()) {
        parser.get().body().reserve(*length + kJsonPadding);
      }
      stream.deadline = TimedReads::Clock::now() + server.config_.read_timeout;
      stream.min_rate = kMinBodyRate;
      http::read(stream, c->buffer, parser, ec);
      over_limit = ec == http::error::body_limit;
      if (clientGone(ec)) {
        return;
      }
      if (ec && !over_limit) {
        refuseMalformed(server, socket, fields.version(),
                        "malformed request body: " + ec.message());
        return;
      }
    }
    req.body_over_limit = over_limit;
    req.body = std::move(parser.get().body());
    Response res;
    try {
      res = server.answer(req);
    } catch (const std::exception& e) {  // e.g. out of memory: this request fails, not the server
      spdlog::error("http: {} {}: {}", req.method, req.path, e.what());
      server.countRejected("internal");
      res = {500, "text/plain", std::string("internal error: ") + e.what() + "\n", {}};
    }
    // An unread body leaves the connection unusable.
    const bool keep =
        parser.get().keep_alive() && !over_limit && !unread && !stopping && !res.close;
    if (!writeAnswer(socket, fields.version(), keep, std::move(res))) {
      return;
    }
    if (!keep) {
      // A client that asked to close, its request read whole, sends nothing more: closed now (the
      // socket with the connection), where waiting for its close held the thread.
      if (parser.get().keep_alive() || over_limit || unread || c->buffer.size() > 0) {
        closeAfterAnswer(socket);
      }
      return;
    }
    waitForRequest(server, c);
  }

  // Whether a read failed because the client left or stalled: nobody to answer.
  static bool clientGone(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == asio::error::timed_out ||
           ec == asio::error::connection_reset || ec == asio::error::eof;
  }

  // Answers 400 to what is not HTTP (the connection is closed after), and counts it.
  static void refuseMalformed(PushServer& server, tcp::socket& socket, unsigned version,
                              const std::string& reason) {
    server.countRejected("malformed");
    writeAnswer(socket, version, false, {400, "text/plain", reason + "\n", {}});
    closeAfterAnswer(socket);
  }

  // Closing a socket with unread data resets the connection, and the client may lose the answer
  // before reading it; so the rest of what it sends (a refused body) is read and dropped until it
  // stops sending, for at most 5 s.
  static void closeAfterAnswer(tcp::socket& socket) {
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 65536> sink{};
    TimedReads reads{socket, std::chrono::seconds(1),
                     TimedReads::Clock::now() + std::chrono::seconds(5)};
    while (reads.read_some(asio::buffer(sink), ec) > 0 && !ec) {
    }
  }

  static bool writeAnswer(tcp::socket& socket, unsigned version, bool keep_alive, Response res) {
    auto out = message(version, keep_alive, std::move(res));
    beast::error_code ec;
    http::write(socket, out, ec);
    return !ec;
  }

  static http::response<http::string_body> message(unsigned version, bool keep_alive,
                                                   Response res) {
    http::response<http::string_body> out{static_cast<http::status>(res.status), version};
    if (!res.content_type.empty()) {
      out.set(http::field::content_type, res.content_type);
    }
    for (const auto& [name, value] : res.headers) {
      out.set(name, value);
    }
    out.body() = std::move(res.body);
    out.keep_alive(keep_alive);
    if (res.status != 204) {  // RFC 9110 8.6: no Content-Length in a 204; Beast's would set 0
      out.prepare_payload();
    }
    return out;
  }
};

// probe_listen: one thread, and every read and write on it asynchronous with a deadline, so that
// no client holds the thread however slowly it sends or reads, nor however many connect. /readyz
// may wait for the API server (core/commands.cc sinksReady: up to 15 s when it does not answer):
// it is answered on a thread of its own, so that /healthz and /metrics never wait for it.
struct PushServer::ProbeListener {
  static constexpr uint64_t kMaxBody = 64 << 10;  // a GET has none; a stray POST's is dropped

  struct Session : std::enable_shared_from_this<Session> {
    Session(ProbeListener& l, PushServer& s, tcp::socket socket)
        : listener(l), server(s), stream(std::move(socket)) {}
    ProbeListener& listener;
    PushServer& server;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    std::optional<http::request_parser<http::string_body>> parser;
    http::response<http::string_body> out;

    // The next request, within kIdle as on `listen`; one that fails or is late is closed
    // unanswered.
    void read() {
      parser.emplace();
      parser->body_limit(kMaxBody);
      stream.expires_after(Listener::kIdle);
      http::async_read(stream, buffer, *parser,
                       [self = shared_from_this()](beast::error_code ec, size_t /*bytes*/) {
                         if (!ec) {
                           self->answer();
                         }
                       });
    }

    void answer() {
      const auto& fields = parser->get();
      Request req;
      req.method = std::string(fields.method_string());
      req.path = std::string(fields.target().substr(0, fields.target().find('?')));
      if (req.method == "GET" && req.path == "/readyz") {
        asio::post(listener.ready_io, [self = shared_from_this(), req]() mutable {
          Response res = self->respond(req);
          asio::post(self->stream.get_executor(),
                     [self, res = std::move(res)]() mutable { self->write(std::move(res)); });
        });
        return;
      }
      write(respond(req));
    }

    Response respond(Request& req) {
      Response res;
      try {
        if (isPushPath(req.path)) {  // pushes only on `listen`
          server.countRejected("not_found");
          res = {404, "text/plain", "not found\n", {}};
        } else {
          res = server.answer(req);
        }
      } catch (const std::exception& e) {  // as on `listen`
        spdlog::error("http: {} {}: {}", req.method, req.path, e.what());
        server.countRejected("internal");
        res = {500, "text/plain", std::string("internal error: ") + e.what() + "\n", {}};
      }
      return res;
    }

    void write(Response res) {
      const auto& fields = parser->get();
      out = Listener::message(fields.version(), fields.keep_alive(), std::move(res));
      stream.expires_after(server.config_.read_timeout);
      http::async_write(stream, out,
                        [self = shared_from_this()](beast::error_code ec, size_t /*bytes*/) {
                          if (!ec && self->out.keep_alive()) {
                            self->read();
                            return;
                          }
                          beast::error_code ignored;
                          self->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
                        });
    }
  };

  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  // /readyz's checks, one at a time; destroyed before `io`, whose sockets its handlers hold.
  asio::io_context ready_io;
  asio::executor_work_guard<asio::io_context::executor_type> ready_work =
      asio::make_work_guard(ready_io);
  std::thread ready_thread;

  void accept(PushServer& server) {
    acceptor.async_accept([this, &server](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) {
        return;  // stopped
      }
      if (ec) {
        spdlog::warn("http: probe_listen accept: {}", ec.message());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // e.g. out of descriptors
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(*this, server, std::move(socket))->read();
      }
      accept(server);
    });
  }
};

namespace {

// "host:port" as `listen` takes it: an IPv6 host in brackets ("[::]:3100").
std::string hostPort(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// Opens `acceptor` on host:port. Throws std::runtime_error naming the address and `what`.
void listenOn(tcp::acceptor& acceptor, const std::string& host, int port, const std::string& what) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor.set_option(asio::socket_base::reuse_address(true), ec);
      acceptor.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
  }
  if (ec) {
    throw std::runtime_error("http: cannot listen on " + hostPort(host, port) + what + ": " +
                             ec.message());
  }
}

}  // namespace

void checkListen(const PushConfig& next, const PushConfig* running) {
  // The restart frees the ports this process holds, whatever host either names.
  const auto held = [running](int port) {
    return running != nullptr && port > 0 && (port == running->port || port == running->probe_port);
  };
  asio::io_context io;
  if (!held(next.port)) {
    tcp::acceptor acceptor(io);
    listenOn(acceptor, next.host, next.port, "");
  }
  if (next.probe_port >= 0 && !held(next.probe_port)) {
    tcp::acceptor acceptor(io);
    listenOn(acceptor, next.probe_host, next.probe_port, " (probe_listen)");
  }
}

void PushServer::start() {
  listener_ = std::make_unique<Listener>();
  tcp::acceptor& acceptor = listener_->acceptor;
  listenOn(acceptor, config_.host, config_.port, "");
  bound_port_ = acceptor.local_endpoint().port();
  if (config_.probe_port >= 0) {
    probe_ = std::make_unique<ProbeListener>();
    listenOn(probe_->acceptor, config_.probe_host, config_.probe_port, " (probe_listen)");
    bound_probe_port_ = probe_->acceptor.local_endpoint().port();
    probe_->accept(*this);
    probe_->thread = std::thread([this] { probe_->io.run(); });
    probe_->ready_thread = std::thread([this] { probe_->ready_io.run(); });
    // Before the push endpoints' line, which tests wait for.
    spdlog::info("http: health and metrics endpoints on {} (probe_listen)",
                 hostPort(config_.probe_host, bound_probe_port_));
  }
  listener_->accept(*this);
  for (size_t i = 0; i < config_.threads; ++i) {
    threads_.emplace_back([this] { listener_->io.run(); });
  }
  spdlog::info("http: push endpoints listening on {}", hostPort(config_.host, bound_port_));
}

void PushServer::stop() {
  if (probe_) {
    probe_->io.stop();  // its sessions are closed with the io_context
    probe_->ready_io.stop();
    for (std::thread* t : {&probe_->thread, &probe_->ready_thread}) {
      if (t->joinable()) {
        t->join();
      }
    }
    probe_.reset();
  }
  if (!listener_) {
    return;
  }
  listener_->stopping = true;
  // The threads finish the requests they are serving (those answered later get Connection:
  // close) and return; connections waiting for a request are closed with the io_context, as is
  // the listening socket.
  listener_->io.stop();
  for (std::thread& t : threads_) {
    t.join();
  }
  threads_.clear();
  listener_.reset();
}

PushServer::Response PushServer::answer(Request& req) {
  if (isPushPath(req.path)) {
    if (req.method != "POST") {
      countRejected("method");
      return {405, "text/plain", "use POST\n", {{"Allow", "POST"}}};
    }
    return handlePush(req.path == "/v1/logs" ? Protocol::kOtlp : Protocol::kLoki, req);
  }
  if (req.path == "/healthz" || req.path == "/readyz" || req.path == "/metrics") {
    if (req.method != "GET") {
      countRejected("method");  // every error answer is counted (README), not only the pushes'
      return {405, "text/plain", "use GET\n", {{"Allow", "GET"}}};
    }
    if (req.path == "/healthz") {
      const auto stalled = queue_->stalled(BatchQueue::Clock::now());
      if (stalled < config_.stall_after) {
        return {200, "text/plain", "ok\n", {}};
      }
      const std::string why = fmt::format(
          "pipeline stalled: batches held for {} s with none processed (the bound is {} s)",
          std::chrono::duration_cast<std::chrono::seconds>(stalled).count(),
          std::chrono::duration_cast<std::chrono::seconds>(config_.stall_after).count());
      spdlog::error("/healthz: {}", why);
      return {503, "text/plain", why + "\n", {}};
    }
    if (req.path == "/readyz") {
      const bool ready = ready_();
      return {ready ? 200 : 503, "text/plain", ready ? "ready\n" : "not ready\n", {}};
    }
    return {200, "text/plain; version=0.0.4", metrics_->render(), {}};
  }
  // A shipper pointed at a wrong path shows here.
  countRejected("not_found");
  return {404, "text/plain", "not found\n", {}};
}

bool PushServer::authorized(const Request& req) {
  if (config_.token_file.empty()) {
    return true;
  }
  const std::string& header = req.authorization;
  if (header.size() < 7 || lower(header.substr(0, 7)) != "bearer ") {
    return false;
  }
  const std::string_view sent = std::string_view(header).substr(7);
  std::lock_guard lock(token_mu_);
  struct stat st {};
  if (::stat(config_.token_file.c_str(), &st) != 0) {
    spdlog::warn("http: token file {} is unreadable: every push is refused", config_.token_file);
    return false;
  }
  // Any change shows in one of these: a write (mtime, size), a chmod (ctime), the kubelet's
  // swap of a Secret's files (inode). Not the mtime alone: a file stamped at 0, as reproducible
  // image builds stamp them, was never read.
  const auto ns = [](const std::timespec& t) { return t.tv_sec * kNanosPerSecond + t.tv_nsec; };
  const TokenFileId id{st.st_ino, st.st_size, ns(st.st_mtim), ns(st.st_ctim)};
  if (!token_file_id_ || *token_file_id_ != id) {
    std::ifstream in(config_.token_file);
    std::stringstream s;
    s << in.rdbuf();
    if (S_ISDIR(st.st_mode) || !in.is_open() || in.bad()) {  // a directory opens
      spdlog::warn("http: token file {} is unreadable: every push is refused", config_.token_file);
      return false;  // not cached: read again at the next push
    }
    tokens_.clear();
    for (std::string line; std::getline(s, line);) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
        line.pop_back();
      }
      if (!line.empty()) {
        tokens_.push_back(std::move(line));
      }
    }
    token_file_id_ = id;
  }
  bool match = false;
  for (const std::string& token : tokens_) {
    if (sent.size() != token.size()) {
      continue;
    }
    // Every byte is compared, wherever the first difference is, so that the time a refusal takes
    // tells a client nothing of how much of the token it guessed.
    unsigned char differ = 0;
    for (size_t i = 0; i < token.size(); ++i) {
      differ |= static_cast<unsigned char>(sent[i] ^ token[i]);
    }
    match = match || differ == 0;
  }
  return match;
}

bool PushServer::logNow(const std::string& metric_reason) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(logged_mu_);
  const auto [at, first] = logged_.try_emplace(metric_reason, now);
  if (!first && now - at->second < std::chrono::minutes(1)) {
    return false;
  }
  at->second = now;
  return true;
}

void PushServer::countRejected(const std::string& metric_reason) {
  metrics_->add("faultline_push_requests_rejected_total", Metrics::label("reason", metric_reason));
}

PushServer::Response PushServer::reject(Protocol protocol, bool json, int status,
                                        const std::string& reason,
                                        const std::string& metric_reason) {
  countRejected(metric_reason);
  if (status != 429 && status != 503 && logNow(metric_reason)) {
    spdlog::warn(
        "http: {} push refused with {}: {} (counted in "
        "faultline_push_requests_rejected_total{{reason=\"{}\"}}; logged at most once a minute)",
        protocol == Protocol::kLoki ? "a Loki" : "an OTLP", status, loggable(reason),
        metric_reason);
  }
  Response res;
  res.status = status;
  if (status == 429 || status == 503) {
    res.headers.emplace_back("Retry-After", "1");
  }
  // A kept-alive connection would bring the retry back to this replica (kube-proxy keeps an
  // established connection on its endpoint): a new one goes through the Service, to the leader.
  res.close = status == 503;
  if (status == 401) {
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
  }
  if (protocol == Protocol::kLoki) {
    res.content_type = "text/plain";
    res.body = reason + "\n";
  } else if (json) {
    const nlohmann::json status_json = {{"code", rpcCode(status)}, {"message", reason}};
    res.content_type = "application/json";
    res.body = status_json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    res.content_type = "application/x-protobuf";
    res.body = rpcStatusProto(rpcCode(status), reason);
  }
  spdlog::debug("http: {} {}", status, loggable(reason));
  return res;
}

PushServer::Response PushServer::handlePush(Protocol protocol, Request& req) {
  const std::string type = mediaType(req.content_type);
  const bool json = type == "application/json";
  // `snappy` is a no-op for Loki (some Loki clients set it for their snappy protobuf body,
  // loki#3407), where an OTLP body so marked is compressed; `x-gzip` is gzip (RFC 9110 8.4.1.3);
  // `zlib` and `x-snappy-framed` are what the OTel collector's `compression: zlib` and framed
  // snappy send.
  const std::string encoding = lower(req.content_encoding);
  using Decompress = InflateResult (*)(std::string_view, size_t, size_t, std::string*);
  Decompress decompress = nullptr;
  if (encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate" || encoding == "zlib") {
    decompress = inflateBody;
  } else if (encoding == "zstd") {
    decompress = zstdBody;
  } else if ((encoding == "snappy" && protocol == Protocol::kOtlp) ||
             encoding == "x-snappy-framed") {
    decompress = snappyBody;
  }
  const bool known_encoding = decompress != nullptr || encoding.empty() || encoding == "identity" ||
                              (encoding == "snappy" && protocol == Protocol::kLoki);
  const std::string too_large = "body (after Content-Encoding) over the limit of " +
                                std::to_string(config_.max_body_bytes) + " bytes";
  if (!authorized(req)) {
    return reject(protocol, json, 401, "missing or wrong bearer token", "unauthorized");
  }
  if (leader_elsewhere_) {
    // Between losing the Lease and leaving the Service's endpoints, a replica still gets pushes:
    // held as a follower's decisions, its lines would never taint, nor reach the new leader.
    if (const std::string leader = leader_elsewhere_(); !leader.empty()) {
      return reject(protocol, json, 503, "not the leader (" + leader + " is); retry later",
                    "not_leader");
    }
  }
  if (req.body_over_limit) {
    return reject(protocol, json, 413, too_large, "too_large");
  }
  if (!known_encoding) {
    return reject(protocol, json, 415, "unsupported Content-Encoding " + encoding, "encoding");
  }
  if (queue_->depth().first >= queue_->maxBytes()) {
    return reject(protocol, json, 429, "pipeline queue is full; retry later", "queue_full");
  }
  if (protocol == Protocol::kOtlp && !json && type != "application/x-protobuf") {
    return reject(protocol, json, 415,
                  "Content-Type must be application/x-protobuf or application/json", "media_type");
  }
  std::string body = std::move(req.body);
  if (decompress != nullptr) {
    std::string out;
    const InflateResult r = decompress(body, config_.max_body_bytes, kJsonPadding, &out);
    if (r == InflateResult::kTooLarge) {
      return reject(protocol, json, 413, too_large, "too_large");
    }
    if (r == InflateResult::kCorrupt) {
      return reject(protocol, json, 400, "corrupt " + encoding + " data", "malformed");
    }
    body = std::move(out);
  }
  std::string error;
  bool decoded_too_large = false;

  const size_t body_bytes = body.size();
  // Until the batch is queued (where queue_bytes counts it) or refused; a decoder needs several
  // times its body, and the gate keeps that to max_body_bytes of bodies whatever the number of
  // server threads. A Loki protobuf body counts as it decompresses (snappy's header says how
  // much; the decoder refuses more than max_body_bytes).
  size_t decoded_bytes = body_bytes;
  if (protocol == Protocol::kLoki && !json &&
      !snappy::GetUncompressedLength(body.data(), body.size(), &decoded_bytes)) {
    decoded_bytes = body_bytes;  // not snappy: the decoder refuses it
  }
  const ByteGate::Admission decoding =
      decoding_.admit(std::min(decoded_bytes, config_.max_body_bytes));
  BatchQueue::Item item;
  RecordBatch& batch = item.batch;
  uint64_t rejected = 0;
  bool ok = false;
  std::string format;
  if (json) {
    body.append(kJsonPadding, '\0');  // so that the request is parsed in place, not copied
  }
  const std::string_view json_body = std::string_view(body).substr(0, body_bytes);
  if (protocol == Protocol::kLoki) {
    format = json ? "loki_json" : "loki_proto";
    ok = json ? decodeLokiJson(json_body, body.size(), req.tenant, config_.streams, &batch, &error)
              : decodeLokiProto(body, config_.max_body_bytes, req.tenant, config_.streams, &batch,
                                &error, &decoded_too_large);
  } else {
    format = json ? "otlp_json" : "otlp_proto";
    if (json) {
      ok =
          decodeOtlpJson(json_body, body.size(), config_.streams, keep_, &batch, &rejected, &error);
    } else {
      auto held = std::make_shared<const std::string>(std::move(body));
      ok = decodeOtlpProto(*held, config_.streams, keep_, &batch, &rejected, &error);
      batch.hold(held, held->capacity());  // the records point into the body
    }
  }
  if (!ok) {
    if (protocol == Protocol::kLoki && !json && type != "application/x-protobuf") {
      // As Loki does, any other Content-Type (or none) is read as snappy protobuf: say so, as
      // "snappy body is corrupt" alone points away from a missing header.
      error = "Content-Type " + (type.empty() ? std::string("missing") : "'" + type + "'") +
              ": read as snappy-compressed protobuf (application/json for JSON): " + error;
    }
    return reject(protocol, json, decoded_too_large ? 413 : 400, error,
                  decoded_too_large ? "too_large" : "malformed");
  }
  body = std::string();  // records point into the batch's arena or a buffer it holds
  uint64_t truncated = 0;
  const int64_t now = nowNanos();
  // A record whose labels name no node cannot be attributed: decided for a node "", every such
  // stream of every machine would be one node's log.
  const size_t decoded = batch.records.size();
  std::erase_if(batch.records, [](const LogRecord& r) { return r.node.empty(); });
  const uint64_t nodeless = decoded - batch.records.size();
  if (nodeless > 0 && !warned_nodeless_.exchange(true)) {
    std::string names;
    for (const std::string& n : config_.streams.node_labels) {
      names += (names.empty() ? "" : ", ") + n;
    }
    spdlog::warn(
        "http: a {} push names no node for some records (none of the labels {}); they are "
        "dropped and counted in faultline_records_rejected_total",
        protocol == Protocol::kLoki ? "Loki" : "OTLP", names);
  }
  rejected += protocol == Protocol::kOtlp ? nodeless : 0;
  for (LogRecord& r : batch.records) {
    if (r.line.size() > config_.max_line_bytes) {
      r.line = r.line.substr(0, config_.max_line_bytes);
      ++truncated;
    }
    if (r.time_ns == 0) {
      r.time_ns = now;  // no event time on the record: the time it arrived
    }
  }
  const size_t records = batch.records.size();
  item.bytes = batch.memoryBytes();
  if (records > 0 && !queue_->tryPush(item)) {
    return reject(protocol, json, 429, "pipeline queue is full; retry later", "queue_full");
  }
  const std::string labels =
      Metrics::label("source", "http") + "," + Metrics::label("format", format);
  metrics_->add("faultline_records_total", labels, records);
  metrics_->add("faultline_bytes_total", labels, body_bytes);
  if (truncated > 0) {
    metrics_->add("faultline_lines_truncated_total", Metrics::label("source", "http"), truncated);
  }
  if (protocol == Protocol::kLoki) {
    if (nodeless > 0) {
      metrics_->add("faultline_records_rejected_total", labels, nodeless);
    }
    return {204, "", "", {}};
  }
  if (rejected > 0) {
    metrics_->add("faultline_records_rejected_total", labels, rejected);
  }
  const std::string why = nodeless > 0 ? "log records without a node (resource or record "
                                         "attribute) or without a string body or MESSAGE"
                                       : "log records without a string body or MESSAGE";
  if (json) {
    return {200, "application/json", otlpJsonResponse(rejected, why), {}};
  }
  return {200, "application/x-protobuf", otlpProtoResponse(rejected, why), {}};
}

}  // namespace faultline

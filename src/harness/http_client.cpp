#include "harness/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <optional>

namespace bicache::harness {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

struct HttpClient::Impl {
  std::string host;
  int port;
  std::chrono::seconds timeout;
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(std::string host, int port, std::chrono::seconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() = default;

HttpResult HttpClient::Get(const std::string& path) {
  return Send("GET", path, "");
}

HttpResult HttpClient::Post(const std::string& path, const std::string& body) {
  return Send("POST", path, body);
}

HttpResult HttpClient::Send(const std::string& method, const std::string& path,
                            const std::string& body) {
  HttpResult out;
  // A kept-alive connection the server closed meanwhile fails on first use: one retry on a new one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->stream.has_value();
    try {
      if (!impl_->stream) {
        asio::ip::tcp::resolver resolver(impl_->io);
        impl_->stream.emplace(impl_->io);
        impl_->stream->expires_after(impl_->timeout);
        impl_->stream->connect(resolver.resolve(impl_->host, std::to_string(impl_->port)));
        impl_->buffer.clear();
      }
      bhttp::request<bhttp::string_body> req(
          method == "POST" ? bhttp::verb::post : bhttp::verb::get, path, 11);
      req.set(bhttp::field::host, impl_->host);
      if (method == "POST") {
        req.set(bhttp::field::content_type, "application/json");
        req.body() = body;
        req.prepare_payload();
      }
      impl_->stream->expires_after(impl_->timeout);
      bhttp::write(*impl_->stream, req);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(256u << 20);
      bhttp::read(*impl_->stream, impl_->buffer, parser);
      out.ok = true;
      out.status = static_cast<int>(parser.get().result_int());
      out.body = std::move(parser.get().body());
      if (!parser.get().keep_alive()) impl_->stream.reset();
      return out;
    } catch (const std::exception& e) {
      impl_->stream.reset();
      out.error = e.what();
      if (!reused) return out;
    }
  }
  return out;
}

}  // namespace bicache::harness

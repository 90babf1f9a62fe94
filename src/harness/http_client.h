// A small blocking HTTP/1.1 client for bench-serve (Boost.Beast): one kept-alive connection,
// reopened when the server closed it. Not for serving.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace bicache::harness {

struct HttpResult {
  bool ok = false;  // a response arrived (any status)
  int status = 0;
  std::string body;
  std::string error;  // the transport error when !ok
};

class HttpClient {
 public:
  HttpClient(std::string host, int port, std::chrono::seconds timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult Get(const std::string& path);
  HttpResult Post(const std::string& path, const std::string& body);  // application/json

 private:
  struct Impl;
  HttpResult Send(const std::string& method, const std::string& path, const std::string& body);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bicache::harness

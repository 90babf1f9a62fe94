// One client connection as the front end holds it (server/front/front_end.h).
//
// Phases: kHead (reading the request head; idle between requests on a kept-alive connection) ->
// kBody (reading the body the head announced) -> kUpstream (the complete request is with the
// upstream; its response is relayed back) -> kHead again, or kClosing (the last bytes go out, the
// sending side is shut, what the client still sends is read and dropped so the close does not
// reset the connection before the client has read the answer).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "server/front/http_head.h"

namespace bicache::server::front {

using Clock = std::chrono::steady_clock;

enum class Phase { kHead, kBody, kUpstream, kClosing };

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  int upstream = -1;  // the Unix-domain connection carrying this request, in kUpstream
  std::string relay;  // its abstract name, sent as kRelayHeader (server/connection_watch.h)
  uint64_t upstream_serial = 0;  // counts the upstream connections opened for this connection
  bool admitted = true;          // counts against --max-connections (false: refused at accept)
  bool closed = false;  // descriptors closed; the object goes at the end of the loop iteration
  Phase phase = Phase::kHead;
  Clock::time_point phase_start;  // when this phase (or the idle wait before a head) began
  Clock::time_point head_start;   // first byte of the current head
  Clock::time_point last_write;   // last progress writing to the client
  Clock::time_point deadline = Clock::time_point::max();
  int requests = 0;  // answered on this connection

  // Client -> front: the head being read, then head + body; later requests' bytes may follow.
  std::string in;
  RequestHead req;
  size_t head_len = 0;      // bytes of `in` that are the head (kBody)
  size_t body_scanned = 0;  // body bytes fed to `chunks` so far
  ChunkedScanner chunks;

  // Front -> upstream: the request as the upstream gets it.
  std::string up_out;
  size_t up_off = 0;
  bool up_connected = false;

  // Upstream -> front -> client.
  std::string resp_head;  // the response head until it is complete
  bool resp_started = false;
  bool awaiting_answer = false;  // relayed, no response head yet (FrontEnd::awaiting_answers)
  ResponseHead resp;
  uint64_t resp_left = 0;  // kLength: body bytes still to come
  ChunkedScanner resp_chunks;
  bool keep_alive = false;  // this response leaves the connection open for the next request
  std::string out;
  size_t out_off = 0;
  bool shut_write = false;  // kClosing: the sending side is shut

  // Registered epoll masks (0 = not registered).
  uint32_t client_events = 0, up_events = 0;
  bool upstream_paused = false;  // upstream reads stop while `out` holds too much

  size_t pending_out() const { return out.size() - out_off; }
};

}  // namespace bicache::server::front

// What the opaque handles of sonopipe_client.h hold. C callers see only the names.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "sdk/frame.h"
#include "client/curve.h"
#include "sonopipe/v1/result.pb.h"

struct sp_frame {
  sonopipe::FrameMeta meta;                        // acquisition_time_ns 0 = stamp at send
  std::map<std::string, std::string> vector_units;  // FrameMeta keeps values only; the wire has units
  bool sequence_fixed = false;                     // else the sender numbers the frame
};

struct sp_sender {
  mutable std::mutex mutex;  // one sp_send at a time: a ZeroMQ socket is not thread-safe
  zmq::context_t context{1};
  zmq::socket_t socket;
  bool lossless = true;
  bool connected = false;
  std::optional<sonopipe::client::CurveKeys> curve;
  std::map<std::uint32_t, std::uint64_t> next_sequence;  // per stream id
  std::uint64_t frames_sent = 0;
};

struct sp_subscriber {
  mutable std::mutex mutex;
  zmq::context_t context{1};
  zmq::socket_t socket;
  bool connected = false;
  std::optional<sonopipe::client::CurveKeys> curve;
  std::uint64_t skipped = 0;
};

struct sp_result {
  std::string topic;
  sonopipe::v1::ResultHeader header;
  zmq::message_t payload;  // the received bytes, not copied
};

#include "tools/common/published_message.h"

#include <cstring>

#include "tools/common/zmq_io.h"

namespace sonopipe::tools {
namespace {

PublishedMessage refused(std::string topic, std::string reason, std::string detail) {
  PublishedMessage message;
  message.topic = std::move(topic);
  message.reason = std::move(reason);
  message.detail = std::move(detail);
  return message;
}

}  // namespace

PublishedMessage decode_published(const std::vector<zmq::message_t>& parts) {
  if (parts.empty()) return refused("", "malformed_message", "empty message");
  PublishedMessage message;
  message.topic = parts[0].to_string();
  const std::string& topic = message.topic;
  if (topic == kStatusTopic) {
    if (parts.size() != 2 || !message.status.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size())))
      return refused(topic, "malformed_status", "status message is not [topic][Status]");
    message.kind = PublishedMessage::Kind::status;
    return message;
  }
  if (parts.size() != 3)
    return refused(topic, "malformed_message", "topic '" + topic + "' with " + std::to_string(parts.size()) +
                                                   " parts, expected [topic][ResultHeader][payload]");
  if (!message.header.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size())))
    return refused(topic, "unparsable_header", "topic '" + topic + "': header is not a ResultHeader");
  const std::string named = result_topic(message.header.pipeline(), message.header.output());
  if (topic != named) return refused(topic, "topic_mismatch", "topic '" + topic + "' but header names " + named);
  message.kind = PublishedMessage::Kind::result;
  return message;
}

PublishedMessage decode_published_slot(const void* header, std::size_t header_bytes) {
  const char* text = static_cast<const char*>(header);
  const std::size_t topic_length = strnlen(text, header_bytes);
  if (topic_length == header_bytes) return refused("", "malformed_message", "a slot header without a topic");
  PublishedMessage message;
  message.topic.assign(text, topic_length);
  const std::string& topic = message.topic;
  if (!message.header.ParseFromArray(text + topic_length + 1, static_cast<int>(header_bytes - topic_length - 1)))
    return refused(topic, "unparsable_header", "topic '" + topic + "': header is not a ResultHeader");
  const std::string named = result_topic(message.header.pipeline(), message.header.output());
  if (topic != named) return refused(topic, "topic_mismatch", "topic '" + topic + "' but header names " + named);
  message.kind = PublishedMessage::Kind::result;
  return message;
}

}  // namespace sonopipe::tools

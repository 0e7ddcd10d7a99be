#include "tools/igtl/client_connection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <igtl_header.h>
#include <igtlMessageHeader.h>
#include <igtlStringMessage.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sonopipe::igtl_bridge {

ClientConnection::ClientConnection(int descriptor, std::string peer, int id, CommandHandler on_command)
    : descriptor_(descriptor), wake_descriptor_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), peer_(std::move(peer)),
      id_(id), on_command_(std::move(on_command)) {
  if (wake_descriptor_ < 0) {
    ::close(descriptor_);
    throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

ClientConnection::~ClientConnection() {
  stop_ = true;
  wake();
  thread_.join();
  ::close(descriptor_);
  ::close(wake_descriptor_);
}

void ClientConnection::offer(const MessagePointer& message) {
  {
    std::lock_guard lock(mutex_);
    ++counters_.offered;
    auto [slot, inserted] = slots_.try_emplace(message->device, message);
    if (inserted) {
      order_.push_back(message->device);
    } else {
      slot->second = message;  // the older one was never sent: latest only
      ++counters_.conflated;
    }
  }
  wake();
}

std::string ClientConnection::end_reason() const {
  std::lock_guard lock(mutex_);
  return end_reason_;
}

ClientCounters ClientConnection::counters() const {
  std::lock_guard lock(mutex_);
  ClientCounters counters = counters_;
  counters.unsent = slots_.size();
  return counters;
}

void ClientConnection::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_descriptor_, &one, sizeof one);  // full only after 2^64 wakes
}

MessagePointer ClientConnection::next_pending() {
  std::lock_guard lock(mutex_);
  if (order_.empty()) return nullptr;
  const std::string device = order_.front();
  order_.pop_front();
  auto slot = slots_.find(device);
  MessagePointer message = slot->second;
  slots_.erase(slot);
  return message;
}

void ClientConnection::finish(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (end_reason_.empty()) end_reason_ = reason;
  finished_ = true;
}

bool ClientConnection::read_incoming() {
  char buffer[4096];
  const ssize_t received = ::recv(descriptor_, buffer, sizeof buffer, MSG_DONTWAIT);
  if (received > 0) {
    std::size_t used = 0;
    if (skipping_ > 0) {
      used = static_cast<std::size_t>(std::min<std::uint64_t>(skipping_, static_cast<std::uint64_t>(received)));
      skipping_ -= used;
    }
    incoming_.append(buffer + used, static_cast<std::size_t>(received) - used);
    handle_messages();
    return true;
  }
  if (received == 0) {
    finish("closed by the client");
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
  finish(std::string("receive failed: ") + std::strerror(errno));
  return false;
}

void ClientConnection::handle_messages() {
  while (incoming_.size() >= IGTL_HEADER_SIZE && skipping_ == 0) {
    igtl::MessageHeader::Pointer header = igtl::MessageHeader::New();
    header->InitPack();
    std::memcpy(header->GetPackPointer(), incoming_.data(), IGTL_HEADER_SIZE);
    header->Unpack();
    const std::uint64_t body = header->GetBodySizeToRead();
    if (body > kMaxCommandBytes) {  // not a command: let it pass without holding it
      const std::uint64_t have = incoming_.size() - IGTL_HEADER_SIZE;
      skipping_ = body > have ? body - have : 0;
      incoming_.erase(0, static_cast<std::size_t>(IGTL_HEADER_SIZE + std::min(body, have)));
      continue;
    }
    if (incoming_.size() < IGTL_HEADER_SIZE + body) return;  // the rest comes later
    if (std::strcmp(header->GetDeviceType(), "STRING") == 0 && on_command_) {
      igtl::StringMessage::Pointer text = igtl::StringMessage::New();
      text->SetMessageHeader(header);
      text->AllocatePack();
      std::memcpy(text->GetPackBodyPointer(), incoming_.data() + IGTL_HEADER_SIZE, static_cast<std::size_t>(body));
      std::string answer;
      if (text->Unpack(1) & igtl::MessageHeader::UNPACK_BODY) answer = on_command_(text->GetString());
      else answer = "error: the STRING message failed its CRC check";
      {
        std::lock_guard lock(mutex_);
        ++counters_.commands;
      }
      offer(pack_string(kReplyDevice, answer));
    }
    incoming_.erase(0, static_cast<std::size_t>(IGTL_HEADER_SIZE + body));
  }
}

bool ClientConnection::send_all(const std::string& bytes) {
  std::size_t offset = 0;
  while (offset < bytes.size()) {
    pollfd items[2] = {{descriptor_, POLLOUT | POLLIN, 0}, {wake_descriptor_, POLLIN, 0}};
    if (::poll(items, 2, -1) < 0) {
      if (errno == EINTR) continue;
      finish(std::string("poll failed: ") + std::strerror(errno));
      return false;
    }
    if (stop_) {
      finish("the bridge stopped");
      return false;
    }
    if (items[1].revents & POLLIN) {  // a newer message arrived: it waits in its slot
      std::uint64_t count;
      [[maybe_unused]] const ssize_t read = ::read(wake_descriptor_, &count, sizeof count);
    }
    if ((items[0].revents & POLLIN) && !read_incoming()) return false;
    if (items[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      finish("connection lost");
      return false;
    }
    if (items[0].revents & POLLOUT) {
      const ssize_t sent = ::send(descriptor_, bytes.data() + offset, bytes.size() - offset, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent > 0) {
        offset += static_cast<std::size_t>(sent);
      } else if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        finish(std::string("send failed: ") + std::strerror(errno));
        return false;
      }
    }
  }
  std::lock_guard lock(mutex_);
  ++counters_.sent;
  counters_.bytes_sent += bytes.size();
  return true;
}

void ClientConnection::run() {
  while (!stop_) {
    if (MessagePointer message = next_pending()) {
      if (!send_all(message->bytes)) return;
      continue;
    }
    pollfd items[2] = {{descriptor_, POLLIN, 0}, {wake_descriptor_, POLLIN, 0}};
    if (::poll(items, 2, -1) < 0) {
      if (errno == EINTR) continue;
      finish(std::string("poll failed: ") + std::strerror(errno));
      return;
    }
    if (items[1].revents & POLLIN) {
      std::uint64_t count;
      [[maybe_unused]] const ssize_t read = ::read(wake_descriptor_, &count, sizeof count);
    }
    if ((items[0].revents & POLLIN) && !read_incoming()) return;
    if (items[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      finish("connection lost");
      return;
    }
  }
  finish("the bridge stopped");
}

}  // namespace sonopipe::igtl_bridge

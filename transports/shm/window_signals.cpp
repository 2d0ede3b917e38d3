// shm::Window's signals: counted lines written by the signaller, and the
// doorbell a waiter sleeps on once it has spun long enough.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

#include "transports/shm/window.hpp"
#include "transports/shm/window_layout.hpp"

namespace braid::shm {

namespace {

long futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word is in memory other processes map.
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

std::atomic<std::uint32_t>& Window::line(int owner, int writer) const {
  auto* base = reinterpret_cast<char*>(header(owner)) + header_size() + static_cast<std::size_t>(writer) * kLine;
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(base);
}

char* Window::box(int writer, int reader, std::uint64_t ticket) const {
  const std::size_t k = static_cast<std::size_t>(writer) * kBoxSlots + ticket % kBoxSlots;
  return reinterpret_cast<char*>(header(reader)) + boxes_offset(size()) + k * kBoxLines * kLine;
}

std::atomic<std::uint32_t>& Window::sleeping_flag() const { return header(me_)->sleeping; }
std::atomic<std::uint32_t>& Window::doorbell() const { return header(me_)->doorbell; }

void Window::signal(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  // seq_cst store, then the flag: pairs with sleep()'s flag, then look.
  line(peer, me_).store(++sent_[i], std::memory_order_seq_cst);
  ring(peer);
}

void Window::ring(int peer) {
  Header* h = header(peer);
  if (h->sleeping.load(std::memory_order_seq_cst)) {
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex(&h->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

std::uint32_t Window::received(int peer) const { return line(me_, peer).load(std::memory_order_seq_cst); }

void Window::sleep_on_doorbell(std::uint32_t seen, int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
  futex(&doorbell(), FUTEX_WAIT, seen, &ts);  // EAGAIN, ETIMEDOUT, EINTR: the caller looks again
}

}  // namespace braid::shm

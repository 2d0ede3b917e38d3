// TcpStoreServer: one thread, one epoll set, non-blocking sockets.
//
// Each client's requests are served in order. A GET of a missing key or a
// WAIT on missing keys "parks" its client: the reply is sent when a later
// request sets the key(s), and the client's further requests wait behind it.
// The server never times a parked request out; the client does, and closes
// its connection, which unparks it here. Anything malformed closes only the
// connection that sent it.
//
// What requests do (the keys, parking, bounds, the job's secret) is
// StoreService's (store_service.hpp); this file is the event loop and the
// sockets. A connection the service refuses (it did not prove the job's
// secret) is closed once its error reply is out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <thread>
#include <unordered_map>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "src/common/thread_name.hpp"
#include "src/store/store.hpp"
#include "src/store/store_service.hpp"
#include "src/store/store_wire.hpp"

namespace braid::store {

namespace {

using wire::Field;
using wire::Op;
using wire::Status;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kReadPerEvent = 1 << 20;  // so one busy client cannot starve the others
constexpr std::uint64_t kListenerId = 0;
constexpr std::uint64_t kWakeId = 1;

struct Conn {
  Client client;  // its protocol state, the service's to change
  Fd fd;
  std::uint32_t events = 0;  // epoll interest registered now
  bool eof = false;          // the client closed its side: serve what it sent, then close
};

}  // namespace

struct TcpStoreServer::Impl {
  explicit Impl(Fd listener);
  ~Impl();

  Fd listener_;
  Fd epoll_;
  Fd wake_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> open_{0};  // connections, for linger()
  std::thread thread_;

  // Bound on connections (BRAID_STORE_MAX_CONNECTIONS, read when the
  // server starts); the service bounds keys and bytes.
  std::size_t max_conns_;

  // Everything below belongs to the server thread.
  std::unique_ptr<StoreService> service_;
  bool refusing_ = false;  // connections over the cap are being refused (warned once)
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::uint64_t next_id_ = 2;
  bool listener_paused_ = false;
  std::vector<std::uint8_t> scratch_ = std::vector<std::uint8_t>(kReadChunk);

  void run();
  void accept_all();
  void serve(Conn& c, std::uint32_t events);
  void after_io(Conn& c);
  bool read_some(Conn& c);
  bool flush(Conn& c);
  void answer_ready();
  void set_interest(Conn& c, std::uint32_t events);
  void close(std::uint64_t id);
};

TcpStoreServer::Impl::Impl(Fd listener)
    : listener_(std::move(listener)),
      max_conns_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_CONNECTIONS", 1, 1 << 20, "a count of connections").value_or(4096))) {
  net::set_nonblocking(listener_.get());
  port_ = net::local_address(listener_.get()).port();
  service_ = std::make_unique<StoreService>(fmt::format("store server on port {}", port_));
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid())
    fail(ErrorCode::Store, "cannot create the store server's epoll/eventfd: {}", errno_text());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([this] { run(); });
  name_thread(thread_, "braid-store");
}

TcpStoreServer::Impl::~Impl() {
  stop_.store(true);
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  // Connections and fds close with their owners.
}

void TcpStoreServer::Impl::run() {
  std::array<epoll_event, 64> evs;
  while (!stop_.load()) {
    int n = epoll_wait(epoll_.get(), evs.data(), static_cast<int>(evs.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      BRAID_WARN("store server on port {}: epoll_wait failed: {}; stopping", port_, errno_text());
      return;
    }
    for (int i = 0; i < n; ++i) {
      std::uint64_t id = evs[i].data.u64;
      if (id == kWakeId) continue;  // stop_ is checked by the loop
      if (id == kListenerId) {
        accept_all();
        continue;
      }
      auto it = conns_.find(id);
      if (it != conns_.end()) serve(*it->second, evs[i].events);
    }
    answer_ready();
  }
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of fds or memory: stop accepting (level-triggered epoll would spin)
      // until a connection closes.
      BRAID_WARN("store server on port {}: accept failed: {}; pausing accepts", port_, errno_text());
      epoll_event ev{};
      ev.data.u64 = kListenerId;
      epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
      listener_paused_ = true;
      return;
    }
    if (conns_.size() >= max_conns_) {
      // Over the cap: refused at once, so a flood of connections cannot
      // take the server's fds and memory from the job's ranks. One error
      // frame first (it fits any socket buffer), so a client says why.
      Bytes frame;
      const std::string why = fmt::format("store full: it serves at most {} connections (BRAID_STORE_MAX_CONNECTIONS)",
                                          max_conns_);
      wire::encode(frame, static_cast<std::uint16_t>(Status::Error), {wire::field(why)});
      (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      if (!refusing_)
        BRAID_WARN("store server on port {}: refusing connections beyond {} (BRAID_STORE_MAX_CONNECTIONS)", port_,
                   max_conns_);
      refusing_ = true;
      continue;
    }
    refusing_ = false;
    net::set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->client.id = next_id_++;
    c->fd = Fd(fd);
    c->events = EPOLLIN;
    service_->opened(c->client);
    epoll_event ev{};
    ev.events = c->events;
    ev.data.u64 = c->client.id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      BRAID_WARN("store server on port {}: epoll_ctl failed: {}", port_, errno_text());
      continue;  // c closes the fd
    }
    conns_.emplace(c->client.id, std::move(c));
    open_.store(conns_.size());
  }
}

void TcpStoreServer::Impl::serve(Conn& c, std::uint32_t events) {
  bool ok = !(events & (EPOLLERR | EPOLLHUP));
  try {
    if (ok && (events & EPOLLIN)) ok = read_some(c);
    if (ok && (events & EPOLLOUT)) ok = flush(c);
  } catch (const std::exception& e) {
    BRAID_WARN("store server on port {}: dropping a client: {}", port_, e.what());
    ok = false;
  }
  if (!ok) return close(c.client.id);
  if (c.eof) {
    // Requests that came with the end of the stream still count (a client
    // may set a key and close without waiting); their replies go out if
    // the socket still takes them.
    try {
      if (service_->process(c.client)) flush(c);
    } catch (const std::exception& e) {
      BRAID_WARN("store server on port {}: dropping a client: {}", port_, e.what());
    }
    return close(c.client.id);
  }
  after_io(c);
}

// Serves what has arrived, sends what can be sent, and updates the interest
// set; closes the connection on any failure. `c` may be gone afterwards.
void TcpStoreServer::Impl::after_io(Conn& c) {
  bool ok = false;
  try {
    ok = service_->process(c.client) && flush(c);
  } catch (const std::exception& e) {
    BRAID_WARN("store server on port {}: dropping a client: {}", port_, e.what());
  }
  const Client& cl = c.client;
  if (!ok || (cl.closing && cl.pending_out() == 0)) return close(cl.id);
  std::uint32_t want = 0;
  if (cl.pending_in() < StoreService::kMaxPendingIn && !cl.closing) want |= EPOLLIN;
  if (cl.pending_out() > 0) want |= EPOLLOUT;
  set_interest(c, want);
}

// False on a socket error; EOF sets c.eof.
bool TcpStoreServer::Impl::read_some(Conn& c) {
  std::size_t budget = kReadPerEvent;
  while (budget > 0 && c.client.pending_in() < StoreService::kMaxPendingIn) {
    ssize_t n = ::recv(c.fd.get(), scratch_.data(), scratch_.size(), MSG_DONTWAIT);
    if (n > 0) {
      c.client.in.insert(c.client.in.end(), scratch_.begin(), scratch_.begin() + n);
      budget -= std::min(budget, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      c.eof = true;
      return true;
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

// False if the peer is gone.
bool TcpStoreServer::Impl::flush(Conn& conn) {
  Client& c = conn.client;
  while (c.pending_out() > 0) {
    ssize_t n = ::send(conn.fd.get(), c.out.data() + c.out_pos, c.pending_out(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_pos += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  c.out.clear();
  c.out_pos = 0;
  return true;
}

// Answered clients may have pipelined requests that set more keys, so this
// runs until nothing new is ready.
void TcpStoreServer::Impl::answer_ready() {
  auto& ready = service_->ready();
  while (!ready.empty()) {
    std::uint64_t id = ready.front();
    ready.pop_front();
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second->client.parked) continue;
    if (service_->try_answer(it->second->client)) after_io(*it->second);
  }
}

void TcpStoreServer::Impl::set_interest(Conn& c, std::uint32_t events) {
  if (events == c.events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.client.id;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.events = events;
}

void TcpStoreServer::Impl::close(std::uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  service_->closed(c.client);
  // Explicitly: a forked child may hold a copy of the fd, which would keep
  // the registration alive after close().
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  conns_.erase(it);
  open_.store(conns_.size());
  if (listener_paused_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerId;
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
    listener_paused_ = false;
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::TcpStoreServer(const std::string& host, int port)
    : TcpStoreServer(std::make_unique<Impl>(net::listen_on(net::resolve(host, port)))) {}

std::unique_ptr<TcpStoreServer> TcpStoreServer::try_create(const std::string& host, int port) {
  Fd listener = net::try_listen_on(net::resolve(host, port));
  if (!listener.valid()) return nullptr;
  // The constructor taking an Impl is private, so make_unique cannot reach it.
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(std::make_unique<Impl>(std::move(listener))));
}

TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const { return impl_->port_; }

void TcpStoreServer::linger(Millis limit) {
  const Deadline until = Deadline::after(limit);
  while (impl_->open_.load() > 0 && !until.expired()) std::this_thread::sleep_for(Millis(5));
}

}  // namespace braid::store

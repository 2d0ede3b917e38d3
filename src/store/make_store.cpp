// tcp_store and file_store: Braid's stores for callers outside the library
// (a Communicator's members), with the server's lifetime tied to the store.
#include <algorithm>

#include "src/store/store.hpp"

namespace braid::store {

std::shared_ptr<Store> tcp_store(const std::string& host, int port, bool serve, Millis timeout) {
  std::shared_ptr<TcpStoreServer> server;
  if (serve) server = std::make_shared<TcpStoreServer>(host, port);
  auto* client = new TcpStore(host, server ? server->port() : port, timeout);
  client->set_timeout(timeout);
  // The server lives as long as the client: the deleter holds it, and the
  // client goes first (it may say goodbye to the server). Then the server
  // stays up while other members are still connected (bounded), so that a
  // member that finishes first does not pull the store from under the rest.
  return std::shared_ptr<Store>(client, [server, timeout](Store* s) mutable {
    delete s;
    if (server) server->linger(std::min(timeout, Millis(30000)));
    server.reset();
  });
}

std::shared_ptr<Store> file_store(const std::string& path, Millis timeout) {
  auto s = std::make_shared<FileStore>(path, timeout);
  s->set_timeout(timeout);
  return s;
}

}  // namespace braid::store

// Rendezvous over IP multicast: init_method "tcp://239.x.y.z:PORT" (or
// "tcp://[ff15::...]:PORT") with world_size and no rank. Processes that know
// nothing of each other but the address, the port and the group name find
// one another, agree on ranks 0..n-1 and on a store:
//   - every process joins the group and announces itself (HELLO: a random
//     64-bit id, the group name, the world size), again and again, until it
//     knows where the store is;
//   - the process that has heard world_size distinct ids and whose id is
//     the smallest becomes rank 0: it hosts the store on a port of its own
//     (the multicast port is only a meeting point, so jobs that share it can
//     run at once), writes every id's rank there (ids in ascending order),
//     and announces the store (STORE: its address and port) until init ends;
//   - every other process connects to the store it announces and reads its
//     rank there by its id.
// Jobs on one address and port stay apart by group_name (announcements of
// other groups are ignored). The default interface is the route to the
// group; BRAID_SOCKET_IFNAME chooses another. With BRAID_JOB_TOKEN the store
// authenticates as always, so a stranger announcing a store of its own is
// refused there; the announcements themselves are not authenticated.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/store/store.hpp"

namespace braid::detail {

// Whether `host` (as tcp:// spells it, "[v6]" included) is a multicast
// address: 224.0.0.0/4 or ff00::/8.
bool is_multicast_host(const std::string& host);

// What a datagram on the group says: "braid-mc1 H WORLD ID NAMELEN:NAME"
// (HELLO) or "braid-mc1 S WORLD ID PORT HOST NAMELEN:NAME" (STORE). false for
// anything malformed or foreign: strangers may send anything there.
struct Announcement {
  char kind = 0;  // 'H' or 'S'
  long world = 0;
  std::uint64_t id = 0;
  int port = 0;
  std::string host, name;
};
bool parse_announcement(const std::string& text, Announcement* a);

// One process's side of the meeting.
class MulticastMeeting {
 public:
  // Joins the group; throws braid::Error saying why where it cannot (no
  // route for multicast, an interface BRAID_SOCKET_IFNAME does not find).
  MulticastMeeting(const std::string& host, int port, int world, const std::string& group_name);
  ~MulticastMeeting();
  MulticastMeeting(const MulticastMeeting&) = delete;
  MulticastMeeting& operator=(const MulticastMeeting&) = delete;

  // Announces and listens until this process is rank 0 (it then hosts the
  // store: server() is set, and ids() holds every process's id in rank
  // order) or has heard where the store is. Throws Timeout at `deadline`
  // saying how many of the world it heard.
  void meet(std::chrono::steady_clock::time_point deadline);

  std::uint64_t id() const { return id_; }
  const std::string& store_host() const { return store_host_; }
  int store_port() const { return store_port_; }
  std::unique_ptr<store::TcpStoreServer> take_server() { return std::move(server_); }
  const std::vector<std::uint64_t>& ids() const { return ids_; }
  // Rank 0: announces the store from a thread until the meeting is
  // destroyed (init's rendezvous done), for processes still listening.
  void keep_announcing();

 private:
  void send(const std::string& text);
  std::string where() const;

  std::string host_;  // without brackets
  int port_;
  int world_;
  std::string name_;
  int family_ = 0;
  int fd_ = -1;
  std::vector<unsigned char> group_addr_;  // sockaddr_in or sockaddr_in6
  std::string local_;                      // this host's address toward the group
  std::uint64_t id_;
  std::vector<std::uint64_t> ids_;
  std::string store_host_;
  int store_port_ = 0;
  std::unique_ptr<store::TcpStoreServer> server_;
  std::thread announcer_;
  std::atomic<bool> stop_{false};
};

}  // namespace braid::detail

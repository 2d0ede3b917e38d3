// Device, port and GID selection for the verbs transport.
//
// Braid uses one RDMA device and one port per process:
//   BRAID_IB_HCA        NCCL's grammar: a comma list of device-name prefixes,
//                       each optionally ":port"; a leading "^" excludes the
//                       listed devices, a leading "=" matches names exactly.
//                       Without it: the first device with an active port.
//   BRAID_IB_GID_INDEX  the GID index to use. Without it, on RoCE the GID
//                       table is searched (choose_gid_index); on InfiniBand
//                       the LID routes and no GID is needed.
// The pure parts (spec parsing, GID choice) are separate so that they can be
// tested without a device.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/verbs/verbs_objects.hpp"

namespace braid::verbs {

// --- BRAID_IB_HCA --------------------------------------------------------
struct HcaSpec {
  struct Item {
    std::string name;
    int port = 0;  // 0: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;  // empty: every device
};
// Throws braid::Error(InvalidArgument) on a malformed port number.
HcaSpec parse_hca_spec(const std::string& text);
// Does the spec let Braid use (device, port)?
bool hca_selected(const HcaSpec& spec, const std::string& device, int port);

// --- GIDs ----------------------------------------------------------------
enum class GidType : std::uint8_t { IB, RoCEv1, RoCEv2 };
const char* gid_type_name(GidType t);  // "IB", "RoCE v1", "RoCE v2"

using RawGid = std::array<std::uint8_t, 16>;

struct GidEntry {
  int index = 0;
  RawGid gid{};
  GidType type = GidType::IB;
  std::string netdev;  // the network device behind a RoCE GID, if known
};

std::string gid_text(const RawGid& g);  // "fe80:0000:...:29db", as sysfs prints it
bool gid_is_zero(const RawGid& g);
bool gid_is_ipv4_mapped(const RawGid& g);  // ::ffff:a.b.c.d
bool gid_is_link_local(const RawGid& g);   // fe80::/10

// The GID index to use on a RoCE port, or -1 if the table has none usable.
// Preference: RoCE v2 over v1 (v2 is routable, UDP-encapsulated); within a
// type, an IPv4-mapped address, then a global IPv6 one, then link-local.
int choose_gid_index(const std::vector<GidEntry>& table);

// The valid entries of a port's GID table (ibv_query_gid_table, or sysfs
// and ibv_query_gid on kernels without it).
std::vector<GidEntry> read_gid_table(ibv_context* ctx, const std::string& device, int port, int table_len);

// --- the device Braid uses -------------------------------------------------
struct Device {
  ContextPtr ctx;
  std::string name;
  int port = 1;
  ibv_device_attr attr{};
  ibv_port_attr port_attr{};
  bool ethernet = false;  // RoCE: a GID and a global route header are required
  int gid_index = -1;     // -1: InfiniBand routed by LID only
  RawGid gid{};
  GidType gid_type = GidType::IB;
};

// Opens the device and port chosen by BRAID_IB_HCA / BRAID_IB_GID_INDEX.
// Returns null with `why` when no usable port exists; throws
// braid::Error(InvalidArgument) when the variables themselves are malformed.
std::unique_ptr<Device> open_device(std::string* why);

// --- a survey for braid-info -------------------------------------------------
struct PortReport {
  int port = 0;
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  int active_mtu = 0;      // bytes
  std::uint16_t lid = 0;
  std::vector<GidEntry> gids;
  int chosen_gid = -1;     // what choose_gid_index picks
};
struct DeviceReport {
  std::string name;
  std::string error;  // could not open or query
  std::vector<PortReport> ports;
};
std::vector<DeviceReport> survey_devices();

int mtu_bytes(ibv_mtu m);

}  // namespace braid::verbs

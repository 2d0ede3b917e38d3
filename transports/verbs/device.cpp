#include "transports/verbs/device.hpp"

#include <net/if.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"

namespace braid::verbs {

void FreeDeleter::operator()(void* p) const { std::free(p); }

AlignedBuffer allocate_aligned(std::size_t bytes) {
  const std::size_t page = 4096;
  const std::size_t rounded = (bytes + page - 1) / page * page;
  void* p = std::aligned_alloc(page, rounded ? rounded : page);
  if (!p) fail(ErrorCode::Transport, "verbs: cannot allocate {} bytes", bytes);
  std::memset(p, 0, rounded ? rounded : page);
  return AlignedBuffer(static_cast<std::uint8_t*>(p));
}

// --- BRAID_IB_HCA --------------------------------------------------------

HcaSpec parse_hca_spec(const std::string& text) {
  HcaSpec s;
  std::string rest = text;
  if (!rest.empty() && rest[0] == '^') s.exclude = true, rest.erase(0, 1);
  if (!rest.empty() && rest[0] == '=') s.exact = true, rest.erase(0, 1);
  std::size_t pos = 0;
  while (pos <= rest.size()) {
    const std::size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      HcaSpec::Item it;
      const auto colon = item.find(':');
      it.name = item.substr(0, colon);
      if (colon != std::string::npos) {
        const std::string p = item.substr(colon + 1);
        char* end = nullptr;
        const long v = std::strtol(p.c_str(), &end, 10);
        if (p.empty() || *end != '\0' || v < 1 || v > 255)
          fail(ErrorCode::InvalidArgument,
               "BRAID_IB_HCA='{}' is not valid: '{}' has a bad port number (expected device[:port], port 1..255)",
               text, item);
        it.port = static_cast<int>(v);
      }
      s.items.push_back(std::move(it));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}

bool hca_selected(const HcaSpec& spec, const std::string& device, int port) {
  if (spec.items.empty()) return true;
  bool hit = false;
  for (const auto& it : spec.items) {
    const bool name_ok = spec.exact ? device == it.name : device.compare(0, it.name.size(), it.name) == 0;
    if (name_ok && (it.port == 0 || it.port == port)) hit = true;
  }
  return spec.exclude ? !hit : hit;
}

// --- GIDs ----------------------------------------------------------------

const char* gid_type_name(GidType t) {
  switch (t) {
    case GidType::IB: return "IB";
    case GidType::RoCEv1: return "RoCE v1";
    case GidType::RoCEv2: return "RoCE v2";
  }
  return "?";
}

std::string gid_text(const RawGid& g) {
  std::string s;
  for (int i = 0; i < 16; i += 2) {
    if (i) s += ':';
    s += fmt::format("{:02x}{:02x}", g[static_cast<std::size_t>(i)], g[static_cast<std::size_t>(i + 1)]);
  }
  return s;
}

bool gid_is_zero(const RawGid& g) {
  for (auto b : g)
    if (b) return false;
  return true;
}

bool gid_is_ipv4_mapped(const RawGid& g) {
  for (int i = 0; i < 10; ++i)
    if (g[static_cast<std::size_t>(i)]) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

bool gid_is_link_local(const RawGid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

int choose_gid_index(const std::vector<GidEntry>& table) {
  // Lower score wins; ties go to the lower index (the table's own order).
  auto score = [](const GidEntry& e) {
    if (gid_is_zero(e.gid) || e.type == GidType::IB) return 100;
    const int type = e.type == GidType::RoCEv2 ? 0 : 10;
    const int kind = gid_is_ipv4_mapped(e.gid) ? 0 : gid_is_link_local(e.gid) ? 2 : 1;
    return type + kind;
  };
  int best = -1, best_score = 100;
  for (const auto& e : table) {
    const int s = score(e);
    if (s < best_score || (s == best_score && best >= 0 && e.index < best)) {
      best = e.index;
      best_score = s;
    }
  }
  return best;
}

namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

GidType type_from_sysfs(const std::string& device, int port, int index) {
  const std::string t =
      read_line(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/types/{}", device, port, index));
  if (t.find("v2") != std::string::npos) return GidType::RoCEv2;
  if (t.find("RoCE") != std::string::npos || t.find("v1") != std::string::npos) return GidType::RoCEv1;
  return GidType::IB;
}

std::string netdev_name(std::uint32_t ifindex) {
  char buf[IF_NAMESIZE] = {};
  return ifindex && if_indextoname(ifindex, buf) ? std::string(buf) : std::string();
}

const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "?";
}

// BRAID_IB_GID_INDEX, or -1 when unset.
int gid_index_from_env() {
  return static_cast<int>(
      env_integer("BRAID_IB_GID_INDEX", 0, 65535, "a GID table index (0, 1, ...)").value_or(-1));
}

}  // namespace

int mtu_bytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

std::vector<GidEntry> read_gid_table(ibv_context* ctx, const std::string& device, int port, int table_len) {
  std::vector<GidEntry> out;
  const int cap = table_len > 0 ? table_len : 1;
  // Every port's valid entries at once; a port may have up to table_len.
  std::vector<ibv_gid_entry> all(static_cast<std::size_t>(cap) * 8);
  const ssize_t n = ibv_query_gid_table(ctx, all.data(), all.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; ++i) {
      const auto& e = all[static_cast<std::size_t>(i)];
      if (static_cast<int>(e.port_num) != port) continue;
      GidEntry g;
      g.index = static_cast<int>(e.gid_index);
      std::memcpy(g.gid.data(), e.gid.raw, 16);
      g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::RoCEv2
               : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::RoCEv1 : GidType::IB;
      g.netdev = netdev_name(e.ndev_ifindex);
      if (!gid_is_zero(g.gid)) out.push_back(std::move(g));
    }
    return out;
  }
  // Older kernels: one entry at a time, the type from sysfs.
  for (int i = 0; i < table_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), i, &gid) != 0) continue;
    GidEntry g;
    g.index = i;
    std::memcpy(g.gid.data(), gid.raw, 16);
    if (gid_is_zero(g.gid)) continue;
    g.type = type_from_sysfs(device, port, i);
    g.netdev = read_line(fmt::format("/sys/class/infiniband/{}/ports/{}/gid_attrs/ndevs/{}", device, port, i));
    out.push_back(std::move(g));
  }
  return out;
}

std::unique_ptr<Device> open_device(std::string* why) {
  const char* hca_env = std::getenv("BRAID_IB_HCA");
  const HcaSpec spec = parse_hca_spec(hca_env ? hca_env : "");
  const int forced_gid = gid_index_from_env();

  int num = 0;
  DeviceListPtr list(ibv_get_device_list(&num));
  if (!list || num == 0) {
    *why = list ? std::string("no RDMA device found (is an RDMA driver such as mlx5_ib or rdma_rxe loaded?)")
                : fmt::format("no RDMA device found (ibv_get_device_list: {}; no RDMA driver is loaded)", errno_text());
    return nullptr;
  }
  std::vector<std::string> seen;
  for (int d = 0; d < num; ++d) {
    ibv_device* dev = list.get()[d];
    const std::string name = ibv_get_device_name(dev);
    ContextPtr ctx(ibv_open_device(dev));
    if (!ctx) {
      seen.push_back(fmt::format("{} (cannot open: {})", name, errno_text()));
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx.get(), &attr) != 0) {
      seen.push_back(fmt::format("{} (cannot query)", name));
      continue;
    }
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      if (!hca_selected(spec, name, port)) {
        seen.push_back(fmt::format("{}:{} (not selected by BRAID_IB_HCA)", name, port));
        continue;
      }
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), static_cast<std::uint8_t>(port), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE) {
        seen.push_back(fmt::format("{}:{} ({})", name, port, port_state_name(pa.state)));
        continue;
      }
      auto out = std::make_unique<Device>();
      out->name = name;
      out->port = port;
      out->attr = attr;
      out->port_attr = pa;
      out->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      const auto table = read_gid_table(ctx.get(), name, port, pa.gid_tbl_len);
      int index = forced_gid;
      if (index >= 0) {
        if (index >= pa.gid_tbl_len)
          fail(ErrorCode::InvalidArgument, "BRAID_IB_GID_INDEX={} is beyond the GID table of {} port {} ({} entries)",
               index, name, port, pa.gid_tbl_len);
        bool found = false;
        for (const auto& e : table)
          if (e.index == index) {
            out->gid = e.gid;
            out->gid_type = e.type;
            found = true;
          }
        if (!found) {
          // Not in the valid table (or the table query is missing): ask directly.
          ibv_gid g{};
          if (ibv_query_gid(ctx.get(), static_cast<std::uint8_t>(port), index, &g) != 0 ||
              gid_is_zero(*reinterpret_cast<RawGid*>(g.raw)))
            fail(ErrorCode::InvalidArgument, "BRAID_IB_GID_INDEX={}: {} port {} has no GID at that index", index,
                 name, port);
          std::memcpy(out->gid.data(), g.raw, 16);
          out->gid_type = type_from_sysfs(name, port, index);
        }
      } else if (out->ethernet) {
        index = choose_gid_index(table);
        if (index < 0) {
          seen.push_back(fmt::format("{}:{} (RoCE port without a usable GID: no IP address on its netdev?)", name, port));
          continue;
        }
        for (const auto& e : table)
          if (e.index == index) {
            out->gid = e.gid;
            out->gid_type = e.type;
          }
      } else {
        // InfiniBand routes by LID; GID 0 (subnet prefix and port GUID) is
        // for a global route header, used only toward another subnet.
        for (const auto& e : table)
          if (e.index == 0) {
            out->gid = e.gid;
            index = 0;
          }
      }
      out->gid_index = index;
      out->ctx = std::move(ctx);
      BRAID_INFO("verbs: using {} port {} ({}, MTU {}, GID index {} {} {})", name, port,
                 out->ethernet ? "RoCE" : "InfiniBand", mtu_bytes(pa.active_mtu), index, gid_text(out->gid),
                 gid_type_name(out->gid_type));
      return out;
    }
  }
  std::string list_text;
  for (const auto& s : seen) list_text += (list_text.empty() ? "" : ", ") + s;
  *why = fmt::format("no RDMA device with an active port{}: {}",
                     hca_env && *hca_env ? fmt::format(" matches BRAID_IB_HCA='{}'", hca_env) : "", list_text);
  return nullptr;
}

std::vector<DeviceReport> survey_devices() {
  std::vector<DeviceReport> out;
  int num = 0;
  DeviceListPtr list(ibv_get_device_list(&num));
  if (!list) return out;
  for (int d = 0; d < num; ++d) {
    ibv_device* dev = list.get()[d];
    DeviceReport r;
    r.name = ibv_get_device_name(dev);
    ContextPtr ctx(ibv_open_device(dev));
    ibv_device_attr attr{};
    if (!ctx) {
      r.error = fmt::format("cannot open: {}", errno_text());
    } else if (ibv_query_device(ctx.get(), &attr) != 0) {
      r.error = "cannot query the device";
    } else {
      for (int port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx.get(), static_cast<std::uint8_t>(port), &pa) != 0) continue;
        PortReport p;
        p.port = port;
        p.state = port_state_name(pa.state);
        p.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand";
        p.active_mtu = mtu_bytes(pa.active_mtu);
        p.lid = pa.lid;
        p.gids = read_gid_table(ctx.get(), r.name, port, pa.gid_tbl_len);
        p.chosen_gid = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? choose_gid_index(p.gids) : -1;
        r.ports.push_back(std::move(p));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace braid::verbs

#include "src/api/pmix_init.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>

#include "braid/version.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"

#if BRAID_HAVE_PMIX
#include <dlfcn.h>
#include <pmix.h>
#endif

namespace braid::detail {

bool pmix_built() { return BRAID_HAVE_PMIX != 0; }

bool under_pmix() {
  const char* r = std::getenv("PMIX_RANK");
  const char* ns = std::getenv("PMIX_NAMESPACE");
  return r && *r && ns && *ns;
}

#if !BRAID_HAVE_PMIX

PmixMeeting pmix_meet(const std::string&, Millis) {
  fail(ErrorCode::NotSupported, "pmix://: this build of Braid has no PMIx (meson feature 'pmix' needs libpmix-dev); "
       "pass MASTER_ADDR and MASTER_PORT with env:// instead");
}

#else

namespace {

// libpmix is opened when pmix:// is used, not linked: libbraid then loads
// where libpmix2 is not installed (a VM, a container), and only a job that
// asks for PMIx needs it, as only a launcher that speaks PMIx provides it.
struct Api {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Error_string) error_string = nullptr;
  decltype(&PMIx_Value_destruct) value_destruct = nullptr;
  std::string missing;  // why it could not be loaded, or empty
};

const Api& api() {
  static const Api a = [] {
    Api x;
    void* lib = ::dlopen("libpmix.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      x.missing = e ? e : "libpmix.so.2 not found";
      return x;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (!fn && x.missing.empty()) x.missing = fmt::format("libpmix.so.2 has no {}", name);
    };
    sym(x.init, "PMIx_Init");
    sym(x.finalize, "PMIx_Finalize");
    sym(x.get, "PMIx_Get");
    sym(x.put, "PMIx_Put");
    sym(x.commit, "PMIx_Commit");
    sym(x.fence, "PMIx_Fence");
    sym(x.error_string, "PMIx_Error_string");
    sym(x.value_destruct, "PMIx_Value_destruct");
    return x;  // the library stays open: PMIx keeps threads of its own
  }();
  if (!a.missing.empty())
    fail(ErrorCode::NotSupported, "pmix://: PMIx could not be loaded ({}): install libpmix2, or pass MASTER_ADDR and "
         "MASTER_PORT with env://", a.missing);
  return a;
}

std::string status_text(pmix_status_t s) { return fmt::format("{} ({})", api().error_string(s), static_cast<int>(s)); }

void release(pmix_value_t*& v) {
  api().value_destruct(v);
  std::free(v);
  v = nullptr;
}

// An info of a plain value (no memory of its own to release).
template <class T>
void load_info(pmix_info_t& i, const char* key, T value, pmix_data_type_t type) {
  std::memset(&i, 0, sizeof i);
  std::strncpy(i.key, key, PMIX_MAX_KEYLEN);
  i.value.type = type;
  if constexpr (std::is_same_v<T, bool>) i.value.data.flag = value;
  else i.value.data.integer = value;
}

// PMIx is initialised for the exchange only: finalized on every way out,
// so that a launcher that watches for it sees this process leave PMIx.
struct Session {
  pmix_proc_t me{};
  Session() {
    const pmix_status_t s = api().init(&me, nullptr, 0);
    if (s != PMIX_SUCCESS)
      fail(ErrorCode::InvalidArgument, "pmix://: PMIx_Init failed: {}: expected a PMIx launcher (mpirun, prterun, "
           "srun --mpi=pmix) to have started this process", status_text(s));
  }
  ~Session() { api().finalize(nullptr, 0); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // A job-level value, or nullopt where the launcher gives none (or not
  // as a uint32); `status` says why.
  std::optional<std::uint32_t> job_u32(const char* key, std::string* status = nullptr) const {
    pmix_proc_t job{};
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* v = nullptr;
    const pmix_status_t s = api().get(&job, key, nullptr, 0, &v);
    if (s != PMIX_SUCCESS || !v) {
      if (status) *status = status_text(s);
      return std::nullopt;
    }
    std::optional<std::uint32_t> out;
    if (v->type == PMIX_UINT32) out = v->data.uint32;
    else if (status) *status = "a value of another type";
    release(v);
    return out;
  }
};

}  // namespace

PmixMeeting pmix_meet(const std::string& group_name, Millis timeout) {
  Session pmix;
  PmixMeeting m;
  std::string why;
  const auto job_size = pmix.job_u32(PMIX_JOB_SIZE, &why);
  if (!job_size) fail(ErrorCode::InvalidArgument, "pmix://: the launcher did not give the job's size ({}): {}", PMIX_JOB_SIZE, why);
  const std::uint32_t size = *job_size;
  if (size < 1 || size > (1u << 24))
    fail(ErrorCode::InvalidArgument, "pmix://: the launcher gave a job size of {}: expected 1..{}", size, 1 << 24);
  if (pmix.me.rank >= size)
    fail(ErrorCode::InvalidArgument, "pmix://: the launcher gave rank {} in a job of {}", pmix.me.rank, size);
  m.rank = static_cast<int>(pmix.me.rank);
  m.size = static_cast<int>(size);
  const std::string key = "braid.store." + (group_name.empty() ? std::string("default") : group_name);

  if (m.rank == 0) {
    // All ranks on this node: the store stays on loopback. Otherwise on the
    // address other hosts reach us at (BRAID_SOCKET_IFNAME chooses).
    const bool one_node = pmix.job_u32(PMIX_LOCAL_SIZE) == size;  // unknown: not
    m.store_host = one_node ? "127.0.0.1" : net::advertised_address("");
    m.server = std::make_unique<store::TcpStoreServer>(m.store_host, 0);
    m.store_port = m.server->port();
    const std::string where = fmt::format("{} {}", m.store_host, m.store_port);
    pmix_value_t v{};
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(where.c_str());
    if (const pmix_status_t s = api().put(PMIX_GLOBAL, key.c_str(), &v); s != PMIX_SUCCESS)
      fail(ErrorCode::Store, "pmix://: PMIx_Put of the store's address failed: {}", status_text(s));
  }
  if (const pmix_status_t s = api().commit(); s != PMIX_SUCCESS)
    fail(ErrorCode::Store, "pmix://: PMIx_Commit failed: {}", status_text(s));
  // Everyone, so that rank 0's put is there to read; bounded by the timeout.
  pmix_info_t info[2];
  const int seconds = static_cast<int>(std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  load_info(info[0], PMIX_COLLECT_DATA, true, PMIX_BOOL);
  load_info(info[1], PMIX_TIMEOUT, seconds, PMIX_INT);
  const pmix_status_t fs = api().fence(nullptr, 0, info, 2);
  if (fs == PMIX_ERR_TIMEOUT)
    fail(ErrorCode::Timeout, "pmix://: the launcher's fence timed out after {} s: not every rank of the job called "
         "init_process_group", seconds);
  if (fs != PMIX_SUCCESS) fail(ErrorCode::Store, "pmix://: PMIx_Fence failed: {}", status_text(fs));

  if (m.rank != 0) {
    pmix_proc_t zero{};
    PMIX_LOAD_PROCID(&zero, pmix.me.nspace, 0);
    pmix_value_t* v = nullptr;
    const pmix_status_t s = api().get(&zero, key.c_str(), nullptr, 0, &v);
    if (s != PMIX_SUCCESS || !v)
      fail(ErrorCode::Store, "pmix://: rank 0's store address ({}) is not in PMIx: {} (is rank 0 a Braid process of "
           "the same group_name?)", key, status_text(s));
    std::string where = v->type == PMIX_STRING && v->data.string ? v->data.string : "";
    release(v);
    const auto sp = where.rfind(' ');
    char* end = nullptr;
    const long port = sp == std::string::npos ? 0 : std::strtol(where.c_str() + sp + 1, &end, 10);
    if (sp == std::string::npos || sp == 0 || port < 1 || port > 65535 || !end || *end)
      fail(ErrorCode::Store, "pmix://: rank 0 put '{}' under {}: expected 'HOST PORT'", where.substr(0, 100), key);
    m.store_host = where.substr(0, sp);
    m.store_port = static_cast<int>(port);
  }
  BRAID_INFO("pmix://: rank {} of {}, the store on {}:{}", m.rank, m.size, m.store_host, m.store_port);
  return m;
}

#endif

}  // namespace braid::detail

// braid_torch._C: the ProcessGroupBraid class, as a subclass of torch's
// ProcessGroup (braid_torch/__init__.py registers the backend with it).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "braid/version.hpp"
#include "process_group.hpp"
#include "shareable.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Braid's torch.distributed backend (see braid_torch)";
  m.attr("braid_version") = BRAID_VERSION;
  // torch's ProcessGroup and Store types must be registered first.
  py::object base = py::module::import("torch.distributed").attr("ProcessGroup");
  py::class_<braid_torch::ProcessGroupBraid, c10::intrusive_ptr<braid_torch::ProcessGroupBraid>>(
      m, "ProcessGroupBraid", base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& backend, const std::string& store_host) {
             return c10::make_intrusive<braid_torch::ProcessGroupBraid>(store, rank, size, timeout, backend,
                                                                        store_host);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("backend") = "auto",
           py::arg("store_host") = "", py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("transport_backend",
                             [](const braid_torch::ProcessGroupBraid& pg) { return pg.communicator().backend(); })
      .def_property_readonly("shareable", &braid_torch::ProcessGroupBraid::shareable);
  m.def("use_shareable_memory", &braid_torch::use_shareable_memory, py::arg("min_bytes") = std::size_t{1} << 20);
  m.def("shareable_memory_on", &braid_torch::shareable_memory_on);
}

// tailmark.torch._c: the process group's constructor, for
// tailmark/torch.py to register as the backend "tailmark".
#include "engine.h"
#include "process_group.h"
#include "tensor_heap.h"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

PYBIND11_MODULE(_c, m) {
    m.doc() = "tailmark's torch.distributed backend (see tailmark.torch)";
    // Import torch.distributed first, so pybind11 knows its Store and
    // ProcessGroup types (what this function takes and returns).
    py::module_::import("torch.distributed");
    m.def(
        "create_process_group",
        [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout) {
            return tailmark::torch_backend::ProcessGroupTailmark::create(store, rank, size, timeout);
        },
        py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "A tailmark process group (what torch.distributed.init_process_group('tailmark') makes)");
    m.def(
        "set_allreduce",
        [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const std::string& algo) {
            auto* t = dynamic_cast<tailmark::torch_backend::ProcessGroupTailmark*>(pg.get());
            if (t == nullptr)
                throw py::type_error("tailmark: set_allreduce: not a tailmark process group");
            try {
                t->set_allreduce(tailmark::torch_backend::allreduce_algo_of(algo));
            } catch (const std::invalid_argument& e) {
                throw py::value_error(std::string("tailmark: set_allreduce: ") + e.what());
            }
        },
        py::arg("group"), py::arg("algorithm"),
        "all_reduce's algorithm on this group from now on: 'ring', 'rd' (recursive doubling), 'hier' "
        "(hierarchical: within each host, across hosts, within each host again) or 'auto' (by size)");
    m.def(
        "stats",
        [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
            auto* t = dynamic_cast<tailmark::torch_backend::ProcessGroupTailmark*>(pg.get());
            if (t == nullptr)
                throw py::type_error("tailmark: stats: not a tailmark process group");
            const auto c = t->counts();
            py::dict d;
            d["pieces_in_place"] = c.in_place;
            d["pieces_copied"] = c.copied;
            const auto* heap = tailmark::torch_backend::TensorHeap::get(0);
            d["heap_bytes"] = heap != nullptr ? heap->used() : 0;
            return d;
        },
        py::arg("group"),
        "This rank's pieces to ranks of its host: read by them in place in its tensor (pieces_in_place), or "
        "copied into a shared slot first (pieces_copied); and the bytes of its tensors in its heap (heap_bytes)");
    m.def(
        "shutdown", [] { tailmark::torch_backend::Engine::shutdown_all(); },
        py::call_guard<py::gil_scoped_release>(),
        "Stops every tailmark process group's thread, failing what is pending (registered with atexit)");
}

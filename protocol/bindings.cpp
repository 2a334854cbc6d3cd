// Python face of the wire contracts: the same codec the C++ services use.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/info_message.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

// Any object with the buffer protocol (bytes, memoryview, zmq.Frame); read in place, not copied.
std::pair<const void*, std::size_t> view(const py::buffer& buffer) {
  const py::buffer_info info = buffer.request();
  return {info.ptr, static_cast<std::size_t>(info.size * info.itemsize)};
}

}  // namespace

void bind_protocol(py::module_& m) {
  using namespace sectorflow::protocol;
  py::register_exception<ProtocolError>(m, "ProtocolError", PyExc_ValueError);
  m.attr("DATA_HEADER_VERSION") = kDataHeaderVersion;
  m.attr("INFO_VERSION") = kInfoVersion;

  py::class_<Geometry>(m, "Geometry", "Frame and sector shape; sectors tile the frame row-major.")
      .def(py::init([](std::uint32_t frame_rows, std::uint32_t frame_cols, std::uint32_t sector_rows,
                       std::uint32_t sector_cols, std::uint32_t itemsize) {
             Geometry g{frame_rows, frame_cols, sector_rows, sector_cols, itemsize};
             g.validate();
             return g;
           }),
           py::arg("frame_rows"), py::arg("frame_cols"), py::arg("sector_rows"), py::arg("sector_cols"),
           py::arg("itemsize") = 2)
      .def_readonly("frame_rows", &Geometry::frame_rows)
      .def_readonly("frame_cols", &Geometry::frame_cols)
      .def_readonly("sector_rows", &Geometry::sector_rows)
      .def_readonly("sector_cols", &Geometry::sector_cols)
      .def_readonly("itemsize", &Geometry::itemsize)
      .def_property_readonly("n_sectors", &Geometry::n_sectors)
      .def_property_readonly("sector_bytes", &Geometry::sector_bytes)
      .def("sector_row0", &Geometry::sector_row0, py::arg("sector"))
      .def("sector_col0", &Geometry::sector_col0, py::arg("sector"))
      .def("__repr__", [](const Geometry& g) {
        return "Geometry(" + std::to_string(g.frame_rows) + "x" + std::to_string(g.frame_cols) + ", sectors " +
               std::to_string(g.sector_rows) + "x" + std::to_string(g.sector_cols) + ")";
      });

  py::class_<DataHeader>(m, "DataHeader", "The header frame of a data message.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t frame_number, std::uint32_t sector,
                       std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t position_x,
                       std::uint32_t position_y, std::uint32_t thread_id) {
             return DataHeader{scan_number, frame_number, sector, scan_x, scan_y, position_x, position_y, thread_id};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("frame_number"), py::arg("sector"), py::arg("scan_x"),
           py::arg("scan_y"), py::arg("position_x"), py::arg("position_y"), py::arg("thread_id") = 0)
      .def_readwrite("scan_number", &DataHeader::scan_number)
      .def_readwrite("frame_number", &DataHeader::frame_number)
      .def_readwrite("sector", &DataHeader::sector)
      .def_readwrite("scan_x", &DataHeader::scan_x)
      .def_readwrite("scan_y", &DataHeader::scan_y)
      .def_readwrite("position_x", &DataHeader::position_x)
      .def_readwrite("position_y", &DataHeader::position_y)
      .def_readwrite("thread_id", &DataHeader::thread_id)
      .def_property_readonly("position", &DataHeader::position)
      .def("where", &DataHeader::where)
      .def(py::self == py::self)
      .def("__repr__", [](const DataHeader& h) { return "DataHeader(" + h.where() + ")"; });

  m.def("encode_header", [](const DataHeader& h) { return py::bytes(encode_header(h)); }, py::arg("header"),
        "Encode a data header; returns the first frame of a data message.");
  m.def("decode_header", [](const py::buffer& b) { auto [p, n] = view(b); return decode_header(p, n); },
        py::arg("frame"), "Decode and validate a data header; raises ProtocolError naming the field.");
  m.def("peek_frame", [](const py::buffer& b) {
          auto [p, n] = view(b);
          const FrameRef ref = peek_frame(p, n);
          return py::make_tuple(ref.scan_number, ref.frame_number);
        },
        py::arg("frame"), "(scan_number, frame_number) of a header after checking its type, length and version.");
  m.def("check_payload", &check_payload, py::arg("header"), py::arg("payload_bytes"), py::arg("geometry"),
        "Raise ProtocolError unless the payload size and sector index fit the geometry.");

  py::class_<InfoMessage>(m, "InfoMessage", "Per-scan routing and expected message counts.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t receiver, std::uint32_t thread_id,
                       std::uint32_t scan_x, std::uint32_t scan_y, std::vector<std::string> routing,
                       std::map<std::string, std::uint64_t> counts) {
             return InfoMessage{scan_number, receiver, thread_id, scan_x, scan_y, std::move(routing),
                                std::move(counts)};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("receiver"), py::arg("thread_id"), py::arg("scan_x"),
           py::arg("scan_y"), py::arg("routing"), py::arg("counts"))
      .def_readwrite("scan_number", &InfoMessage::scan_number)
      .def_readwrite("receiver", &InfoMessage::receiver)
      .def_readwrite("thread_id", &InfoMessage::thread_id)
      .def_readwrite("scan_x", &InfoMessage::scan_x)
      .def_readwrite("scan_y", &InfoMessage::scan_y)
      .def_readwrite("routing", &InfoMessage::routing)
      .def_readwrite("counts", &InfoMessage::counts)
      .def(py::self == py::self)
      .def("__repr__", [](const InfoMessage& i) {
        return "InfoMessage(scan " + std::to_string(i.scan_number) + ", receiver " + std::to_string(i.receiver) +
               ", thread " + std::to_string(i.thread_id) + ", " + std::to_string(i.routing.size()) + " groups)";
      });
  m.def("encode_info", [](const InfoMessage& i) { return py::bytes(encode_info(i)); }, py::arg("info"));
  m.def("decode_info", [](const py::buffer& b) { auto [p, n] = view(b); return decode_info(p, n); },
        py::arg("frame"), "Decode and validate an info message; raises ProtocolError naming the key.");
}

}  // namespace sectorflow::bindings

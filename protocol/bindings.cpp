// Python face of the wire contracts: the same codec the C++ services use.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>

#include "bindings.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/native_header.hpp"
#include "sectorflow/protocol/refusal.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

// Any object with the buffer protocol (bytes, memoryview, zmq.Frame); read in place, not copied.
std::pair<const void*, std::size_t> view(const py::buffer& buffer) {
  const py::buffer_info info = buffer.request();
  return {info.ptr, static_cast<std::size_t>(info.size * info.itemsize)};
}

// A buffer the C++ side may treat as one flat run of bytes.
bool c_contiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t i = info.ndim; i-- > 0;) {
    if (info.shape[i] != 1 && info.strides[i] != expected) return false;
    expected *= info.shape[i];
  }
  return true;
}

void bind_raw_files(py::module_& m);

}  // namespace

void bind_kvstore_records(py::module_& m);  // bindings_records.cpp
void bind_scan_records(py::module_& m);     // bindings_scan_records.cpp

namespace {

}  // namespace

void bind_protocol(py::module_& m) {
  using namespace sectorflow::protocol;
  const auto& protocol_error = py::register_exception<ProtocolError>(
      m, "ProtocolError", py::module_::import("sectorflow.errors").attr("SectorflowValueError"));
  py::register_exception<RawFileError>(m, "RawFileError", protocol_error);
  m.attr("DATA_HEADER_VERSION") = kDataHeaderVersion;
  m.attr("INFO_VERSION") = kInfoVersion;
  m.attr("DATA_HEADER_RUN_VERSION") = kDataHeaderRunVersion;
  m.attr("MAX_SCAN_SIDE") = kMaxScanSide;
  m.attr("MAX_ROUTING_LENGTH") = kMaxRoutingLength;
  m.attr("MAX_INFO_BYTES") = kMaxInfoBytes;
  py::list kinds;
  for (std::size_t i = 0; i < kRefusalKinds; ++i) kinds.append(to_string(static_cast<Refusal>(i)));
  m.attr("REFUSAL_KINDS") = py::tuple(kinds);

  py::class_<Geometry>(m, "Geometry", "Frame and sector shape; sectors tile the frame row-major.")
      .def(py::init([](std::uint32_t frame_rows, std::uint32_t frame_cols, std::uint32_t sector_rows,
                       std::uint32_t sector_cols, std::uint32_t itemsize) {
             Geometry g{frame_rows, frame_cols, sector_rows, sector_cols, itemsize};
             g.validate();
             return g;
           }),
           py::arg("frame_rows"), py::arg("frame_cols"), py::arg("sector_rows"), py::arg("sector_cols"),
           py::arg("itemsize"), "[detector]: Config.geometry(); itemsize is the bytes of a dtype pixel.")
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
                       std::uint32_t position_y, std::uint32_t thread_id, std::uint32_t run) {
             return DataHeader{scan_number, frame_number, sector, scan_x,   scan_y,
                               position_x,  position_y,   thread_id, run};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("frame_number"), py::arg("sector"), py::arg("scan_x"),
           py::arg("scan_y"), py::arg("position_x"), py::arg("position_y"), py::arg("thread_id") = 0,
           py::arg("run") = 0)
      .def_readwrite("scan_number", &DataHeader::scan_number)
      .def_readwrite("frame_number", &DataHeader::frame_number)
      .def_readwrite("sector", &DataHeader::sector)
      .def_readwrite("scan_x", &DataHeader::scan_x)
      .def_readwrite("scan_y", &DataHeader::scan_y)
      .def_readwrite("position_x", &DataHeader::position_x)
      .def_readwrite("position_y", &DataHeader::position_y)
      .def_readwrite("thread_id", &DataHeader::thread_id)
      .def_readwrite("run", &DataHeader::run)
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

  m.def("decode_data",
        [](const py::buffer& header, std::size_t payload_bytes, const Geometry& geometry,
           std::uint64_t max_scan_positions, std::uint32_t sector) {
          auto [p, n] = view(header);
          return decode_data(p, n, payload_bytes, DataExpectations{geometry, {max_scan_positions}, sector});
        },
        py::arg("header"), py::arg("payload_bytes"), py::arg("geometry"), py::arg("max_scan_positions"),
        py::arg("sector"),
        "Decode a data message's header and check it as the aggregator and the NodeGroups do (geometry, "
        "scan limit, the port's sector, payload size); raises ProtocolError.");
  m.def("check_scan_shape",
        [](std::uint32_t scan_x, std::uint32_t scan_y, std::uint64_t max_scan_positions) {
          check_scan_shape(scan_x, scan_y, ScanLimits{max_scan_positions}, "scan");
        },
        py::arg("scan_x"), py::arg("scan_y"), py::arg("max_scan_positions"),
        "Raise ProtocolError unless both sides are 1..MAX_SCAN_SIDE and the scan has at most "
        "max_scan_positions positions.");
  m.def("max_frame_bytes", &max_frame_bytes, py::arg("geometry"),
        "The largest frame a data socket accepts (its ZMQ_MAXMSGSIZE).");

  py::class_<NativeHeader>(m, "NativeHeader",
                           "The 4D Camera receivers' own data header (wire = \"native\"), field by field.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t frame_number, std::uint32_t frames_this_thread,
                       std::uint32_t positions_per_row_m1, std::uint32_t rows_m1, std::uint32_t position_x,
                       std::uint32_t position_y, std::uint32_t thread_id, std::uint32_t module) {
             return NativeHeader{scan_number, frame_number, frames_this_thread, positions_per_row_m1, rows_m1,
                                 position_x,  position_y,   thread_id,          module};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("frame_number"), py::arg("frames_this_thread"),
           py::arg("positions_per_row_m1"), py::arg("rows_m1"), py::arg("position_x"), py::arg("position_y"),
           py::arg("thread_id"), py::arg("module"))
      .def_readwrite("scan_number", &NativeHeader::scan_number)
      .def_readwrite("frame_number", &NativeHeader::frame_number)
      .def_readwrite("frames_this_thread", &NativeHeader::frames_this_thread)
      .def_readwrite("positions_per_row_m1", &NativeHeader::positions_per_row_m1)
      .def_readwrite("rows_m1", &NativeHeader::rows_m1)
      .def_readwrite("position_x", &NativeHeader::position_x)
      .def_readwrite("position_y", &NativeHeader::position_y)
      .def_readwrite("thread_id", &NativeHeader::thread_id)
      .def_readwrite("module", &NativeHeader::module)
      .def(py::self == py::self)
      .def("__repr__", [](const NativeHeader& h) { return "NativeHeader(" + to_data_header(h).where() + ")"; });
  m.def("encode_native_header", [](const NativeHeader& h) { return py::bytes(encode_native_header(h)); },
        py::arg("header"), "Encode a native header; returns the first frame of a native data message.");
  m.def("decode_native_header", [](const py::buffer& b) { auto [p, n] = view(b); return decode_native_header(p, n); },
        py::arg("frame"), "Decode and validate a native header; raises ProtocolError naming the field.");
  m.def("to_data_header", &to_data_header, py::arg("header"),
        "The SFSP header a relay thread forwards a native sector under.");
  m.def("decode_native_data",
        [](const py::buffer& header, std::size_t payload_bytes, const Geometry& geometry,
           std::uint64_t max_scan_positions, std::uint32_t sector, std::uint32_t threads) {
          auto [p, n] = view(header);
          return decode_native_data(p, n, payload_bytes,
                                    NativeExpectations{{geometry, {max_scan_positions}, sector}, threads});
        },
        py::arg("header"), py::arg("payload_bytes"), py::arg("geometry"), py::arg("max_scan_positions"),
        py::arg("sector"), py::arg("threads"),
        "Decode a native data message's header and check it as a native receiver's relay thread does; "
        "raises ProtocolError.");

  py::class_<InfoMessage>(m, "InfoMessage", "Per-scan routing and expected message counts.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t receiver, std::uint32_t thread_id,
                       std::uint32_t scan_x, std::uint32_t scan_y, std::vector<std::string> routing,
                       std::map<std::string, std::uint64_t> counts, std::uint32_t run) {
             return InfoMessage{scan_number, receiver, thread_id, scan_x, scan_y, std::move(routing),
                                std::move(counts), run};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("receiver"), py::arg("thread_id"), py::arg("scan_x"),
           py::arg("scan_y"), py::arg("routing"), py::arg("counts"), py::arg("run") = 0)
      .def_readwrite("scan_number", &InfoMessage::scan_number)
      .def_readwrite("receiver", &InfoMessage::receiver)
      .def_readwrite("thread_id", &InfoMessage::thread_id)
      .def_readwrite("scan_x", &InfoMessage::scan_x)
      .def_readwrite("scan_y", &InfoMessage::scan_y)
      .def_readwrite("routing", &InfoMessage::routing)
      .def_readwrite("counts", &InfoMessage::counts)
      .def_readwrite("run", &InfoMessage::run)
      .def(py::self == py::self)
      .def("__repr__", [](const InfoMessage& i) {
        return "InfoMessage(scan " + std::to_string(i.scan_number) + ", receiver " + std::to_string(i.receiver) +
               ", thread " + std::to_string(i.thread_id) + ", " + std::to_string(i.routing.size()) + " groups)";
      });
  m.def("encode_info", [](const InfoMessage& i) { return py::bytes(encode_info(i)); }, py::arg("info"));
  m.def("decode_info", [](const py::buffer& b) { auto [p, n] = view(b); return decode_info(p, n); },
        py::arg("frame"), "Decode and validate an info message; raises ProtocolError naming the key.");

  bind_raw_files(m);
  bind_kvstore_records(m);
  bind_scan_records(m);
}

namespace {

void bind_raw_files(py::module_& m) {
  using namespace sectorflow::protocol;
  m.attr("RAW_HEADER_BYTES") = kRawHeaderBytes;
  m.attr("RAW_WRITING_SUFFIX") = kRawWritingSuffix;
  m.attr("RAW_PARTIAL_SUFFIX") = kRawPartialSuffix;

  py::class_<RawFileName>(m, "RawFileName", "What a raw file's name says: scan, sector, producer thread.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t sector, std::uint32_t thread_id) {
             return RawFileName{scan_number, sector, thread_id};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("sector"), py::arg("thread_id") = 0)
      .def_readonly("scan_number", &RawFileName::scan_number)
      .def_readonly("sector", &RawFileName::sector)
      .def_readonly("thread_id", &RawFileName::thread_id)
      .def(py::self == py::self)
      .def("__repr__", [](const RawFileName& n) { return "RawFileName('" + raw_file_name(n) + "')"; });

  m.def("raw_file_name",
        [](std::uint32_t scan_number, std::uint32_t sector, std::uint32_t thread_id) {
          return raw_file_name(RawFileName{scan_number, sector, thread_id});
        },
        py::arg("scan_number"), py::arg("sector"), py::arg("thread_id") = 0,
        "data_scan{scan_number:010d}_module{sector}_{thread_id}.data");
  m.def("parse_raw_file_name", [](const std::filesystem::path& path) { return parse_raw_file_name(path.string()); },
        py::arg("path"), "The RawFileName a path's file name encodes, or None if it does not follow the pattern.");
  m.def("find_raw_files",
        [](const std::filesystem::path& directory, std::uint32_t scan_number) {
          return find_raw_files(directory.string(), scan_number);
        },
        py::arg("directory"), py::arg("scan_number"),
        "Paths of the scan's raw files in `directory`, sorted by sector then thread. Raises RawFileError "
        "if the directory cannot be listed.");
  m.def("find_replay_files",
        [](const std::filesystem::path& directory, std::uint32_t scan_number) {
          return find_replay_files(directory.string(), scan_number);
        },
        py::arg("directory"), py::arg("scan_number"),
        "What a replay reads of the scan: its whole raw files and its .partial ones (whose whole records "
        "count as spilled), sorted by sector, thread, then name. Raises RawFileError if the directory "
        "cannot be listed.");

  py::class_<RawFileWriter>(m, "RawFileWriter",
                            "Appends records to a new raw file data_scan..._module{sector}_{thread_id}.data, which "
                            "has that name only once closed whole; a context manager that closes it (abandons it "
                            "as .partial if the block raised).")
      .def(py::init([](const std::filesystem::path& directory, std::uint32_t scan_number, std::uint32_t sector,
                       std::uint32_t thread_id, const Geometry& geometry) {
             return RawFileWriter(directory.string(), scan_number, sector, thread_id, geometry);
           }),
           py::arg("directory"), py::arg("scan_number"), py::arg("sector"), py::arg("thread_id"), py::arg("geometry"),
           "Creates the directory if needed and the file in it; raises RawFileError if the file exists "
           "or cannot be created.")
      .def("write",
           [](RawFileWriter& writer, const DataHeader& header, const py::buffer& payload) {
             const py::buffer_info info = payload.request();
             if (!c_contiguous(info)) throw RawFileError(writer.path() + ": the payload must be C-contiguous");
             const auto bytes = static_cast<std::size_t>(info.size * info.itemsize);
             py::gil_scoped_release release;
             writer.write(header, info.ptr, bytes);
           },
           py::arg("header"), py::arg("payload"),
           "Append one record: the header's scan, frame, shape and position, then the payload (any "
           "C-contiguous buffer of exactly one sector; copied, not kept). Releases the GIL.")
      .def("flush", &RawFileWriter::flush, py::call_guard<py::gil_scoped_release>())
      .def("close", &RawFileWriter::close, py::call_guard<py::gil_scoped_release>(),
           "Flush, close and give the file its final name; raises RawFileError (the file renamed to "
           "<name>.partial) if it could not be completed.")
      .def("abandon", &RawFileWriter::abandon, py::call_guard<py::gil_scoped_release>(),
           "Close an incomplete file as <name>.partial (removed if it holds no whole record); returns "
           "where it is now.")
      .def_property_readonly("current_path", &RawFileWriter::current_path)
      .def_property_readonly("failed", &RawFileWriter::failed)
      .def_property_readonly("records_in_file", &RawFileWriter::records_in_file)
      .def_property_readonly("is_open", &RawFileWriter::is_open)
      .def_property_readonly("path", &RawFileWriter::path)
      .def_property_readonly("records", &RawFileWriter::records)
      .def_property_readonly("bytes_written", &RawFileWriter::bytes_written)
      .def("__enter__", [](RawFileWriter& writer) -> RawFileWriter& { return writer; },
           py::return_value_policy::reference)
      .def("__exit__", [](RawFileWriter& writer, const py::object& type, const py::object&, const py::object&) {
        // A block that raised did not finish the file: it must not pass as whole.
        if (type.is_none()) {
          writer.close();
        } else {
          writer.abandon();
        }
      });

  py::class_<RawFileReader>(m, "RawFileReader",
                            "Iterates the records of one raw file as (DataHeader, pixels), validating each; "
                            "pixels is a new (sector_rows, sector_cols) array.")
      .def(py::init([](const std::filesystem::path& path, const Geometry& geometry) {
             return std::make_unique<RawFileReader>(path.string(), geometry);
           }),
           py::arg("path"), py::arg("geometry"))
      .def("__iter__", [](RawFileReader& reader) -> RawFileReader& { return reader; },
           py::return_value_policy::reference)
      .def("__next__",
           [](RawFileReader& reader) {
             const Geometry& geometry = reader.geometry();
             py::array pixels(py::dtype("uint" + std::to_string(8 * geometry.itemsize)),
                              {std::size_t{geometry.sector_rows}, std::size_t{geometry.sector_cols}});
             void* data = pixels.mutable_data();
             DataHeader header;
             bool more = false;
             {
               py::gil_scoped_release release;
               more = reader.next(header, data, geometry.sector_bytes());
             }
             if (!more) throw py::stop_iteration();
             return py::make_tuple(header, pixels);
           })
      .def_property_readonly("path", &RawFileReader::path)
      .def_property_readonly("name", &RawFileReader::name)
      .def_property_readonly("offset", &RawFileReader::offset, "Byte offset of the next record.")
      .def_property_readonly("records", &RawFileReader::records, "Records read so far.")
      .def_property_readonly("partial", &RawFileReader::partial,
                             "A .partial file: read up to its last whole record.")
      .def("close", &RawFileReader::close)
      .def("__enter__", [](RawFileReader& reader) -> RawFileReader& { return reader; },
           py::return_value_policy::reference)
      .def("__exit__", [](RawFileReader& reader, const py::object&, const py::object&, const py::object&) {
        reader.close();
      });
}

}  // namespace

}  // namespace sectorflow::bindings

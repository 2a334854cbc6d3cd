// Python face of sectorflow::security: certificates, the key directory and the CURVE settings the
// option structs of the other components carry. No repr shows a secret key.
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "bindings.hpp"
#include "sectorflow/security/certificate.hpp"
#include "sectorflow/security/curve.hpp"
#include "sectorflow/security/errors.hpp"
#include "sectorflow/security/key_directory.hpp"
#include "sectorflow/security/zap_handler.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {

void bind_security(py::module_& m) {
  using namespace sectorflow::security;
  py::register_exception<SecurityError>(m, "SecurityError",
                                        py::module_::import("sectorflow.errors").attr("SectorflowValueError").ptr());
  py::list roles;
  for (const char* role : kRoles) roles.append(role);
  m.attr("ROLES") = py::tuple(roles);

  py::class_<Certificate>(m, "Certificate", "A CurveZMQ key pair as Z85 text (secret_key empty: a public certificate).")
      .def(py::init<>())
      .def_readwrite("public_key", &Certificate::public_key)
      .def_readwrite("secret_key", &Certificate::secret_key)
      .def("__repr__", [](const Certificate& c) {
        return "Certificate(public_key='" + c.public_key + "'" + (c.secret_key.empty() ? "" : ", secret_key=<hidden>") +
               ")";
      });
  m.def("read_certificate", &read_certificate, py::arg("path"),
        "Read a ZeroMQ certificate file (<name>.key or <name>.key_secret). Raises SecurityError naming the file.");
  m.def("generate_keypair", &generate_keypair, "A new CurveZMQ key pair.");
  m.def("is_z85_key", &is_z85_key, py::arg("key"), "Whether key is 40 characters of Z85 decoding to 32 bytes.");

  m.def("tier_member_key_name", &tier_member_key_name, py::arg("member"),
        "The certificate name of member `member` of an aggregation tier: 'member-<i>'.");
  py::class_<KeyDirectory>(m, "KeyDirectory", "A beamline's key directory: <dir>/<role>/<name>.key(_secret).")
      .def(py::init<std::string>(), py::arg("path"))
      .def("own", &KeyDirectory::own, py::arg("role"), py::arg("name") = "",
           "This process's key pair for role: the one secret of <role>/, or <role>/<name>.key_secret.")
      .def("has_own", &KeyDirectory::has_own, py::arg("role"), "Whether <role>/ holds a secret key.")
      .def("public_key", &KeyDirectory::public_key, py::arg("role"), py::arg("name") = "",
           "The public key of the one party of role (kvstore, aggregator), or of <role>/<name>.key.")
      .def("allowlist", &KeyDirectory::allowlist, py::arg("roles"),
           "Every public key of roles -> its identity '<role>/<name>'.")
      .def_property_readonly("path", &KeyDirectory::path);

  py::class_<CurveServer>(m, "CurveServer", "A socket that authenticates its peers against an allowlist (ZAP).")
      .def(py::init<>())
      .def_readwrite("public_key", &CurveServer::public_key)
      .def_readwrite("secret_key", &CurveServer::secret_key)
      .def_readwrite("domain", &CurveServer::domain)
      .def_readwrite("peers", &CurveServer::peers)
      .def_property_readonly("enabled", &CurveServer::enabled)
      .def("__repr__", [](const CurveServer& c) {
        return c.enabled() ? "CurveServer(domain='" + c.domain + "', " + std::to_string(c.peers.size()) + " peers)"
                           : std::string("CurveServer(off)");
      });
  py::class_<ZapStats>(m, "ZapStats", "CURVE handshakes a ZAP handler accepted and refused.")
      .def_readonly("accepted", &ZapStats::accepted)
      .def_readonly("refused", &ZapStats::refused)
      .def_readonly("refused_by_domain", &ZapStats::refused_by_domain);
  py::class_<CurveClient>(m, "CurveClient", "A socket that authenticates its server by its public key.")
      .def(py::init<>())
      .def_readwrite("public_key", &CurveClient::public_key)
      .def_readwrite("secret_key", &CurveClient::secret_key)
      .def_readwrite("server_key", &CurveClient::server_key)
      .def_property_readonly("enabled", &CurveClient::enabled)
      .def("__repr__", [](const CurveClient& c) {
        return c.enabled() ? "CurveClient(server_key='" + c.server_key + "')" : std::string("CurveClient(off)");
      });
}

}  // namespace sectorflow::bindings

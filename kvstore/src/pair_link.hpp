// One server's side of a Binary Star pair (kvstore/SPEC.md, "The pair"), as the Guide's clonesrv6
// leaves its pair to the bstar reactor: the link that tells the peer this server's state and hears
// the peer's (P + 3), the PairMachine (pair_state.hpp) it feeds with them and with the clients'
// snapshot requests (the vote), and what the table's outcomes do to the store (store.hpp): on
// becoming active it hands the store the writes it held and the ttls' grace; on becoming passive
// it mirrors the active into the store. The store asks it through PairGate. Private to the kvstore.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "sectorflow/kvstore/pair_state.hpp"
#include "sectorflow/security/curve.hpp"
#include "store.hpp"

namespace sectorflow::kvstore::detail {

// The peer link's listener (P + 3): the kvstore key pair, admitting the kvstore role's key alone, in
// a ZAP domain of its own so that no client role's key can hear the pair's states or feed them.
security::CurveServer peer_link_curve(const security::CurveServer& curve);

class PairLink final : public PairGate {
 public:
  // Makes the machine and the state's PUB (P + 3), not yet bound: the server's ZAP handler must
  // watch it before it binds (pair_pub()).
  explicit PairLink(Store& store);

  zmq::socket_t& pair_pub() { return pair_pub_; }
  // Binds P + 3 and connects to the peer's; after the ZAP handler is in place.
  void start();

  bool serving() const override { return machine_.active(); }
  bool admit_snapshot(zmq::message_t& frame) override;
  void hold(std::vector<zmq::message_t>&& parts) override;
  void describe(protocol::ServiceStatus& status, const ServerStats& stats) const override;

  // Says this server's state to the peer (every heartbeat, and at each change).
  void send_state();
  // The pair's sockets to poll (the peer's state, and the passive's mirror), appended to `items`.
  void poll_items(std::vector<zmq_pollitem_t>& items);
  // Reads what poll_items' sockets hold (`items` as zmq::poll left them), a batch from each.
  void on_readable(const std::vector<zmq_pollitem_t>& items);
  // The heartbeat's work: tells the peer, renews stalled sockets, notes the peer falling silent.
  void on_heartbeat(Clock::time_point now);
  // The lines for the daemon's log since the last call.
  std::vector<std::string> take_events();

 private:
  // Writes held while not active, oldest first.
  struct Pending {
    std::vector<zmq::message_t> parts;
    std::string uuid;
    Clock::time_point received;
    std::size_t bytes;
    Sender sender;  // judged as this writer when applied, as a single server judges it on arrival
  };
  // The passive's mirror of the active: a SUB to its P + 1 and a DEALER to its P, as a client.
  enum class Mirror { kOff, kConnecting, kSyncing, kMirroring };

  // Does what one outcome of the machine says: a change of state is logged and acted on.
  void on_outcome(const PairMachine::Outcome& outcome);
  void become_active();
  void become_passive();

  void note_event(std::string line);
  std::string peer_endpoint(int offset) const;
  Clock::duration heartbeat_period() const;
  void handle_peer_state();
  void connect_peer_link(Clock::time_point now);
  std::string peer_state_text(Clock::time_point now) const;

  void start_mirror();
  void stop_mirror();
  void ask_snapshot();
  void tend_mirror(Clock::time_point now);
  std::optional<KvMsg> read_mirror(zmq::socket_t& socket);
  void handle_mirror_update();
  void handle_mirror_snapshot();
  void take_stack_id(const std::string& id);
  LogRecord to_record(KvMsg&& msg) const;
  void apply_mirrored(KvMsg&& msg);

  void drop_pending_front();
  void age_pending(Clock::time_point now);
  void apply_pending();

  Store& store_;
  PairMachine machine_;
  zmq::socket_t pair_pub_;                 // P + 3: this server's state
  std::optional<zmq::socket_t> pair_sub_;  // the peer's P + 3
  std::optional<PairState> peer_heard_;    // the state the peer said last
  bool peer_silent_ = false;               // as last logged
  Clock::time_point peer_link_since_;      // when pair_sub_ last connected, or last heard a state
  std::size_t first_item_ = 0;             // of poll_items' sockets in the loop's items

  Mirror mirror_ = Mirror::kOff;
  std::optional<zmq::socket_t> mirror_sub_;
  std::optional<zmq::socket_t> mirror_dealer_;
  Clock::time_point mirror_since_;
  std::vector<KvMsg> mirror_snapshot_;  // the KVSYNCs of the snapshot under way
  std::vector<KvMsg> mirror_buffer_;    // the KVPUBs that came while it was under way
  std::vector<zmq::message_t> mirror_parts_;

  std::size_t pending_bytes_ = 0;
  std::list<Pending> pending_;
  std::unordered_map<std::string, std::list<Pending>::iterator> pending_by_uuid_;
  std::deque<std::string> mirrored_order_;
  std::unordered_set<std::string> mirrored_uuids_;

  mutable std::mutex events_mutex_;
  std::vector<std::string> events_;  // for the daemon's log (take_events)
};

}  // namespace sectorflow::kvstore::detail

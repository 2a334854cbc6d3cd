// The client's background agent: owns the sockets, runs the connecting -> syncing -> active state
// machine described in client.hpp, keeps the replica current and this client's own keys alive.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "client_status.hpp"
#include "commands.hpp"
#include "replica.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"

namespace sectorflow::kvstore::detail {

class Agent {
 public:
  Agent(const ClientOptions& options, Replica& replica, ClientStatus& status, CommandQueue& commands);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// The agent thread's body: returns after a kClose command, once the goodbye is sent.
  void run() noexcept;

 private:
  using Clock = std::chrono::steady_clock;

  struct OwnKey {
    std::string value;
    double ttl_s = 0.0;
    std::uint64_t order = 0;             ///< when it was last set: writes leave in call order
    Clock::time_point next_refresh{};    ///< valid entry of refresh_ while the key has a ttl
  };
  /// A write waiting for the server: an own key (sent with its current value) or a one-shot
  /// message (set_once, erase).
  struct Pending {
    std::string key;
    std::optional<KvMsg> once;
  };

  /// An XPUB to one server's collector (P + 2); its input is that server's subscription.
  struct Publisher {
    std::optional<zmq::socket_t> socket;
    int subscriptions = 0;  // live subscriptions of the server's collector
    bool seen = false;      // the server subscribed at least once on this socket
  };

  void loop();
  /// New sockets to every server (XPUBs) and to the current one (SUB, DEALER); starts at connecting.
  void connect();
  /// A new SUB to the current server's P + 1 and DEALER to its P.
  void open_readers();
  /// A new DEALER to P (the snapshot socket), replacing the old one and what is queued in it.
  void open_snapshot_socket();
  void disconnect();
  /// Pair: the current server was silent for a silence period; go to the other one.
  void move_on();
  bool pair() const { return servers_.size() > 1; }
  Publisher& current_publisher() { return publishers_[current_]; }
  const Publisher& current_publisher() const { return publishers_[current_]; }
  void enter(ClientState state);
  void log(const std::string& message) const;
  void warn(const std::string& message) const;
  /// At the end of a sync: the stack its snapshot named ("" if none). A new one is kept, said
  /// (warned if it replaces another) and stamped into the own statuses.
  void learn_stack(const std::string& id);
  /// `value` of `key` with this client's stack fields if it is a status (client.hpp, "Stack").
  void stamp(const std::string& key, std::string& value);
  /// The current server's P + offset.
  std::string endpoint(int offset) const;
  std::string endpoint(std::size_t server, int offset) const;

  void handle_commands();
  void handle_subscriptions(std::size_t server);
  void handle_published(const KvMsg& msg);
  void handle_snapshot(const KvMsg& msg);
  void apply_published(const KvMsg& msg);
  void resync(const std::string& why);
  void flush(Clock::time_point now);
  void republish_own_keys();
  bool one_shot_pending() const;
  bool publisher_handshaking() const;
  void goodbye();
  /// Sends to the current server (false: its XPUB is full) and mirrors to the other.
  bool send(KvMsg msg, zmq::send_flags flags = zmq::send_flags::dontwait);
  /// Best effort to a server that is not the current one, while its collector subscribes.
  void mirror(std::size_t server, const KvMsg& msg);
  std::optional<KvMsg> receive(zmq::socket_t& socket);
  /// Runs the handling of one message or command: what it throws is counted and the first of each
  /// `kind` logged, and the agent goes on.
  void guarded(const char* kind, const std::function<void()>& handle);
  bool in_subtree(const std::string& key) const;
  Clock::time_point wake_time() const;

  const ClientOptions& options_;
  Replica& replica_;
  ClientStatus& status_;
  CommandQueue& commands_;
  const Clock::duration silence_;
  const bool full_tree_;
  const std::vector<ServerAddress> servers_;  // primary first

  zmq::context_t context_{1};
  std::optional<zmq::socket_t> snapshot_;    // DEALER -> the current server's P
  std::optional<zmq::socket_t> subscriber_;  // SUB -> the current server's P + 1
  std::vector<Publisher> publishers_;        // one XPUB per server: every write goes to each
  std::size_t current_ = 0;                  // the server SUB and DEALER talk to
  std::size_t synced_server_ = SIZE_MAX;     // the server of the last sync (stamped into statuses)
  bool last_move_unheard_ = false;           // the last move left a server never heard: say no more

  ClientState state_ = ClientState::kConnecting;
  Clock::time_point silence_deadline_;
  Clock::time_point sync_deadline_;  // syncing: the next snapshot message is due by then
  std::int64_t sequence_ = 0;
  std::map<std::string, std::string> snapshot_entries_;
  std::vector<KvMsg> buffered_;  // published while syncing
  std::string snapshot_stack_;   // syncing: the stack id the snapshot's server status names
  StackIdentity stack_;          // a copy lives in status_ for the frontend
  bool publisher_full_ = false;   // the current XPUB reached its high-water mark: wait until it is writable

  std::map<std::string, OwnKey> own_;
  std::map<std::uint64_t, Pending> pending_;  // by call order
  std::multimap<Clock::time_point, std::string> refresh_;  // own keys with a ttl; stale entries skipped
  std::uint64_t next_order_ = 0;
  std::vector<zmq::message_t> parts_;          // the frames of the message being received
  std::set<std::string> error_kinds_logged_;   // kinds of error logged once already
  bool closing_ = false;
  Clock::time_point closing_deadline_;
};

}  // namespace sectorflow::kvstore::detail

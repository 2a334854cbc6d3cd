// The kvstore pair's state machine: the ZeroMQ Guide's Binary Star (chapter 4), as Clone model six
// (chapter 5) runs its server (kvstore/SPEC.md, "The pair"). Two servers, a primary and a backup,
// tell each other their state every heartbeat; exactly one is active (takes writes, answers
// snapshots, publishes), the other passive (mirrors the active). The passive takes over only when
// the active has been silent for the peer silence period *and* a client asks it for a snapshot: a
// client that reaches neither server's peer link cannot make a second active, because while the
// active lives its clients stay with it and ask the passive nothing.
//
// The machine is pure: the server feeds it what its peer said and its clients' snapshot requests,
// with the time, and does what the outcome says. Every transition is one row of kPairTable, which
// kvstore/SPEC.md prints.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string_view>

namespace sectorflow::kvstore {

/// Where a server of the pair stands. kPrimary and kBackup are the starting states: waiting to hear
/// the peer.
enum class PairState { kPrimary, kBackup, kActive, kPassive };
/// What a server learns: its peer's state (a peer heartbeat), or a client's snapshot request with
/// the peer heard within the silence period or not.
enum class PairEvent { kPeerPrimary, kPeerBackup, kPeerActive, kPeerPassive, kRequestPeerAlive, kRequestPeerSilent };

inline constexpr std::size_t kPairStates = 4;
inline constexpr std::size_t kPairEvents = 6;

std::string_view name(PairState state);
std::string_view name(PairEvent event);
/// The state a peer heartbeat names ("primary", "backup", "active", "passive"), or nothing.
std::optional<PairState> parse_pair_state(std::string_view text);

/// One cell of the table: the next state of the primary and of the backup (they differ only where
/// the pair disagrees), whether a client request is served, and why (logged on a change of state
/// or a refusal; empty where nothing is worth a line).
struct PairStep {
  PairState primary;
  PairState backup;
  bool serve;
  std::string_view why;
};

/// kPairTable[state][event]. Where the Guide aborts (two actives, two passives) the pair settles on
/// the primary as the active instead: a facility's kvstore must not stop because its pair disagreed
/// for a moment. A backup that yields resyncs from the primary, and what it took alone during the
/// split is lost, which the server counts and logs.
extern const std::array<std::array<PairStep, kPairEvents>, kPairStates> kPairTable;

/// One server's side of the pair: its state and when its peer was last heard.
class PairMachine {
 public:
  using Clock = std::chrono::steady_clock;

  /// `primary`: this server is the pair's primary (configuration), else the backup. `silence`: how
  /// long the peer may say nothing before it counts as gone (kvstore/SPEC.md: two heartbeats).
  /// `start`: when the server started; the peer counts as heard then.
  PairMachine(bool primary, Clock::duration silence, Clock::time_point start);

  PairState state() const { return state_; }
  bool primary() const { return primary_; }
  bool active() const { return state_ == PairState::kActive; }
  /// Whether the peer was heard within the silence period before `now` (never heard: only once the
  /// silence period since the start has passed, so that a restarting primary does not take over
  /// from a backup that is active).
  bool peer_alive(Clock::time_point now) const;

  /// What one event did: the table's cell, and this server's state before and after it.
  struct Outcome {
    PairEvent event;
    PairState before;
    PairState after;
    bool serve;
    std::string_view why;

    bool changed() const { return before != after; }
  };

  /// The peer's heartbeat, naming its state: applies the table.
  Outcome on_peer(PairState peer, Clock::time_point now);
  /// A client asks for a snapshot (the Binary Star vote): applies the table; the request is
  /// answered if the outcome says serve.
  Outcome on_request(Clock::time_point now);

 private:
  Outcome apply(PairEvent event);

  bool primary_;
  Clock::duration silence_;
  PairState state_;
  Clock::time_point peer_expiry_;
};

}  // namespace sectorflow::kvstore
